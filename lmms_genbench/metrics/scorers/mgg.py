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
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..networks.common import check_batch_size, check_device
from .base import NOT_A_CHAIN, ReportCache, cached_report, failure_reason, parse_chain, prefetched_blocks, resolve_device_and_batch, write_report_json
from ..functional.geneval import DEFAULT_COLOR_CLIP, TAGS, GenEvalStats, validate_metadata
from ..networks.detection import evaluate_image

__all__ = [
    "ENV_COLOR_CLIP",
    "ENV_DETECTOR",
    "PAPER_MGG_SCORER",
    "SMOKE_MGG_SCORER",
    "MGGScorerConfig",
    "mgg_record",
    "report_value",
    "score_mgg_chains",
]

logger = logging.getLogger(__name__)

ENV_DETECTOR = "LMMS_GENBENCH_DETECTOR"
ENV_COLOR_CLIP = "LMMS_GENBENCH_COLOR_CLIP"

#: the paper's detector (OWLv2 large, REFERENCE_NOTES) and GenEval's colour CLIP (ViT-L/14)
PAPER_MGG_SCORER: dict[str, Any] = {
    "detector": "google/owlv2-large-patch14-ensemble",
    "color_classifier": DEFAULT_COLOR_CLIP,
}
#: offline smoke preset: random-weight tiny OWLv2 and CLIP (plumbing, not accuracy)
SMOKE_MGG_SCORER: dict[str, Any] = {
    "detector": "tiny-owlv2",
    "color_classifier": "tiny-clip",
    "device": "cpu",
    "batch_size": 8,
}


