"""Bootstrap intervals over per-doc scores, paired bootstrap differences, Kendall's tau-b.

Numpy only. A headline score is an *estimator* applied to a per-doc table: columns of equal
length, one row per scored doc (a chain), numbers (``None``/NaN: the doc has no value) or short
labels (a category, a tag, a direction). An estimator is a small JSON-able *spec*, so a report
that carries its table and its specs lets a later command recompute any headline, resample it,
or compare two runs doc by doc:

* ``{"kind": "mean", "column": c, "where": {label_column: value or [values]}}``: mean of ``c``
  over the docs (NaN values skipped; ``where`` optional);
* ``{"kind": "macro", "column": c, "by": s, "members": [...]}``: mean over the strata of
  column ``s`` of each stratum's mean of ``c`` (``members`` optional: only those strata; strata
  with no value skipped), the way GenCeption averages categories and GenEval averages tags;
* ``{"kind": "avg", "of": [spec, ...]}``: mean of the sub-estimates that are numbers
  (MCD_avg over mappings, MGG over generations);
* ``{"kind": "ratio", "formula": "riam"|"rrm"|"rr", "ref": c0, "others": [c...], "chance": c}``:
  ChEF's relative metrics from per-doc correctness (``acc_other`` = mean of the others' means);
* ``{"kind": "pope", "stat": "accuracy"|"precision"|"recall"|"f1"|"yes_ratio", "pred": c,
  "gold": c}``: POPE with "yes" (1) as the positive class;
* ``{"kind": "ece", "confidence": c, "correct": c, "bins": 10}``: ChEF's equal-mass ECE, and
  ``"ece_width"``: equal-width ECE on [0, 1];
* ``{"kind": "circular", "column": c, "group": g}``: share of groups whose every doc is right
  (MMBench's CircularEval).

Every spec may also say how docs are resampled: ``"strata"`` (a label column or a list of
them: each stratum is resampled with its own size, a stratified bootstrap; a ``macro`` spec is
stratified by its ``by`` unless it says otherwise) and ``"cluster"`` (a label column: whole
clusters are resampled, e.g. the rotated copies of one MMBench question).

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "ESTIMATORS",
    "METHOD",
    "bootstrap_interval",
    "bootstrap_intervals",
    "check_spec",
    "doc_table",
    "estimate",
    "kendall_tau",
    "no_interval",
    "paired_bootstrap",
    "resample_weights",
]

METHOD = "percentile bootstrap"
#: most weights (resamples x docs) held at once; blocks of resamples stay under it
_BLOCK_CELLS = 4_000_000


# --------------------------------------------------------------------------- the table
class Table:
    """Columns of one length: numbers as float arrays (None -> NaN), labels as str arrays."""

    def __init__(self, columns: Mapping[str, Sequence[Any]]) -> None:
        if not isinstance(columns, Mapping) or not columns:
            raise ValueError(f"columns must be a non-empty mapping of column name -> values, got {columns!r}")
        lengths = {name: len(values) for name, values in columns.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"every column needs one value per doc; lengths differ: {lengths}")
        self.n = next(iter(lengths.values()))
        self._raw = columns
        self._cache: dict[tuple[str, str], np.ndarray] = {}

    def numbers(self, name: str) -> np.ndarray:
        key = (name, "f")
        if key not in self._cache:
            values = self._column(name)
            try:
                self._cache[key] = np.array([math.nan if v is None else v for v in values], dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"column {name!r} must hold numbers (or None), got {list(values)[:5]!r}") from None
        return self._cache[key]

    def labels(self, name: str | Sequence[str]) -> np.ndarray:
        names = [name] if isinstance(name, str) else list(name)
        key = ("\x1f".join(names), "s")
        if key not in self._cache:
            parts = [[str(v) for v in self._column(n)] for n in names]
            self._cache[key] = np.array(["\x1f".join(p) for p in zip(*parts)] if parts else [], dtype=object)
        return self._cache[key]

    def _column(self, name: str) -> Sequence[Any]:
        if name not in self._raw:
            raise ValueError(f"no column {name!r} in the doc table (columns: {sorted(self._raw)})")
        return self._raw[name]


def _table(columns: Mapping[str, Sequence[Any]] | Table) -> Table:
    return columns if isinstance(columns, Table) else Table(columns)


def doc_table(chain_ids: Sequence[str], columns: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """A report's ``doc_scores``: rows sorted by chain id (stable), numbers as floats (NaN ->
    None, so the table is plain JSON), labels as strings."""
    order = sorted(range(len(chain_ids)), key=lambda i: str(chain_ids[i]))
    out: dict[str, list[Any]] = {}
    for name, values in columns.items():
        if len(values) != len(chain_ids):
            raise ValueError(f"column {name!r} has {len(values)} values for {len(chain_ids)} docs")
        out[name] = [_cell(values[i]) for i in order]
    return {"chain_ids": [str(chain_ids[i]) for i in order], "columns": out}


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return float(value)
    number = float(value)
    return number if math.isfinite(number) else None


# --------------------------------------------------------------------------- estimators
# Each estimator maps (table, weights (B, n), spec) to B estimates; weights are resample
# counts per doc (all ones for the score itself).
Estimator = Callable[[Table, np.ndarray, Mapping[str, Any]], np.ndarray]


def _divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1.0), np.nan)


def _where_mask(table: Table, where: Mapping[str, Any] | None) -> np.ndarray:
    mask = np.ones(table.n, dtype=bool)
    for column, wanted in (where or {}).items():
        allowed = {str(w) for w in (wanted if isinstance(wanted, (list, tuple)) else [wanted])}
        mask &= np.isin(table.labels(column), list(allowed))
    return mask


def _weighted_mean(weights: np.ndarray, values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    valid = np.isfinite(values) if mask is None else np.isfinite(values) & mask
    v = np.where(valid, values, 0.0)
    return _divide(weights @ v, weights @ valid.astype(np.float64))


def _mean(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    return _weighted_mean(weights, table.numbers(spec["column"]), _where_mask(table, spec.get("where")))


def _nanmean_rows(values: np.ndarray) -> np.ndarray:
    """Row means over the finite entries; NaN for a row with none."""
    finite = np.isfinite(values)
    return _divide(np.where(finite, values, 0.0).sum(axis=1), finite.sum(axis=1).astype(np.float64))


def _macro(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    values = table.numbers(spec["column"])
    strata = table.labels(spec["by"])
    present = sorted(set(strata.tolist()))
    members = present if spec.get("members") is None else [str(m) for m in spec["members"] if str(m) in present]
    if not members:
        return np.full(weights.shape[0], np.nan)
    valid = np.isfinite(values)
    indicator = (strata[:, None] == np.array(members, dtype=object)[None, :]) & valid[:, None]  # (n, S)
    ind = indicator.astype(np.float64)
    means = _divide(weights @ (ind * np.where(valid, values, 0.0)[:, None]), weights @ ind)  # (B, S)
    return _nanmean_rows(means)


def _avg(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    parts = [estimator_of(sub)(table, weights, sub) for sub in spec["of"]]
    if not parts:
        return np.full(weights.shape[0], np.nan)
    return _nanmean_rows(np.stack(parts, axis=1))


_RATIOS = {
    # ChEF eq. 1 and 2, and relative robustness (metrics.functional.chef)
    "riam": lambda other, ref, chance: _divide(other - ref, ref - chance),
    "rrm": lambda other, ref, chance: _divide(other - chance, ref - chance),
    "rr": lambda other, ref, chance: _divide(other, ref),
}


def _ratio(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    ref = _weighted_mean(weights, table.numbers(spec["ref"]))
    others = [_weighted_mean(weights, table.numbers(c)) for c in spec["others"]]
    other = _nanmean_rows(np.stack(others, axis=1)) if others else np.full(weights.shape[0], np.nan)
    chance = _weighted_mean(weights, table.numbers(spec["chance"])) if spec.get("chance") else 0.0
    return _RATIOS[spec["formula"]](other, ref, chance)


def _pope(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    pred = table.numbers(spec["pred"]) > 0.5
    gold = table.numbers(spec["gold"]) > 0.5
    tp, fp = weights @ (pred & gold), weights @ (pred & ~gold)
    fn, tn = weights @ (~pred & gold), weights @ (~pred & ~gold)
    n = tp + fp + fn + tn
    precision, recall = _divide(tp, tp + fp), _divide(tp, tp + fn)
    stats = {
        "accuracy": lambda: _divide(tp + tn, n),
        "precision": lambda: precision,
        "recall": lambda: recall,
        "f1": lambda: _divide(2 * precision * recall, precision + recall),
        "yes_ratio": lambda: _divide(tp + fp, n),
    }
    return stats[spec["stat"]]()


def _ece_pairs(table: Table, spec: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    conf, corr = table.numbers(spec["confidence"]), table.numbers(spec["correct"])
    keep = np.flatnonzero(np.isfinite(conf) & np.isfinite(corr))
    return keep, conf[keep], corr[keep]


def _ece(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    """ChEF's equal-mass ECE on the resample: the resampled docs sorted by confidence (stable,
    so the score itself equals ``chef.ece_equal_mass``) and cut as ``numpy.array_split`` cuts
    them; a doc drawn k times fills k consecutive places, possibly across a cut."""
    keep, conf, corr = _ece_pairs(table, spec)
    bins = int(spec.get("bins", 10))
    order = np.argsort(conf, kind="stable")
    w = weights[:, keep][:, order]
    conf, corr = conf[order], corr[order]
    end = np.cumsum(w, axis=1)
    start = end - w
    total = end[:, -1] if w.shape[1] else np.zeros(w.shape[0])
    q, r = np.divmod(total, bins)
    gap = np.zeros(w.shape[0])
    lo = np.zeros(w.shape[0])
    for j in range(bins):
        hi = lo + q + (j < r)
        share = np.clip(np.minimum(end, hi[:, None]) - np.maximum(start, lo[:, None]), 0.0, None)
        gap += np.abs(share @ corr - share @ conf)
        lo = hi
    return _divide(gap, total)


def _ece_width(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    keep, conf, corr = _ece_pairs(table, spec)
    bins = int(spec.get("bins", 10))
    which = np.minimum((conf * bins).astype(int), bins - 1)
    ind = (which[:, None] == np.arange(bins)[None, :]).astype(np.float64)  # (n, bins)
    w = weights[:, keep]
    gaps = np.abs(w @ (ind * (corr - conf)[:, None])).sum(axis=1)
    return _divide(gaps, w.sum(axis=1))


def _circular(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    """Groups weighted by their docs' weights over the group size, so a cluster resample
    (every doc of a drawn group carries the group's count) weighs each group by its count."""
    right = table.numbers(spec["column"]) > 0.5
    groups = table.labels(spec["group"])
    names, inverse, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    all_right = np.ones(len(names), dtype=bool)
    np.logical_and.at(all_right, inverse, right)
    per_doc = 1.0 / sizes[inverse]
    return _divide(weights @ (per_doc * all_right[inverse]), weights @ per_doc)


ESTIMATORS: dict[str, Estimator] = {
    "mean": _mean,
    "macro": _macro,
    "avg": _avg,
    "ratio": _ratio,
    "pope": _pope,
    "ece": _ece,
    "ece_width": _ece_width,
    "circular": _circular,
}
_REQUIRED = {
    "mean": ("column",),
    "macro": ("column", "by"),
    "avg": ("of",),
    "ratio": ("formula", "ref", "others"),
    "pope": ("stat", "pred", "gold"),
    "ece": ("confidence", "correct"),
    "ece_width": ("confidence", "correct"),
    "circular": ("column", "group"),
}
_POPE_STATS = ("accuracy", "precision", "recall", "f1", "yes_ratio")


def check_spec(spec: Any) -> Mapping[str, Any]:
    """``spec`` if it is a valid estimator spec; else ValueError naming what is wrong."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"an estimator spec must be a mapping with a 'kind', got {spec!r}")
    kind = spec.get("kind")
    if kind not in ESTIMATORS:
        raise ValueError(f"estimator kind must be one of {sorted(ESTIMATORS)}, got {kind!r}")
    missing = [k for k in _REQUIRED[kind] if k not in spec]
    if missing:
        raise ValueError(f"a {kind!r} estimator needs {missing}, got {dict(spec)!r}")
    if kind == "ratio" and spec["formula"] not in _RATIOS:
        raise ValueError(f"ratio formula must be one of {sorted(_RATIOS)}, got {spec['formula']!r}")
    if kind == "pope" and spec["stat"] not in _POPE_STATS:
        raise ValueError(f"pope stat must be one of {_POPE_STATS}, got {spec['stat']!r}")
    if kind == "avg":
        for sub in spec["of"]:
            check_spec(sub)
    return spec


def estimator_of(spec: Mapping[str, Any]) -> Estimator:
    return ESTIMATORS[check_spec(spec)["kind"]]


def estimate(columns: Mapping[str, Sequence[Any]] | Table, spec: Mapping[str, Any]) -> float:
    """The score ``spec`` gives on the whole table (every doc once)."""
    table = _table(columns)
    return float(estimator_of(spec)(table, np.ones((1, table.n)), spec)[0])


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
    table = _table(columns)
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
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 0:
        raise ValueError(f"n_resamples must be an integer >= 0, got {n_resamples!r}")
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
    "seed", "n_invalid"}``; ``low``/``high``/``stderr`` are None, with a ``reason``, when
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
    table = _table(columns)
    out: dict[str, dict[str, Any]] = {}
    designs: dict[str, list[str]] = {}
    for name, spec in specs.items():
        check_spec(spec)
        value = estimate(table, spec)
        meta = {"value": value if math.isfinite(value) else None, "n": table.n, "level": level,
                "method": _describe(spec), "resamples": int(n_resamples), "seed": seed}
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
    a, b = _table(columns_a), _table(columns_b)
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


# --------------------------------------------------------------------------- rank agreement
def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-b of two paired score lists (ties in either handled; NaN when a list is
    constant or has fewer than 2 entries). O(n²): meant for rankings of models or tasks."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"kendall_tau needs two 1-d lists of equal length, got {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("kendall_tau needs finite numbers")
    if x.size < 2:
        return math.nan
    upper = np.triu_indices(x.size, k=1)
    dx, dy = np.sign(x[:, None] - x[None, :])[upper], np.sign(y[:, None] - y[None, :])[upper]
    untied_x, untied_y = np.count_nonzero(dx), np.count_nonzero(dy)
    if untied_x == 0 or untied_y == 0:
        return math.nan
    return float(np.sum(dx * dy) / math.sqrt(untied_x * untied_y))
