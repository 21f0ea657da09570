"""MGG (Multi-Generation GenEval) over stored text-first chains.

Each chain starts from one GenEval prompt (T0) and draws an image at every odd
generation g = 1, 3, ... (text-first: T0 -> I1 -> T2 -> I3 ...). Every drawn image is
judged against the *original* prompt's metadata with GenEval's rules
(:mod:`lmms_genbench.metrics.functional.geneval`); accuracy per (generation, tag) goes into
:class:`~lmms_genbench.metrics.functional.geneval.GenEvalStats`, GenEval's overall per generation
is the mean over tags, and MGG the mean of those over generations (paper 003 §3.2).

A chain that failed or stopped early (a blank or safety-filtered drawing, a refused
description, ...) is not scored on its first few generations: it is a counted failure
with its reason, exactly like the MCD scorer, so every generation's accuracy has the
same denominator. ``n_failed`` is reported next to the score.

Rules: the score thresholds come from a named rule set of
:data:`~lmms_genbench.metrics.functional.geneval.RULE_PRESETS`: ``"owlv2"`` (default: 0.1 for
every tag, as the paper's authors ran OWLv2) or ``"geneval"`` (GenEval's 0.3, counting 0.9,
chosen for Mask2Former). A task picks one with ``generation_kwargs.scorer: {rules: geneval}``;
the environment variable ``LMMS_GENBENCH_MGG_RULES`` overrides the task. The report names the
rule set and its thresholds under ``rules``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..functional.geneval import (
    DEFAULT_COLOR_CLIP,
    DEFAULT_DETECTOR,
    DEFAULT_RULES,
    TAGS,
    GenEvalRules,
    GenEvalStats,
    rules_preset,
    validate_metadata,
)
from ..functional.intervals import doc_table
from ..networks.common import check_batch_size, check_device, check_dtype
from ...core.progress import progress
from .base import ChainScorer, with_stderr
from .blocks import bar_blocks, load_rgb, prefetched_blocks
from .records import ChainRecord, doc_means
from .stored import FEATURES, FeatureSource
from .settings import resolve_device_and_batch, resolve_dtype

__all__ = ["ENV_COLOR_CLIP", "ENV_DETECTOR", "ENV_RULES", "MGG", "MGGScorer", "MGGSettings"]

logger = logging.getLogger(__name__)

ENV_DETECTOR = "LMMS_GENBENCH_DETECTOR"
ENV_COLOR_CLIP = "LMMS_GENBENCH_COLOR_CLIP"
ENV_RULES = "LMMS_GENBENCH_MGG_RULES"


@dataclasses.dataclass(frozen=True)
class MGGSettings:
    """Networks and settings of the MGG scorer.

    Args:
        detector: OWLv2 spec for :func:`~lmms_genbench.metrics.networks.detection.build_detector`
            (hub name, local folder, or ``"tiny-owlv2"``).
        color_classifier: CLIP spec for
            :func:`~lmms_genbench.metrics.networks.detection.build_color_classifier`.
        device: torch device string.
        batch_size: colour crops per CLIP pass; also images decoded ahead per block.
        rules: name of the rule set (``"owlv2"`` or ``"geneval"``; module docstring).
        dtype: weights of the detector and the colour CLIP (``float32``; ``bfloat16``
            trades digits for speed).
    """

    detector: str
    color_classifier: str
    device: str = "cpu"
    batch_size: int = 32
    rules: str = DEFAULT_RULES
    dtype: str = "float32"

    def __post_init__(self) -> None:
        for name in ("detector", "color_classifier"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty model spec string, got {value!r}")
        check_device(self.device)
        check_batch_size(self.batch_size)
        object.__setattr__(self, "dtype", check_dtype(self.dtype))  # bf16 -> bfloat16: one report key
        rules_preset(self.rules, f"the MGG scorer's rules (generation_kwargs.scorer.rules or {ENV_RULES})")

    @property
    def geneval_rules(self) -> GenEvalRules:
        """The thresholds and limits of :attr:`rules`."""
        return rules_preset(self.rules)

    @classmethod
    def resolve(cls, defaults: Mapping[str, Any]) -> MGGSettings:
        """Task ``defaults`` overridden by ``LMMS_GENBENCH_DETECTOR``,
        ``LMMS_GENBENCH_COLOR_CLIP``, ``LMMS_GENBENCH_MGG_RULES``,
        ``LMMS_GENBENCH_SCORER_DEVICE`` and ``LMMS_GENBENCH_SCORER_BATCH``."""
        if not isinstance(defaults, Mapping):
            raise TypeError(f"defaults must be a mapping, got {type(defaults).__name__}")
        device, batch = resolve_device_and_batch(defaults)
        paper = MGGScorer.PRESETS["paper"]
        return cls(
            detector=str(os.environ.get(ENV_DETECTOR) or defaults.get("detector") or paper["detector"]),
            color_classifier=str(
                os.environ.get(ENV_COLOR_CLIP) or defaults.get("color_classifier") or paper["color_classifier"]
            ),
            device=device,
            batch_size=batch,
            rules=os.environ.get(ENV_RULES) or defaults.get("rules") or paper["rules"],
            dtype=resolve_dtype(defaults),
        )


def _image_generations(G: int) -> list[int]:
    return list(range(1, G + 1, 2))


def _prepare(rec: ChainRecord, G: int) -> list[tuple[int, str]] | str:
    """The chain's drawn generations 1, 3, ... <= G, or why it cannot be scored."""
    if not rec.ok:
        return rec.reason or "failed"
    if rec.direction != "text_first":
        return f"MGG scores text-first chains, got {rec.direction!r}"
    wanted = _image_generations(G)
    missing = [g for g in wanted if g > rec.generations]
    if missing:
        return f"chain has no image for generation(s) {missing[:3]}"
    return [(g, rec.path(g)) for g in wanted]


