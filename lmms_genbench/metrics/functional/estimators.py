"""Estimators: a headline score as a small JSON spec applied to a per-doc table. Numpy and scipy.

A headline score is an *estimator* applied to a per-doc table: columns of equal
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
  (MMBench's CircularEval);
* ``{"kind": "decay", "param": "a"|"b"|"c", "of": "fit"|"mean"|"avg_curve", "curves": [{"generations":
  [g...], "columns": [c...]}, ...]}``: the Semantic Drift Rate (:mod:`.sdr`): each curve is the
  column means at its generations, fitted with ``a * exp(-b * g) + c``; ``fit``: the one curve's
  parameter, ``mean``: the mean over the curves' fits (NaN if one fails), ``avg_curve``: the fit
  of the curves averaged after cutting them to the shortest, over x = 1..n.

Every spec may also say how docs are resampled: ``"strata"`` (a label column or a list of
them: each stratum is resampled with its own size, a stratified bootstrap; a ``macro`` spec is
stratified by its ``by`` unless it says otherwise) and ``"cluster"`` (a label column: whole
clusters are resampled, e.g. the rotated copies of one MMBench question); :mod:`.bootstrap`
reads them.

ChEF's statistics are those of :mod:`.chef` (its ``*_weighted`` forms and ratios), and SDR's
fits those of :mod:`.sdr`, so a score and its resamples come from one implementation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import chef, sdr

__all__ = ["ESTIMATORS", "Estimator", "Table", "as_table", "check_spec", "doc_table", "estimate", "estimator_of"]


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
        self._block: tuple[np.ndarray | None, dict[Any, Any]] = (None, {})

    def per_block(self, weights: np.ndarray) -> dict[Any, Any]:
        """A memo that lives as long as one block of weights: specs that share a sub-result
        (every tag's GenEval accuracy at g) compute it once per block."""
        if self._block[0] is not weights:
            self._block = (weights, {})
        return self._block[1]

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


def as_table(columns: Mapping[str, Sequence[Any]] | Table) -> Table:
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


def _column_mean(table: Table, weights: np.ndarray, column: str, where: Mapping[str, Any] | None = None) -> np.ndarray:
    """Weighted mean of ``column`` over the docs ``where`` selects (memoised per block)."""
    memo = table.per_block(weights)
    key = ("mean", column, repr(sorted((where or {}).items())))
    if key not in memo:
        memo[key] = _weighted_mean(weights, table.numbers(column), _where_mask(table, where))
    return memo[key]


def _mean(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    return _column_mean(table, weights, spec["column"], spec.get("where"))


def _nanmean_rows(values: np.ndarray) -> np.ndarray:
    """Row means over the finite entries; NaN for a row with none."""
    finite = np.isfinite(values)
    return _divide(np.where(finite, values, 0.0).sum(axis=1), finite.sum(axis=1).astype(np.float64))


def _stratum_means(table: Table, weights: np.ndarray, column: str, by: str) -> tuple[list[str], np.ndarray]:
    """The strata of ``by`` and each one's weighted mean of ``column``, (B, S), one matrix
    product for all strata (memoised per block of weights)."""
    memo = table.per_block(weights)
    key = ("strata", column, by)
    if key not in memo:
        values, strata = table.numbers(column), table.labels(by)
        present = sorted(set(strata.tolist()))
        valid = np.isfinite(values)
        ind = ((strata[:, None] == np.array(present, dtype=object)[None, :]) & valid[:, None]).astype(np.float64)
        sums = weights @ np.concatenate([ind * np.where(valid, values, 0.0)[:, None], ind], axis=1)
        memo[key] = (present, _divide(sums[:, : len(present)], sums[:, len(present):]))
    return memo[key]


def _macro(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    present, means = _stratum_means(table, weights, spec["column"], spec["by"])
    members = present if spec.get("members") is None else [str(m) for m in spec["members"] if str(m) in present]
    if not members:
        return np.full(weights.shape[0], np.nan)
    return _nanmean_rows(means[:, [present.index(m) for m in members]])


def _avg(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    parts = [estimator_of(sub)(table, weights, sub) for sub in spec["of"]]
    if not parts:
        return np.full(weights.shape[0], np.nan)
    return _nanmean_rows(np.stack(parts, axis=1))


_RATIOS = {
    # ChEF eq. 1 and 2, and relative robustness: the functions of .chef, on arrays
    "riam": lambda other, ref, chance: chef.riam(other, ref, chance),
    "rrm": lambda other, ref, chance: chef.rrm(other, ref, chance),
    "rr": lambda other, ref, chance: chef.rr(other, ref),
}


def _ratio(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    ref = _column_mean(table, weights, spec["ref"])
    others = [_column_mean(table, weights, c) for c in spec["others"]]
    other = _nanmean_rows(np.stack(others, axis=1)) if others else np.full(weights.shape[0], np.nan)
    chance = _column_mean(table, weights, spec["chance"]) if spec.get("chance") else 0.0
    return _RATIOS[spec["formula"]](other, ref, chance)


def _pope(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    pred = table.numbers(spec["pred"]) > 0.5
    gold = table.numbers(spec["gold"]) > 0.5
    tp, fp = weights @ (pred & gold), weights @ (pred & ~gold)
    fn, tn = weights @ (~pred & gold), weights @ (~pred & ~gold)
    return chef.pope_metrics(tp, fp, tn, fn)[spec["stat"]]


def _ece_pairs(table: Table, spec: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    conf, corr = table.numbers(spec["confidence"]), table.numbers(spec["correct"])
    keep = np.flatnonzero(np.isfinite(conf) & np.isfinite(corr))
    return keep, conf[keep], corr[keep]


def _ece(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    """ChEF's equal-mass ECE on the resample (``chef.ece_equal_mass_weighted``)."""
    keep, conf, corr = _ece_pairs(table, spec)
    return chef.ece_equal_mass_weighted(conf, corr, weights[:, keep], int(spec.get("bins", 10)))


def _ece_width(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    keep, conf, corr = _ece_pairs(table, spec)
    bins = int(spec.get("bins", 10))
    which = np.minimum((conf * bins).astype(int), bins - 1)
    ind = (which[:, None] == np.arange(bins)[None, :]).astype(np.float64)  # (n, bins)
    w = weights[:, keep]
    gaps = np.abs(w @ (ind * (corr - conf)[:, None])).sum(axis=1)
    return _divide(gaps, w.sum(axis=1))


def _circular(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    """MMBench's CircularEval (``chef.circular_accuracy_weighted``)."""
    right = table.numbers(spec["column"]) > 0.5
    _, group_of = np.unique(table.labels(spec["group"]), return_inverse=True)
    return chef.circular_accuracy_weighted(group_of.astype(np.int64), right, weights)


def _curve_fits(table: Table, weights: np.ndarray, curve: Mapping[str, Any]) -> np.ndarray:
    """(B, 3) fitted parameters of one curve's resampled column means (memoised per block:
    SDR's a, b and c, its mean and the averaged curve share each curve's fits)."""
    memo = table.per_block(weights)
    key = ("decay", tuple(curve["columns"]))
    if key not in memo:
        memo[key] = sdr.fit_rows(curve["generations"], _curve_means(table, weights, curve))
    return memo[key]


def _curve_means(table: Table, weights: np.ndarray, curve: Mapping[str, Any]) -> np.ndarray:
    return np.stack([_column_mean(table, weights, c) for c in curve["columns"]], axis=1)


def _decay(table: Table, weights: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    column = sdr.PARAMS.index(spec["param"])
    curves = spec["curves"]
    if spec["of"] == "fit":
        return _curve_fits(table, weights, curves[0])[:, column]
    if spec["of"] == "mean":
        return np.mean(np.stack([_curve_fits(table, weights, c) for c in curves]), axis=0)[:, column]
    memo = table.per_block(weights)
    key = ("decay-avg", tuple(tuple(c["columns"]) for c in curves))
    if key not in memo:
        means = [_curve_means(table, weights, c) for c in curves]
        n = min(m.shape[1] for m in means)
        avg = np.mean(np.stack([m[:, :n] for m in means]), axis=0)
        memo[key] = sdr.fit_rows(np.arange(1, n + 1), avg)
    return memo[key][:, column]


ESTIMATORS: dict[str, Estimator] = {
    "mean": _mean,
    "macro": _macro,
    "avg": _avg,
    "ratio": _ratio,
    "pope": _pope,
    "ece": _ece,
    "ece_width": _ece_width,
    "circular": _circular,
    "decay": _decay,
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
    "decay": ("param", "of", "curves"),
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
    if kind == "decay" and (spec["param"] not in sdr.PARAMS or spec["of"] not in ("fit", "mean", "avg_curve")
                            or not spec["curves"] or (spec["of"] == "fit" and len(spec["curves"]) != 1)):
        raise ValueError(f"a 'decay' estimator needs param in {sdr.PARAMS}, of in ('fit', 'mean', 'avg_curve') "
                         f"and curves (one for 'fit'), got {dict(spec)!r}")
    if kind == "avg":
        for sub in spec["of"]:
            check_spec(sub)
    return spec


def estimator_of(spec: Mapping[str, Any]) -> Estimator:
    return ESTIMATORS[check_spec(spec)["kind"]]


def estimate(columns: Mapping[str, Sequence[Any]] | Table, spec: Mapping[str, Any]) -> float:
    """The score ``spec`` gives on the whole table (every doc once)."""
    table = as_table(columns)
    return float(estimator_of(spec)(table, np.ones((1, table.n)), spec)[0])
