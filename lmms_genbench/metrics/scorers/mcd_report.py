"""The shape of an MCD report (``mcd_report.json``): what scoring a task's chains adds up
(:class:`DriftSums`), the flat report made of it, the per-source and per-doc tables, and the
estimators that recompute its headline metrics from the per-doc table (their intervals).

The maths is :class:`~lmms_genbench.metrics.functional.drift.DriftStats`; the chains are read
and encoded by :mod:`lmms_genbench.metrics.scorers.mcd`.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..functional.drift import MAPPINGS, DriftStats
from ..functional.intervals import doc_table
from ..functional.sdr import PARAMS, sdr

__all__ = ["DIRECTIONS", "SDR_GROUPS", "TEXT_COUNTS", "DriftSums", "doc_scores", "drift_estimators", "drift_report",
           "sdr_group", "sdr_names", "source_table"]

logger = logging.getLogger(__name__)

DIRECTIONS = ("text_first", "image_first")
#: SDR's fits: one per mapping, their mean ("sdr") and the averaged curve's ("avg_curve")
SDR_GROUPS = (*MAPPINGS, "sdr", "avg_curve")
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
            for j in range(sims.shape[1]):
                g = _generation(mapping, j)
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
    _sdr_keys(report, sums.total)
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


def sdr_names() -> list[str]:
    """SDR's metrics: ``sdr_<p>_<mapping>``, ``sdr_<p>`` (their mean), ``sdr_avg_curve_<p>``."""
    return [_sdr_name(p, group) for group in SDR_GROUPS for p in PARAMS]


def sdr_group(name: str) -> str | None:
    """The fit (a mapping, ``"sdr"``, ``"avg_curve"``) an SDR metric comes from; None if not SDR's."""
    return next((g for g in SDR_GROUPS for p in PARAMS if _sdr_name(p, g) == name), None)


def _sdr_name(param: str, group: str) -> str:
    return {"sdr": f"sdr_{param}", "avg_curve": f"sdr_avg_curve_{param}"}.get(group, f"sdr_{param}_{group}")


def _sdr_keys(report: dict[str, Any], stats: DriftStats) -> None:
    """SDR over the S_δ(g) curves (:mod:`~lmms_genbench.metrics.functional.sdr`): its values,
    NaN with the reason under ``sdr_failures`` (group -> reason; counted per reason in
    ``sdr_failure_reasons``) where a fit cannot be made; ``sdr_n_mappings`` fitted curves."""
    result = sdr({m: stats.curve(m) for m in stats.mappings()})
    report.update(result.values())
    for group in SDR_GROUPS:  # a mapping without chains has no curve at all
        if group in MAPPINGS and group not in result.fits:
            report.update({_sdr_name(p, group): math.nan for p in PARAMS})
    failures = result.reasons()
    failures.update({m: "no chains of this mapping were scored" for m in MAPPINGS if m not in result.fits})
    report["sdr_n_mappings"] = len(result.fits)
    report["sdr_failures"] = {g: failures[g] for g in SDR_GROUPS if g in failures}
    report["sdr_failure_reasons"] = dict(sorted(Counter(failures.values()).items()))
    if failures:
        logger.info("SDR: no fit for %s", "; ".join(f"{g}: {r}" for g, r in report["sdr_failures"].items()))


def doc_scores(blocks: Sequence[tuple[Sequence[Any], Mapping[str, np.ndarray]]]) -> dict[str, Any]:
    """Each scored chain's MCD per mapping (its mean similarity over its generations; NaN for
    the mappings of the other direction), direction and source (``report["doc_scores"]``).
    Every chain of a direction has the same generations, so the mean over chains of these is
    MCD_δ (eq. 2: the mean over generations of the mean over chains)."""
    ids: list[str] = []
    columns: dict[str, list[Any]] = {f"mcd_{m}": [] for m in MAPPINGS}
    columns.update(direction=[], source=[])
    per_g: dict[str, list[Any]] = {}  # s_<mapping>@<g>: SDR's curves, resampled
    for chunk, rows in blocks:
        done = len(ids)
        ids += [c.chain_id for c in chunk]
        for m in MAPPINGS:
            columns[f"mcd_{m}"] += rows[m].mean(axis=1).tolist() if m in rows else [None] * len(chunk)
        for m, sims in rows.items():
            for j in range(sims.shape[1]):
                column = per_g.setdefault(f"s_{m}@{_generation(m, j)}", [None] * done)
                column += sims[:, j].tolist()
        for column in per_g.values():
            column += [None] * (len(ids) - len(column))
        columns["direction"] += [c.direction for c in chunk]
        columns["source"] += [c.source for c in chunk]
    return doc_table(ids, {**columns, **dict(sorted(per_g.items()))})


def _generation(mapping: str, j: int) -> int:
    """The g of a mapping's j-th scored generation: 2, 4, … within a modality, 1, 3, … across."""
    src, dst = mapping.split("->")
    return (2 if src == dst else 1) + 2 * j


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
    specs.update(sdr_estimators(report["doc_scores"]["columns"]))
    return specs


def sdr_estimators(columns: Mapping[str, Sequence[Any]]) -> dict[str, dict[str, Any]]:
    """SDR's parameters refitted on resampled curves (chains resampled within each direction),
    for the curves the doc table has; every fit of a resample is shared by the specs."""
    curves = {}
    for m in MAPPINGS:
        gens = sorted(int(k.split("@")[1]) for k in columns if k.startswith(f"s_{m}@"))
        if gens:
            curves[m] = {"generations": gens, "columns": [f"s_{m}@{g}" for g in gens]}
    specs: dict[str, dict[str, Any]] = {}
    if not curves:
        return specs
    for p in PARAMS:
        for m, curve in curves.items():
            specs[_sdr_name(p, m)] = {"kind": "decay", "param": p, "of": "fit", "curves": [curve], "strata": "direction"}
        for group in ("sdr", "avg_curve"):
            of = "mean" if group == "sdr" else group
            specs[_sdr_name(p, group)] = {"kind": "decay", "param": p, "of": of, "curves": list(curves.values()),
                                          "strata": "direction"}
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
