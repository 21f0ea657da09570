"""Intervals over per-doc scores: where the estimator language (:mod:`.estimators`), the
bootstrap (:mod:`.bootstrap`) and rank agreement (Kendall's tau-b) are imported from.

A headline score is an *estimator* (a JSON spec, kinds in :mod:`.estimators`) applied to a
per-doc table; :mod:`.bootstrap` resamples the table for its interval and compares two runs
doc by doc. Numpy and scipy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .bootstrap import (
    METHOD,
    bootstrap_interval,
    bootstrap_intervals,
    no_interval,
    paired_bootstrap,
    resample_weights,
)
from .estimators import ESTIMATORS, Table, check_spec, doc_table, estimate

__all__ = [
    "ESTIMATORS",
    "METHOD",
    "Table",
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


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-b of two paired score lists (``scipy.stats.kendalltau``; ties in either
    handled; NaN when a list is constant or has fewer than 2 entries)."""
    from scipy.stats import kendalltau

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"kendall_tau needs two 1-d lists of equal length, got {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("kendall_tau needs finite numbers")
    # scipy warns on a constant list; tau-b is undefined there either way
    if x.size < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    return float(kendalltau(x, y, variant="b").statistic)
