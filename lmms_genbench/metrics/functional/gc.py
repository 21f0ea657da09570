"""GC@T: the step-weighted average of a GenCeption chain.

GenCeption (eq. 3) scores a chain X0 -> X1 -> ... -> XT by the similarities
s(t) = sim(X0, Xt) for t = 1..T, weighting later steps more:

    GC@T = sum_{t=1..T} t * s(t) / sum_{t=1..T} t

The seed's self-similarity s(0) = 1 is *not* part of the sum. GC_FID@T (eq. 4)
applies the same weights to the FIDs between the seed set and step t, so both
use :func:`step_weighted_mean`; :func:`gc_at_t` and :func:`gc_fid_at_t` only
differ in the word used in error messages.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.args import check_int
from .arrays import float64_array

__all__ = [
    "gc_at_t",
    "gc_at_t_rows",
    "gc_fid_at_t",
    "gc_weights",
    "step_weighted_mean",
]

ArrayLike1D = Sequence[float] | np.ndarray


def gc_weights(T: int) -> np.ndarray:
    """Return the normalised GenCeption weights ``t / sum(1..T)`` for t = 1..T.

    Args:
        T: number of generation steps, at least 1.
    """
    check_int("T", T, minimum=1)
    t = np.arange(1, int(T) + 1, dtype=np.float64)
    return t / t.sum()


def _as_finite_1d(values: ArrayLike1D, name: str) -> np.ndarray:
    arr = float64_array(values, name, "a sequence of numbers")
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be one-dimensional (values for t = 1..T), got an array of shape {arr.shape}"
        )
    if arr.size == 0:
        raise ValueError(f"{name} is empty: GC@T needs at least one step (T >= 1)")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        steps = ", ".join(str(i + 1) for i in bad[:10])
        raise ValueError(
            f"{name} contains non-finite values (NaN or inf) at step(s) t = {steps}; "
            "an incomplete chain must be dropped or handled by the caller, not averaged"
        )
    return arr


def step_weighted_mean(values: ArrayLike1D, *, name: str = "values") -> float:
    """``sum_t t * v(t) / sum_t t`` for ``values = [v(1), ..., v(T)]``.

    Args:
        values: one value per step, t = 1..T (T = ``len(values)``), all finite.
        name: how the argument is called in error messages.

    Raises:
        ValueError: on empty, non-1-D or non-finite input.
    """
    arr = _as_finite_1d(values, name)
    t = np.arange(1, arr.size + 1, dtype=np.float64)
    return float(np.dot(t, arr) / t.sum())


def gc_at_t(similarities: ArrayLike1D) -> float:
    """GC@T of one chain (GenCeption eq. 3).

    Args:
        similarities: ``[s(1), ..., s(T)]``, the similarity of step t to the seed.
            T is ``len(similarities)``; do not include s(0).

    Example:
        >>> round(gc_at_t([0.9, 0.6, 0.3]), 12)  # (1*0.9 + 2*0.6 + 3*0.3) / 6
        0.5
    """
    return step_weighted_mean(similarities, name="similarities")


def gc_fid_at_t(fids: ArrayLike1D) -> float:
    """GC_FID@T (GenCeption eq. 4): the GC@T weighting applied to ``[FID(1), ..., FID(T)]``,
    where FID(t) compares the seed image set with the set generated at step t."""
    return step_weighted_mean(fids, name="fids")


def gc_at_t_rows(matrix: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """GC@T for each row of a ``docs x T`` similarity matrix.

    Args:
        matrix: 2-D array, row i = ``[s_i(1), ..., s_i(T)]``; all rows share T.

    Returns:
        float64 vector of length ``docs``.
    """
    try:
        arr = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            "matrix must be a docs x T array of numbers (ragged rows are not allowed)"
        ) from exc
    if arr.ndim != 2:
        raise ValueError(
            f"matrix must be 2-D (docs x T), got an array of shape {arr.shape}"
        )
    if arr.shape[1] == 0:
        raise ValueError("matrix has T = 0 columns: GC@T needs at least one step")
    bad_rows = np.flatnonzero(~np.isfinite(arr).all(axis=1))
    if bad_rows.size:
        rows = ", ".join(str(i) for i in bad_rows[:10])
        raise ValueError(
            f"matrix contains non-finite values (NaN or inf) in row(s) {rows}"
        )
    return arr @ gc_weights(arr.shape[1])
