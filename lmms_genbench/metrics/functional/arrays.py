"""Numeric input of the functional metrics, read once into a float64 numpy array."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["float64_array"]


def float64_array(values: Any, name: str, what: str = "a numeric array") -> np.ndarray:
    """``values`` (numpy-like, nested sequences, or a torch tensor, read without importing
    torch) as a float64 array; else ValueError ``"{name} must be {what}, got {type}"``."""
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # torch.Tensor
        values = values.detach().cpu().double().numpy()
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {what}, got {type(values).__name__}") from None