class MGGScorer(ChainScorer):
    """GenEval's rules on every drawn generation of text-first chains (G = the task's
    ``generations``): MGG, GenEval per generation, the tag x generation heatmap."""

    name = "mgg"
    report_file = "mgg_report.json"
    Settings = MGGSettings
    PRESETS = {
        # the paper's detector (OWLv2 large, REFERENCE_NOTES) with the thresholds its authors
        # ran it at, and GenEval's colour CLIP (ViT-L/14)
        "paper": {"detector": DEFAULT_DETECTOR, "color_classifier": DEFAULT_COLOR_CLIP, "rules": DEFAULT_RULES},
        # offline: random-weight tiny OWLv2 and CLIP (plumbing, not accuracy)
        "smoke": {"detector": "tiny-owlv2", "color_classifier": "tiny-clip", "device": "cpu", "batch_size": 8},
    }

    def fields(self, doc, chain):
        """The doc's GenEval entry (its ``metadata`` field, a dict or its JSON, else the doc)."""
        metadata = doc.get("metadata", doc)
        try:
            if isinstance(metadata, str):  # docs keep it as JSON (see data.sdp.load_geneval_docs)
                metadata = json.loads(metadata)
            return {"metadata": validate_metadata(metadata)}
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bad GenEval metadata: {exc}") from None

    prepare = staticmethod(_prepare)  # the report lists each chain it refuses

    def metric_names(self, length: int, settings: Mapping[str, Any]) -> list[str]:
        drawn = _image_generations(length)  # text-first chains draw at odd generations
        names = ["mgg"] + [f"geneval@{g}" for g in drawn] + [f"mgg_{t}" for t in TAGS]
        names += [f"mgg_{t}@{g}" for t in TAGS for g in drawn]
        # MGG and GenEval per generation: ± (bootstrap) in lmms-eval's table
        return with_stderr(names, ["mgg", *(f"geneval@{g}" for g in drawn)]) + ["n_scored", "n_failed", "n_images"]

    def score(
        self,
        records: Sequence[ChainRecord],
        settings: MGGSettings,
        length: int,
        *,
        detector: Any = None,
        color_classifier: Any = None,
    ) -> dict[str, Any]:
        """Judge every drawn generation of every chain and return a flat report.

        ``detector``/``color_classifier``: ready adapters (tests); default built from ``settings``.

        Report keys: ``mgg`` (mean over generations of the overall), ``geneval@<g>``
        (GenEval overall of generation g, so ``geneval@1`` is plain single-pass GenEval),
        ``mgg_<tag>@<g>`` (tag accuracy per generation: the heatmap), ``mgg_<tag>`` (tag
        accuracy averaged over generations), ``n_scored``, ``n_failed``, ``n_images``,
        ``failure_reasons``, ``rules`` (the rule set's name and thresholds), ``generations``,
        ``scored_generations``, ``counts``.
        """
        from ..networks.detection import evaluate_images, get_color_classifier, get_detector

        from .stored_geneval import StoredGenEval

        G = length
        triage = self.triage(records, G, lambda r: r.chain_id)
        failures = triage.failures
        ready = [(rec.fields["metadata"], drawn) for rec, drawn in triage.ready]
        ids = [rec.chain_id for rec, _ in triage.ready]  # the doc table's rows, as ready
        verdicts: list[bool] = []  # each drawn image's, in ready's order: the doc table's cells

        rules = settings.geneval_rules
        stats = GenEvalStats()
        # networks behind the store's feature cache (detections, crop colours): loaded only at a
        # missing item; adapters handed in (tests) are called as they are
        source = FeatureSource.for_namespaces([r.namespace for r, _ in triage.ready])
        stored = StoredGenEval(source, settings) if detector is None and color_classifier is None else None
        if ready:
            if stored is None:
                detector = detector or get_detector(settings.detector, device=settings.device, dtype=settings.dtype)
                needs_color = any("color" in req for meta, _ in ready for req in meta["include"])
                if needs_color and color_classifier is None:
                    color_classifier = get_color_classifier(
                        settings.color_classifier, device=settings.device, batch_size=settings.batch_size,
                        dtype=settings.dtype,
                    )
            block = max(1, settings.batch_size // max(1, len(_image_generations(G))))
            with progress(desc="MGG chains", total=len(ready), unit="chain") as bar:  # closed however it ends
                load = source.load if stored is not None else load_rgb  # paths: an image is decoded only if missing
                blocks = prefetched_blocks(ready, block, lambda item: [p for _, p in item[1]], load)
                for chunk, images in bar_blocks(bar, blocks):
                    # the block's pictures go to the detector together (one batched call)
                    metas = [meta for meta, drawn in chunk for _ in drawn]
                    drawn_at = [g for _meta, drawn in chunk for g, _path in drawn]
                    if stored is not None:
                        results = stored.evaluate(images, metas, rules)
                    else:
                        results = evaluate_images(
                            images, metas, detector=detector, color_classifier=color_classifier, rules=rules
                        )
                    for g, result in zip(drawn_at, results):
                        stats.add_result(result, generation=g)
                        verdicts.append(result.correct)

        report: dict[str, Any] = {
            "generations": G,
            "scored_generations": stats.generations,
            "n_scored": len(ready),
            "n_failed": sum(failures.values()),
            "n_images": sum(n for _c, n in stats.counts.values()),
            "failure_reasons": dict(sorted(failures.items())),
            "rules": {"name": settings.rules, **dataclasses.asdict(rules)},
            "mgg": stats.mgg() if stats.generations else math.nan,
        }
        for g in stats.generations:
            report[f"geneval@{g}"] = stats.overall(g)
            for tag, acc in stats.tag_accuracy(g).items():
                report[f"mgg_{tag}@{g}"] = acc
        for tag in TAGS:
            per_gen = [report[f"mgg_{tag}@{g}"] for g in stats.generations if f"mgg_{tag}@{g}" in report]
            report[f"mgg_{tag}"] = sum(per_gen) / len(per_gen) if per_gen else math.nan
        report["counts"] = stats.to_dict()["counts"]
        report["doc_scores"] = _doc_scores(ids, [meta["tag"] for meta, _ in ready], verdicts, _image_generations(G))
        report["verdicts"] = triage.reasons()
        if stored is not None:
            report[FEATURES] = source.summary()
        if failures:
            logger.warning("MGG: %d chains not scored: %s", report["n_failed"], dict(failures))
        return report

    def host_scores(self, report: Mapping[str, Any]) -> tuple[str, dict[str, tuple[float, str | None]]]:
        """Each prompt's pass rate over the scored generations, clustered by its GenEval tag."""
        passes = [f"correct@{g}" for g in report.get("scored_generations") or ()]
        return "mgg", doc_means(report.get("doc_scores") or {}, passes, "tag")

    def estimators(self, report: Mapping[str, Any], settings: MGGSettings) -> dict[str, dict[str, Any]]:
        """GenEval per generation (the mean over tags of each tag's accuracy), MGG (their mean
        over generations), the same per tag; prompts resampled within tags."""
        gens = report["scored_generations"]
        per_gen = {g: {"kind": "macro", "column": f"correct@{g}", "by": "tag"} for g in gens}
        specs = {"mgg": {"kind": "avg", "of": list(per_gen.values()), "strata": "tag"}}
        specs.update({f"geneval@{g}": spec for g, spec in per_gen.items()})
        for tag in sorted(set(report["doc_scores"]["columns"]["tag"])):
            own = {g: {**spec, "members": [tag]} for g, spec in per_gen.items()}
            specs[f"mgg_{tag}"] = {"kind": "avg", "of": list(own.values()), "strata": "tag"}
            specs.update({f"mgg_{tag}@{g}": spec for g, spec in own.items()})
        return specs


def _doc_scores(ids: list[str], tags: list[str], verdicts: list[bool], gens: list[int]) -> dict[str, Any]:
    """Each scored prompt's tag and 0/1 verdict per drawn generation (``correct@<g>``), the
    rows of GenEval's per-tag accuracies (``report["doc_scores"]``)."""
    grid = np.asarray(verdicts, dtype=np.float64).reshape(len(ids), len(gens))
    columns: dict[str, Any] = {f"correct@{g}": grid[:, j].tolist() for j, g in enumerate(gens)}
    return doc_table(ids, {**columns, "tag": tags})


#: the scorer every MGG task uses (its report cache is process-wide)
MGG = MGGScorer()
