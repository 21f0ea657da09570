"""GenCeption scoring of stored chains: GC@T (eq. 3) and GC_FID@T (eq. 4).

Input: one small record per doc (ids, status, image paths). Chains are read
from disk category by category in blocks, each block of images encoded once
for the similarity encoder and once for FID features, so memory is bounded by
the block size and the per-category FID statistics, not by the dataset.
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import (  # ENV_DEVICE / ENV_BATCH re-exported: they were defined here
    ENV_BATCH,  # noqa: F401
    ENV_DEVICE,  # noqa: F401
    ReportCache,
    failure_reason,
    macro_mean,
    prefetched_blocks,
    resolve_device_and_batch,
    unit_rows,
    write_report_json,
)

logger = logging.getLogger(__name__)

# Scoring settings a user can override at run time without editing a task
# (device and batch size: ENV_DEVICE, ENV_BATCH, shared with the other scorers).
ENV_IMAGE_ENCODER = "LMMS_GENBENCH_IMAGE_ENCODER"
ENV_FID_FEATURES = "LMMS_GENBENCH_FID_FEATURES"

# The authors' encoder and FID network (REFERENCE_NOTES)
PAPER_SCORER = {
    "image_encoder": "google/vit-base-patch16-224-in21k",
    "fid_features": "clean-fid",
}


@dataclass(frozen=True)
class ScorerConfig:
    image_encoder: str
    fid_features: str | None  # None: skip FID
    device: str
    batch_size: int

    @classmethod
    def resolve(cls, defaults: Mapping[str, Any]) -> ScorerConfig:
        """Task defaults, overridden by the ``LMMS_GENBENCH_*`` environment."""
        fid = os.environ.get(ENV_FID_FEATURES, defaults.get("fid_features"))
        device, batch = resolve_device_and_batch(defaults)
        return cls(
            image_encoder=os.environ.get(ENV_IMAGE_ENCODER, defaults["image_encoder"]),
            fid_features=None if fid in (None, "", "none", "off") else str(fid),
            device=device,
            batch_size=batch,
        )


def chain_record(
    response: str, doc: Mapping[str, Any], category: str, scorer: Mapping[str, Any]
) -> dict[str, Any]:
    """Per-doc record from the cycle model's JSON response; never raises."""
    import json

    chain_id = str(doc.get("chain_id", doc.get("question_id", "")))
    try:
        chain = json.loads(response)
    except (TypeError, ValueError):
        return {
            "chain_id": chain_id,
            "category": category,
            "status": "failed",
            "reason": "response is not a chain (was the cycle model used?)",
            "images": [],
            "scorer": dict(scorer),
        }
    images = [h["path"] for h in chain.get("hops", []) if h.get("kind") == "image"]
    reason = failure_reason(chain.get("failure"))
    return {
        "chain_id": chain.get("chain_id", chain_id),
        "category": category,
        "status": chain.get("status", "failed"),
        "reason": reason,
        "images": images,
        "scorer": dict(scorer),
    }


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