@dataclass(frozen=True)
class MGGScorerConfig:
    """Networks and settings of the MGG scorer.

    Args:
        detector: OWLv2 spec for :func:`~lmms_genbench.metrics.functional.geneval.build_detector`
            (hub name, local folder, or ``"tiny-owlv2"``).
        color_classifier: CLIP spec for
            :func:`~lmms_genbench.metrics.functional.geneval.build_color_classifier`.
        device: torch device string.
        batch_size: colour crops per CLIP pass; also images decoded ahead per block.
    """

    detector: str
    color_classifier: str
    device: str = "cpu"
    batch_size: int = 32

    def __post_init__(self) -> None:
        for name in ("detector", "color_classifier"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty model spec string, got {value!r}")
        check_device(self.device)
        check_batch_size(self.batch_size)

    @classmethod
    def resolve(cls, defaults: Mapping[str, Any]) -> MGGScorerConfig:
        """Task ``defaults`` overridden by ``LMMS_GENBENCH_DETECTOR``,
        ``LMMS_GENBENCH_COLOR_CLIP``, ``LMMS_GENBENCH_SCORER_DEVICE`` and
        ``LMMS_GENBENCH_SCORER_BATCH``."""
        if not isinstance(defaults, Mapping):
            raise TypeError(f"defaults must be a mapping, got {type(defaults).__name__}")
        device, batch = resolve_device_and_batch(defaults)
        return cls(
            detector=str(os.environ.get(ENV_DETECTOR) or defaults.get("detector") or PAPER_MGG_SCORER["detector"]),
            color_classifier=str(
                os.environ.get(ENV_COLOR_CLIP)
                or defaults.get("color_classifier")
                or PAPER_MGG_SCORER["color_classifier"]
            ),
            device=device,
            batch_size=batch,
        )


# --------------------------------------------------------------------------- per-doc records
def mgg_record(response: str, doc: Mapping[str, Any], scorer: Mapping[str, Any]) -> dict[str, Any]:
    """Per-doc record from the cycle model's JSON response; never raises.

    Returns ``{chain_id, status, reason, metadata, images, scorer}``: ``metadata`` is the
    doc's GenEval entry (tag, include, exclude; the doc's ``metadata`` field, a dict or its
    JSON, else the doc itself), ``images`` the ``[g, path]`` of each
    drawn generation in order. A doc whose metadata is invalid is a failed record.
    """
    record: dict[str, Any] = {
        "chain_id": str(doc.get("chain_id", doc.get("question_id", ""))),
        "status": "failed",
        "reason": None,
        "metadata": None,
        "images": [],
        "scorer": dict(scorer),
    }
    metadata = doc.get("metadata", doc)
    try:
        if isinstance(metadata, str):  # docs keep it as JSON (see sdp_data.load_geneval_docs)
            metadata = json.loads(metadata)
        record["metadata"] = validate_metadata(metadata)
    except (TypeError, ValueError) as exc:
        record["reason"] = f"bad GenEval metadata: {exc}"
        return record
    chain = parse_chain(response)
    if chain is None:
        record["reason"] = NOT_A_CHAIN
        return record
    try:
        record["chain_id"] = str(chain.get("chain_id", record["chain_id"]))
        if chain.get("direction") not in (None, "text_first"):
            record["reason"] = f"MGG scores text-first chains, got {chain.get('direction')!r}"
            return record
        record["status"] = chain.get("status", "failed")
        record["reason"] = failure_reason(chain.get("failure"))
        hops = sorted(chain.get("hops") or [], key=lambda h: int(h["hop"]))
        record["images"] = [[int(h["hop"]), str(h["path"])] for h in hops if h.get("kind") == "image"]
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        record["status"] = "failed"
        record["reason"] = f"malformed chain: {type(exc).__name__}: {exc}"
        record["images"] = []
    return record


# --------------------------------------------------------------------------- scoring
def _image_generations(G: int) -> list[int]:
    return list(range(1, G + 1, 2))


def _prepare(rec: Mapping[str, Any], G: int) -> list[tuple[int, str]] | str:
    """The chain's drawn generations 1, 3, ... <= G, or why it cannot be scored."""
    if rec.get("status") != "ok":
        return rec.get("reason") or "failed"
    if not rec.get("metadata"):
        return rec.get("reason") or "no GenEval metadata"
    images = {int(g): str(p) for g, p in rec.get("images") or []}
    wanted = _image_generations(G)
    missing = [g for g in wanted if g not in images]
    if missing:
        return f"chain has no image for generation(s) {missing[:3]}"
    return [(g, images[g]) for g in wanted]


def score_mgg_chains(
    records: Sequence[Mapping[str, Any]],
    config: MGGScorerConfig,
    generations: int | None = None,
    *,
    detector: Any = None,
    color_classifier: Any = None,
) -> dict[str, Any]:
    """Judge every drawn generation of every chain and return a flat report.

    Args:
        records: per-doc records from :func:`mgg_record`; a repeated chain_id counts once.
        config: networks and settings (ignored for a network passed directly).
        generations: G. None: the longest among the records with status "ok".
        detector, color_classifier: ready adapters (tests); default built from ``config``.

    Report keys: ``mgg`` (mean over generations of the overall), ``geneval@<g>``
    (GenEval overall of generation g, so ``geneval@1`` is plain single-pass GenEval),
    ``mgg_<tag>@<g>`` (tag accuracy per generation: the heatmap), ``mgg_<tag>`` (tag
    accuracy averaged over generations), ``n_scored``, ``n_failed``, ``n_images``,
    ``failure_reasons``, ``generations``, ``scored_generations``.
    """
    from ..networks.detection import get_color_classifier, get_detector

    if not isinstance(config, MGGScorerConfig):
        raise TypeError(f"config must be an MGGScorerConfig, got {type(config).__name__}")
    if generations is not None and (isinstance(generations, bool) or not isinstance(generations, int) or generations < 1):
        raise ValueError(f"generations must be an integer >= 1 or None, got {generations!r}")

    unique: dict[str, Mapping[str, Any]] = {}
    for rec in sorted(records, key=lambda r: str(r.get("chain_id", ""))):
        unique.setdefault(str(rec.get("chain_id", "")), rec)  # rank padding repeats docs
    if generations is None:
        ok = [max((int(g) for g, _ in r.get("images") or []), default=0) for r in unique.values() if r.get("status") == "ok"]
        G = max(ok, default=0)
    else:
        G = generations

    failures: Counter[str] = Counter()
    ready: list[tuple[dict[str, Any], list[tuple[int, str]]]] = []
    for rec in unique.values():
        prepared = _prepare(rec, G) if G >= 1 else "chain has no generations"
        if isinstance(prepared, str):
            failures[prepared.split(":")[0]] += 1
        else:
            ready.append((rec["metadata"], prepared))

    stats = GenEvalStats()
    if ready:
        detector = detector or get_detector(config.detector, device=config.device)
        needs_color = any("color" in req for meta, _ in ready for req in meta["include"])
        if needs_color and color_classifier is None:
            color_classifier = get_color_classifier(
                config.color_classifier, device=config.device, batch_size=config.batch_size
            )
        block = max(1, config.batch_size // max(1, len(_image_generations(G))))
        for chunk, images in prefetched_blocks(ready, block, lambda item: [p for _, p in item[1]]):
            pictures = iter(images)
            for meta, drawn in chunk:
                for g, _path in drawn:
                    result = evaluate_image(
                        next(pictures), meta, detector=detector, color_classifier=color_classifier
                    )
                    stats.add_result(result, generation=g)

    report: dict[str, Any] = {
        "generations": G,
        "scored_generations": stats.generations,
        "n_scored": len(ready),
        "n_failed": sum(failures.values()),
        "n_images": sum(n for _c, n in stats.counts.values()),
        "failure_reasons": dict(sorted(failures.items())),
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
    if failures:
        logger.warning("MGG: %d chains not scored: %s", report["n_failed"], dict(failures))
    return report


def _write_report(records: Sequence[Mapping[str, Any]], report: Mapping[str, Any]) -> None:
    """``mgg_report.json`` (with the per-cell counts) beside the chains."""
    namespaces = sorted(
        {os.path.dirname(os.path.dirname(p)) for r in records for _g, p in (r.get("images") or [])}
    )
    for namespace in namespaces:
        write_report_json(os.path.join(namespace, "mgg_report.json"), report, "MGG")


_CACHE = ReportCache()


def report_value(records: Sequence[Mapping[str, Any]], metric: str, generations: int | None = None) -> Any:
    """One report key for lmms-eval's per-metric aggregation (NaN when it has no data);
    the chains are judged once per set of records and settings."""
    if not records:
        return math.nan
    config = MGGScorerConfig.resolve(records[0].get("scorer") or PAPER_MGG_SCORER)
    report = cached_report(
        _CACHE, records, (generations, config), lambda: score_mgg_chains(records, config, generations), _write_report
    )
    return report.get(metric, math.nan)
