"""The shape of an MCD report (``mcd_report.json``): what scoring a task's chains adds up
(:class:`DriftSums`), the flat report made of it, the per-source and per-doc tables, and the
estimators that recompute its headline metrics from the per-doc table (their intervals).

The maths is :class:`~lmms_genbench.metrics.functional.drift.DriftStats`; the chains are read
and encoded by :mod:`lmms_genbench.metrics.scorers.mcd`.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..functional.drift import MAPPINGS, DriftStats
from ..functional.intervals import doc_table

__all__ = ["DIRECTIONS", "TEXT_COUNTS", "DriftSums", "doc_scores", "drift_estimators", "drift_report", "source_table"]

logger = logging.getLogger(__name__)

DIRECTIONS = ("text_first", "image_first")
#: texts the CLIP and sentence text towers saw and cut, reported beside the scores
TEXT_COUNTS = ("n_clip_texts", "n_clip_truncated", "n_clip_chunked", "n_sentence_texts", "n_sentence_truncated")


@dataclass
class DriftSums:
    """What scoring a task's chains adds up, block by block: the drift statistics overall and
    per source, each block's similarities (the doc table), texts seen and cut, and the chains
    scored per source and per direction."""

    total: DriftStats = field(default_factory=DriftStats)
    per_source: dict[str, DriftStats] = field(default_factory=dict)
    blocks: list[tuple[Sequence[Any], dict[str, np.ndarray]]] = field(default_factory=list)
    texts: Counter[str] = field(default_factory=Counter)
    n_scored: Counter[str] = field(default_factory=Counter)
    n_direction: Counter[str] = field(default_factory=Counter)

    def add(self, direction: str, chunk: Sequence[Any], rows: dict[str, np.ndarray], texts: Mapping[str, int]) -> None:
        """One block of chains: ``rows`` maps a mapping to the n x k similarities of each
        chain's input with its scored generations of that mapping (g = 2, 4, … for the same
        modality, 1, 3, … for the other)."""
        self.texts.update(texts)
        self.blocks.append((chunk, rows))
        sources = [c.source for c in chunk]
        groups = {s: [i for i, x in enumerate(sources) if x == s] for s in dict.fromkeys(sources)}
        for mapping, sims in rows.items():
            src, dst = mapping.split("->")
            offset = 2 if src == dst else 1  # same modality: g = 2, 4, …
            for j in range(sims.shape[1]):
                g = offset + 2 * j
                self.total.update(mapping, g, sims[:, j])
                for s, idx in groups.items():
                    self.per_source.setdefault(s, DriftStats()).update(mapping, g, sims[idx, j])
        self.n_scored.update(sources)
        self.n_direction[direction] += len(chunk)


def drift_report(
    sums: DriftSums, n_failed: Mapping[str, int], failures: Mapping[str, int], G: int, clip_long_text: str
) -> dict[str, Any]:
    """The flat report of ``sums`` (keys: :meth:`~lmms_genbench.metrics.scorers.mcd.MCDScorer.score`);
    ``n_failed``: refused chains per source, ``failures``: per reason."""
    report: dict[str, Any] = {}
    _stats_keys(report, sums.total, "")
    report["mcd_avg_n_mappings"] = len(sums.total.mappings())
    for source in sorted(set(sums.n_scored) | set(n_failed)):
        _stats_keys(report, sums.per_source.get(source, DriftStats()), f"_{source}")
        report[f"n_scored_{source}"] = sums.n_scored[source]
        report[f"n_failed_{source}"] = n_failed.get(source, 0)
    report["generations"] = G
    report["n_scored"] = sum(sums.n_scored.values())
    report["n_failed"] = sum(n_failed.values())
    for direction in DIRECTIONS:
        report[f"n_{direction}"] = sums.n_direction[direction]
    report["failure_reasons"] = dict(sorted(failures.items()))
    report["doc_scores"] = doc_scores(sums.blocks)
    report["clip_long_text"] = clip_long_text
    for key in TEXT_COUNTS:
        report[key] = sums.texts[key]
    if report["n_clip_truncated"] or report["n_clip_chunked"]:
        logger.warning(
            "MCD: %d of %d texts exceeded CLIP's context (%s: %d truncated, %d chunked)",
            report["n_clip_truncated"] + report["n_clip_chunked"],
            report["n_clip_texts"],
            clip_long_text,
            report["n_clip_truncated"],
            report["n_clip_chunked"],
        )
    return report


def doc_scores(blocks: Sequence[tuple[Sequence[Any], Mapping[str, np.ndarray]]]) -> dict[str, Any]:
    """Each scored chain's MCD per mapping (its mean similarity over its generations; NaN for
    the mappings of the other direction), direction and source (``report["doc_scores"]``).
    Every chain of a direction has the same generations, so the mean over chains of these is
    MCD_δ (eq. 2: the mean over generations of the mean over chains)."""
    ids: list[str] = []
    columns: dict[str, list[Any]] = {f"mcd_{m}": [] for m in MAPPINGS}
    columns.update(direction=[], source=[])
    for chunk, rows in blocks:
        ids += [c.chain_id for c in chunk]
        for m in MAPPINGS:
            columns[f"mcd_{m}"] += rows[m].mean(axis=1).tolist() if m in rows else [None] * len(chunk)
        columns["direction"] += [c.direction for c in chunk]
        columns["source"] += [c.source for c in chunk]
    return doc_table(ids, columns)


def _mapping_means(where: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    extra = {"where": dict(where)} if where else {}
    return [{"kind": "mean", "column": f"mcd_{m}", **extra} for m in MAPPINGS]


def drift_estimators(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """MCD per mapping and MCD_avg (mean over the mappings with data), overall (chains
    resampled within each direction) and per source (within source and direction)."""
    specs: dict[str, dict[str, Any]] = {}
    for m, spec in zip(MAPPINGS, _mapping_means()):
        specs[f"mcd_{m}"] = {**spec, "strata": "direction"}
    specs["mcd_avg"] = {"kind": "avg", "of": _mapping_means(), "strata": "direction"}
    for source in sorted(set(report["doc_scores"]["columns"]["source"])):
        by_source = _mapping_means({"source": source})
        for m, spec in zip(MAPPINGS, by_source):
            specs[f"mcd_{m}_{source}"] = {**spec, "strata": ["source", "direction"]}
        specs[f"mcd_avg_{source}"] = {"kind": "avg", "of": by_source, "strata": ["source", "direction"]}
    return specs


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