def score_chains(
    records: Sequence[Mapping[str, Any]],
    iterations: int,
    config: ScorerConfig,
    groups: Mapping[str, Sequence[str]] | None = None,
    block_docs: int | None = None,
) -> dict[str, Any]:
    """Score chains and return a flat report (see keys below).

    A record counts only if its chain finished all ``iterations``; any other
    record is a failed doc with its reason, never a shorter GC.
    """
    from ..networks.encoders import get_image_encoder
    from ..functional.fid import FrechetStats
    from ..functional.gc import gc_at_t, gc_fid_at_t
    from ..networks.inception import get_fid_extractor

    T = int(iterations)
    failures: Counter[str] = Counter()
    by_category: dict[str, list[Mapping[str, Any]]] = OrderedDict()
    categories: dict[str, CategoryScore] = OrderedDict()
    seen: set[str] = set()
    # a fixed order makes the float sums, hence the scores, identical however the
    # records were sharded and gathered across processes
    for rec in sorted(records, key=lambda r: (str(r["category"]), str(r["chain_id"]))):
        key = f"{rec['category']}|{rec['chain_id']}"
        if key in seen:  # a doc repeated (rank padding) counts once
            continue
        seen.add(key)
        cat = categories.setdefault(rec["category"], CategoryScore())
        if rec.get("status") != "ok":
            cat.n_failed += 1
            failures[(rec.get("reason") or "failed").split(":")[0]] += 1
            continue
        if len(rec["images"]) != T + 1:
            cat.n_failed += 1
            failures[f"chain has {len(rec['images']) - 1} of {T} iterations"] += 1
            continue
        missing = [p for p in rec["images"] if not os.path.isfile(p)]
        if missing:
            cat.n_failed += 1
            failures["artifact missing on disk"] += 1
            continue
        by_category.setdefault(rec["category"], []).append(rec)

    encoder = get_image_encoder(
        config.image_encoder, device=config.device, batch_size=config.batch_size
    )
    fid_extractor = (
        get_fid_extractor(
            config.fid_features, device=config.device, batch_size=config.batch_size
        )
        if config.fid_features
        else None
    )
    block = block_docs or max(1, config.batch_size // (T + 1))
    for name, docs in by_category.items():
        cat = categories[name]
        cat.s_sums = np.zeros(T, dtype=np.float64)
        fid_stats = [FrechetStats() for _ in range(T + 1)]
        for chunk, images in prefetched_blocks(docs, block):
            emb = unit_rows(encoder.encode(images)).reshape(len(chunk), T + 1, -1)
            sims = np.einsum("nd,ntd->nt", emb[:, 0], emb[:, 1:])
            for row in sims:
                cat.gc_sum += gc_at_t(row)
                cat.s_sums += row
                cat.n_scored += 1
            if fid_extractor is not None:
                feats = fid_extractor.features(images).reshape(len(chunk), T + 1, -1)
                for t in range(T + 1):
                    fid_stats[t].update(feats[:, t])
        if fid_extractor is not None:
            cat.fid_n = fid_stats[0].n
            cat.fids = [
                fid_stats[0].fid(fid_stats[t], method="eigh") if cat.fid_n >= 2 else math.nan
                for t in range(1, T + 1)
            ]

    report: dict[str, Any] = {}
    for name, cat in categories.items():
        report[f"gc@{T}_{name}"] = cat.gc()
        report[f"n_scored_{name}"] = cat.n_scored
        report[f"n_failed_{name}"] = cat.n_failed
        if cat.fids is not None:
            report[f"gc_fid@{T}_{name}"] = (
                gc_fid_at_t(cat.fids) if cat.fid_n >= 2 else math.nan
            )
            report[f"gc_fid@{T}_{name}_n"] = cat.fid_n
            for t, fid in enumerate(cat.fids, start=1):
                report[f"fid@{t}_{name}"] = fid
    scored = [c for c in categories.values() if c.n_scored]
    report[f"gc@{T}"] = macro_mean(c.gc() for c in scored)
    for t in range(1, T + 1):
        report[f"s@{t}"] = macro_mean(c.s()[t - 1] for c in scored)
    if fid_extractor is not None:
        sizes = [c.fid_n for c in scored if c.fids is not None]
        # the smallest sample behind any category's FID: below 2048 the covariance is singular
        report[f"gc_fid@{T}_n_min"] = min(sizes) if sizes else 0
        report[f"gc_fid@{T}"] = macro_mean(
            gc_fid_at_t(c.fids) for c in scored if c.fids is not None and c.fid_n >= 2
        )
    for group, members in (groups or {}).items():
        members_scored = [
            categories[m] for m in members if m in categories and categories[m].n_scored
        ]
        report[f"gc@{T}_{group}"] = macro_mean(c.gc() for c in members_scored)
        if fid_extractor is not None:
            report[f"gc_fid@{T}_{group}"] = macro_mean(
                gc_fid_at_t(c.fids)
                for c in members_scored
                if c.fids is not None and c.fid_n >= 2
            )
    report["n_scored"] = sum(c.n_scored for c in categories.values())
    report["n_failed"] = sum(c.n_failed for c in categories.values())
    report["failure_reasons"] = dict(failures)
    return report


def category_table(report: Mapping[str, Any], iterations: int) -> dict[str, dict[str, Any]]:
    """Per category: GC@T, GC_FID@T with the FID sample size, scored and failed counts."""
    T = int(iterations)
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


def _write_report(records: Sequence[Mapping[str, Any]], report: Mapping[str, Any], iterations: int) -> None:
    """Write the full report (every category, FID sample sizes, failure reasons)
    as ``report.json`` beside the chains it scores: lmms-eval's table holds scalars only."""
    paths = [r["images"][0] for r in records if r.get("images")]
    if not paths:
        return
    namespace = os.path.dirname(os.path.dirname(paths[0]))
    categories = category_table(report, iterations)
    per_category = tuple(f"_{name}" for name in categories) + tuple(f"_{name}_n" for name in categories)
    summary = {k: v for k, v in report.items() if not k.endswith(per_category)}
    payload = {"summary": summary, "categories": categories}
    write_report_json(os.path.join(namespace, "report.json"), payload, "GenCeption")


_CACHE = ReportCache()


def report_value(records: Sequence[Mapping[str, Any]], metric: str, iterations: int, groups=None):
    """The value of one report key (NaN if that key has no data).

    lmms-eval calls one aggregation function per metric on the same items; the
    chains are scored once and every metric reads the same memoised report.
    """
    if not records:
        return math.nan
    scorer = records[0].get("scorer")
    config = ScorerConfig.resolve(scorer or PAPER_SCORER)
    key = (
        iterations,
        config,
        tuple(sorted((g, tuple(m)) for g, m in (groups or {}).items())),
        tuple(
            (r["category"], r["chain_id"], r.get("status"), tuple(r.get("images", ())))
            for r in records
        ),
    )

    def compute() -> dict[str, Any]:
        report = score_chains(records, iterations, config, groups)
        _write_report(records, report, iterations)
        return report

    return _CACHE.get(key, compute).get(metric, math.nan)
