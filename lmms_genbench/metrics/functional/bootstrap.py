"""The bootstrap over an estimator's per-doc table (:mod:`.estimators`). Numpy only.

A spec's ``"strata"`` and ``"cluster"`` (:mod:`.estimators`) say how its docs are resampled.

Method (:func:`bootstrap_interval`): percentile bootstrap. Each of ``n_resamples`` resamples
draws, in every stratum, as many units (docs, or clusters) as the stratum has, uniformly with
replacement (as counts per unit), from ``numpy.random.default_rng(seed)``; the
estimator is recomputed on those counts as weights (a doc drawn twice counts twice), so means
are matrix products, not a Python loop per resample. The interval is the ``(1 - level)/2`` and
``(1 + level)/2`` quantiles of the resampled estimates (numpy's linear quantile); ``stderr`` is
their standard deviation (ddof 1). Resamples whose estimate is not a number (a ratio whose
denominator is 0) are left out and counted. Draws are made in blocks whose size depends only on
the number of docs, so one table, spec and seed always give the same interval.

:func:`paired_bootstrap` applies one spec to two runs of the same docs (matched by the caller,
row for row) with the *same* resampling weights: the difference's interval and a two-sided
p-value ``min(1, 2 · min(#(d* ≤ 0) + 1, #(d* ≥ 0) + 1) / (B + 1))`` over the B resampled
differences d* (the share of resampled differences on the other side of zero, with the usual +1
correction so that p is never 0). Identical runs give d* = 0 throughout and p = 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .estimators import Table, as_table, check_spec, estimate, estimator_of
from ...core.args import check_int

__all__ = ["METHOD", "bootstrap_interval", "bootstrap_intervals", "no_interval", "paired_bootstrap", "resample_weights"]

METHOD = "percentile bootstrap"
#: most weights (resamples x docs) held at once; blocks of resamples stay under it
_BLOCK_CELLS = 4_000_000


# --------------------------------------------------------------------------- resampling
def _design(spec: Mapping[str, Any]) -> tuple[list[str], str | None]:
    strata = spec.get("strata", spec.get("by") if spec.get("kind") == "macro" else None)
    strata = [] if strata is None else [strata] if isinstance(strata, str) else list(strata)
    return strata, spec.get("cluster")


def resample_weights(
    columns: Mapping[str, Sequence[Any]] | Table,
    spec: Mapping[str, Any],
    n_resamples: int,
    seed: int = 0,
) -> Iterator[np.ndarray]:
    """Blocks of resampling weights, (b, n) counts per doc, ``n_resamples`` rows in all
    (the design: module docstring). One table, spec and seed give the same blocks."""
    table = as_table(columns)
    strata, cluster = _design(spec)
    if cluster:
        _, first_doc, unit_of_doc = np.unique(table.labels(cluster), return_index=True, return_inverse=True)
    else:
        first_doc = unit_of_doc = np.arange(table.n)
    n_units = len(first_doc)
    unit_strata = table.labels(strata)[first_doc] if strata else np.zeros(n_units, dtype=object)
    if strata and cluster:
        doc_strata = table.labels(strata)
        if np.any(doc_strata != unit_strata[unit_of_doc]):
            raise ValueError(f"a {cluster!r} cluster spans several {strata} strata; clusters must nest in strata")
    groups = [np.flatnonzero(unit_strata == s) for s in sorted(set(unit_strata.tolist()), key=str)]
    rng = np.random.default_rng(seed)
    block = max(1, min(n_resamples, _BLOCK_CELLS // max(1, table.n)))
    done = 0
    while done < n_resamples:
        b = min(block, n_resamples - done)
        unit_w = np.zeros((b, n_units))
        for members in groups:
            k = len(members)
            draws = rng.integers(0, k, size=(b, k)) + (np.arange(b) * k)[:, None]
            unit_w[:, members] = np.bincount(draws.ravel(), minlength=b * k).reshape(b, k)
        yield unit_w[:, unit_of_doc]
        done += b


def _resampled(table: Table, specs: Sequence[Mapping[str, Any]], n_resamples: int, seed: int) -> np.ndarray:
    """(len(specs), B) estimates of each spec on the same resamples (the first spec's design)."""
    out = [[] for _ in specs]
    for weights in resample_weights(table, specs[0], n_resamples, seed):
        for i, spec in enumerate(specs):
            out[i].append(estimator_of(spec)(table, weights, spec))
    return np.array([np.concatenate(parts) if parts else np.zeros(0) for parts in out])


def _smallest_stratum(table: Table, spec: Mapping[str, Any]) -> int | None:
    """Fewest resampling units (docs or clusters) in a stratum: a stratum of one unit adds no
    variance, so its interval is too narrow. None when not stratified."""
    strata, cluster = _design(spec)
    if not strata:
        return None
    labels = table.labels(strata)
    units = table.labels(cluster) if cluster else np.arange(table.n)
    per: dict[str, set] = {}
    for label, unit in zip(labels.tolist(), units.tolist()):
        per.setdefault(label, set()).add(unit)
    return min(len(u) for u in per.values()) if per else 0


def _describe(spec: Mapping[str, Any]) -> str:
    strata, cluster = _design(spec)
    parts = [METHOD, f"over {cluster} clusters" if cluster else "over docs"]
    if strata:
        parts.append(f"stratified by {'+'.join(strata)}")
    return ", ".join(parts)


def no_interval(reason: str, **extra: Any) -> dict[str, Any]:
    """An interval entry that has none, saying why."""
    return {"low": None, "high": None, "stderr": None, **extra, "reason": reason}


def _check_run(n_resamples: int, level: float) -> None:
    check_int("n_resamples", n_resamples, minimum=0)
    if not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")


def _summary(values: np.ndarray, level: float) -> dict[str, Any]:
    finite = values[np.isfinite(values)]
    if finite.size < 2:
        return {}
    low, high = np.quantile(finite, [(1 - level) / 2, (1 + level) / 2])
    return {"low": float(low), "high": float(high), "stderr": float(np.std(finite, ddof=1)),
            "n_invalid": int(values.size - finite.size)}


def bootstrap_interval(
    columns: Mapping[str, Sequence[Any]] | Table,
    spec: Mapping[str, Any],
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """The percentile bootstrap interval of ``spec`` over the docs of ``columns``.

    Returns ``{"value", "low", "high", "stderr", "n", "level", "method", "resamples",
    "seed", "n_invalid"}`` (and ``"smallest_stratum"``, the fewest units in a stratum, when
    stratified: a stratum of one doc adds no variance, so such an interval is too narrow); ``low``/``high``/``stderr`` are None, with a ``reason``, when
    the score is not a number, there are fewer than 2 docs, or ``n_resamples`` is 0."""
    return bootstrap_intervals(columns, {"score": spec}, n_resamples, level, seed)["score"]


def bootstrap_intervals(
    columns: Mapping[str, Sequence[Any]] | Table,
    specs: Mapping[str, Mapping[str, Any]],
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """:func:`bootstrap_interval` of every named spec; specs with the same resampling design
    share the resamples (drawn once), so each gets the interval it would get alone."""
    _check_run(n_resamples, level)
    table = as_table(columns)
    out: dict[str, dict[str, Any]] = {}
    designs: dict[str, list[str]] = {}
    for name, spec in specs.items():
        check_spec(spec)
        value = estimate(table, spec)
        meta = {"value": value if math.isfinite(value) else None, "n": table.n, "level": level,
                "method": _describe(spec), "resamples": int(n_resamples), "seed": seed}
        smallest = _smallest_stratum(table, spec)
        if smallest is not None:
            meta["smallest_stratum"] = smallest
        if not math.isfinite(value):
            out[name] = no_interval("the score is not a number (no doc contributes to it)", **meta)
        elif table.n < 2:
            out[name] = no_interval("fewer than 2 docs", **meta)
        elif n_resamples == 0:
            out[name] = no_interval("bootstrap switched off (0 resamples)", **meta)
        else:
            out[name] = meta
            designs.setdefault(repr(_design(spec)), []).append(name)
    for names in designs.values():
        resampled = _resampled(table, [specs[n] for n in names], int(n_resamples), seed)
        for name, values in zip(names, resampled):
            summary = _summary(values, level)
            out[name] = {**out[name], **summary} if summary else no_interval(
                "fewer than 2 resamples gave a number", **out[name])
    return {name: out[name] for name in specs}


def paired_bootstrap(
    columns_a: Mapping[str, Sequence[Any]] | Table,
    columns_b: Mapping[str, Sequence[Any]] | Table,
    spec: Mapping[str, Any],
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Run a minus run b on the same docs (row i of both tables is one doc, matched by the
    caller) resampled together: ``{"diff", "low", "high", "stderr", "p_value", "a", "b",
    "n", "level", "method", "resamples", "seed"}`` (p-value: module docstring)."""
    _check_run(n_resamples, level)
    a, b = as_table(columns_a), as_table(columns_b)
    if a.n != b.n:
        raise ValueError(f"paired runs need the same docs, got {a.n} and {b.n} rows")
    check_spec(spec)
    strata, cluster = _design(spec)
    for name in [*strata, *([cluster] if cluster else [])]:
        if not np.array_equal(a.labels(name), b.labels(name)):
            raise ValueError(f"paired runs must agree on the resampling column {name!r} row by row")
    va, vb = estimate(a, spec), estimate(b, spec)
    meta = {"a": va if math.isfinite(va) else None, "b": vb if math.isfinite(vb) else None, "n": a.n,
            "level": level, "method": "paired " + _describe(spec), "resamples": int(n_resamples), "seed": seed}
    diff = va - vb
    if not math.isfinite(diff):
        return {"diff": None, "p_value": None, **no_interval("a score is not a number", **meta)}
    if a.n < 2 or n_resamples == 0:
        return {"diff": diff, "p_value": None, **no_interval("fewer than 2 docs or 0 resamples", **meta)}
    ests_a, ests_b = [], []
    for weights in resample_weights(a, spec, int(n_resamples), seed):
        ests_a.append(estimator_of(spec)(a, weights, spec))
        ests_b.append(estimator_of(spec)(b, weights, spec))
    d = np.concatenate(ests_a) - np.concatenate(ests_b)
    summary = _summary(d, level)
    if not summary:
        return {"diff": diff, "p_value": None, **no_interval("fewer than 2 resamples gave a number", **meta)}
    finite = d[np.isfinite(d)]
    tail = min(np.sum(finite <= 0), np.sum(finite >= 0)) + 1
    p = min(1.0, 2.0 * tail / (finite.size + 1))
    return {"diff": diff, **meta, **summary, "p_value": float(p)}
