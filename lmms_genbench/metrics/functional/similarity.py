"""Cosine similarity helpers (float64, numpy; torch tensors are accepted and moved to CPU)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import float64_array

__all__ = ["cosine_similarity", "l2_normalize"]


def _to_float64(x: Any, name: str) -> np.ndarray:
    arr = float64_array(x, name)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def _normalize_rows(arr: np.ndarray, name: str) -> np.ndarray:
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    zero = np.flatnonzero(norms.reshape(-1) == 0)
    if zero.size:
        rows = ", ".join(str(i) for i in zero[:10])
        raise ValueError(
            f"{name} has zero-norm row(s) {rows}: cosine similarity is undefined"
        )
    return arr / norms


def l2_normalize(x: Any) -> np.ndarray:
    """Rows of ``x`` (N x D, or one D vector) scaled to unit L2 norm, as float64.

    Raises:
        ValueError: on non-finite values or a zero row.
    """
    arr = _to_float64(x, "x")
    if arr.ndim not in (1, 2):
        raise ValueError(
            f"x must be a vector or an N x D matrix, got shape {arr.shape}"
        )
    return _normalize_rows(arr, "x")


def cosine_similarity(a: Any, b: Any) -> np.ndarray:
    """Row-wise cosine similarity in float64.

    Args:
        a: N x D embeddings.
        b: N x D embeddings (row i compared with row i of ``a``), or a single reference
            D vector / 1 x D matrix compared with every row of ``a``.

    Returns:
        float64 vector of length N.

    Raises:
        ValueError: on shape mismatch, non-finite values or zero-norm rows.
    """
    a_arr = _to_float64(a, "a")
    b_arr = _to_float64(b, "b")
    if a_arr.ndim == 1:
        a_arr = a_arr[None, :]
    if a_arr.ndim != 2:
        raise ValueError(f"a must be an N x D matrix, got shape {a_arr.shape}")
    if b_arr.ndim == 1:
        b_arr = b_arr[None, :]
    if b_arr.ndim != 2:
        raise ValueError(
            f"b must be an N x D matrix or a D vector, got shape {b_arr.shape}"
        )
    if b_arr.shape[1] != a_arr.shape[1]:
        raise ValueError(
            f"a and b must have the same dimension D, got {a_arr.shape[1]} and {b_arr.shape[1]}"
        )
    if b_arr.shape[0] not in (1, a_arr.shape[0]):
        raise ValueError(
            f"b must have 1 row or as many rows as a ({a_arr.shape[0]}), got {b_arr.shape[0]}"
        )
    return np.sum(_normalize_rows(a_arr, "a") * _normalize_rows(b_arr, "b"), axis=1)
