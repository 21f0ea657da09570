"""Mean Cumulative Drift maths (paper 003, §3.1, eqs. 1-2): pure numpy, no networks.

For a distance mapping δ and a generation g, eq. 1 averages over the docs the
similarity of the chain's input (g = 0) with its generation g: S_δ(g); eq. 2
averages S_δ(g) over the generations: MCD_δ. MCD_avg is the mean of the four MCD_δ.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.args import check_int
from .arrays import float64_array

__all__ = ["MAPPINGS", "DriftStats", "mcd"]

MAPPINGS = ("text->text", "text->image", "image->image", "image->text")


# --------------------------------------------------------------------------- eqs. 1-2
def _as_matrix(similarities: Any) -> np.ndarray:
    arr = float64_array(similarities, "similarities", "a numeric docs x generations array")
    if arr.ndim != 2:
        raise ValueError(
            f"similarities must be 2-D (docs x generations), got shape {arr.shape}"
        )
    if arr.size == 0:
        raise ValueError(
            f"similarities must have at least one doc and one generation, got shape {arr.shape}"
        )
    bad = np.argwhere(~np.isfinite(arr))
    if bad.size:
        row, col = (int(i) for i in bad[0])
        raise ValueError(
            f"similarities must be finite, got {arr[row, col]} at doc {row}, generation column {col}"
        )
    return arr


def mcd(similarities: Any) -> float:
    """MCD_δ of one mapping (eqs. 1-2).

    Args:
        similarities: docs x generations matrix (numpy-like or a torch tensor, finite):
            entry [d, j] is sim(input of doc d, its j-th scored generation).

    Returns:
        mean over the columns of S_δ(g), where S_δ(g) is the column mean over the docs.
        E.g. [[1, 0.5], [0.5, 0.5]] → S = [0.75, 0.5] → 0.625.

    Raises:
        ValueError: if ``similarities`` is not a non-empty 2-D numeric array of finite values.
    """
    arr = _as_matrix(similarities)
    return float(arr.mean(axis=0).mean())


# --------------------------------------------------------------------------- sufficient statistics
def _add_exact(partials: list[float], x: float) -> None:
    """Add ``x`` to a Shewchuk list of non-overlapping partial sums (``math.fsum``'s
    algorithm): the total is exact, so it does not depend on the order of additions."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[i] = lo
            i += 1
        x = hi
    partials[i:] = [x]


def _check_mapping(mapping: Any) -> str:
    if mapping not in MAPPINGS:
        raise ValueError(f"mapping must be one of {MAPPINGS}, got {mapping!r}")
    return mapping


class DriftStats:
    """Sufficient statistics of MCD: per mapping and generation g, the sum of the
    similarities to the input and their count.

    Sums are kept exactly (Shewchuk partials), so streaming in any blocks, in any
    order, and merging per-shard statistics give bit-identical curves and MCDs.

    Example:
        >>> stats = DriftStats()
        >>> stats.update("text->text", 2, [0.9, 0.7])
        >>> stats.curve("text->text")
        {2: 0.8}
    """

    __slots__ = ("_counts", "_partials")

    def __init__(self) -> None:
        self._partials: dict[tuple[str, int], list[float]] = {}
        self._counts: dict[tuple[str, int], int] = {}

    def update(self, mapping: str, generation: int, values: Any) -> DriftStats:
        """Add the similarities of some docs at one generation.

        Args:
            mapping: one of :data:`MAPPINGS`.
            generation: g >= 1 (g = 0 is the input itself).
            values: a similarity or a 1-D sequence of them (finite). Empty is a no-op.

        Returns ``self`` for chaining.
        """
        _check_mapping(mapping)
        check_int("generation", generation, minimum=1)
        arr = float64_array(values, "values", "numeric similarities")
        if arr.ndim > 1:
            raise ValueError(f"values must be a scalar or 1-D, got shape {arr.shape}")
        arr = arr.reshape(-1)
        if not np.isfinite(arr).all():
            raise ValueError(f"values must be finite, got {arr[~np.isfinite(arr)][:3].tolist()}")
        if arr.size == 0:
            return self
        key = (mapping, int(generation))
        partials = self._partials.setdefault(key, [])
        for v in arr.tolist():
            _add_exact(partials, v)
        self._counts[key] = self._counts.get(key, 0) + int(arr.size)
        return self

    def merge(self, other: DriftStats) -> DriftStats:
        """New statistics of the union of both (neither input changes)."""
        if not isinstance(other, DriftStats):
            raise TypeError(f"other must be DriftStats, got {type(other).__name__}")
        out = DriftStats()
        for src in (self, other):
            for key, partials in src._partials.items():
                target = out._partials.setdefault(key, [])
                for p in partials:
                    _add_exact(target, p)
                out._counts[key] = out._counts.get(key, 0) + src._counts[key]
        return out

    def __add__(self, other: DriftStats) -> DriftStats:
        if not isinstance(other, DriftStats):
            return NotImplemented
        return self.merge(other)

    def generations(self, mapping: str) -> list[int]:
        """The generations of ``mapping`` that have data, ascending."""
        _check_mapping(mapping)
        return sorted(g for m, g in self._counts if m == mapping)

    def count(self, mapping: str, generation: int) -> int:
        """Number of similarities added for ``mapping`` at ``generation``."""
        return self._counts.get((_check_mapping(mapping), int(generation)), 0)

    def curve(self, mapping: str) -> dict[int, float]:
        """S_δ(g) (eq. 1) for every generation g with data, ascending in g."""
        return {
            g: math.fsum(self._partials[(mapping, g)]) / self._counts[(mapping, g)]
            for g in self.generations(mapping)
        }

    def mcd(self, mapping: str) -> float:
        """MCD_δ (eq. 2): mean of S_δ(g) over the generations with data; NaN if none."""
        curve = self.curve(mapping)
        return math.fsum(curve.values()) / len(curve) if curve else math.nan

    def mcd_avg(self) -> float:
        """MCD_avg: mean of MCD_δ over the mappings **that have data** (NaN if none).

        With only text-first chains scored this is the mean of two mappings, not four;
        :meth:`mappings` says which ones entered.
        """
        values = [self.mcd(m) for m in self.mappings()]
        return math.fsum(values) / len(values) if values else math.nan

    def mappings(self) -> list[str]:
        """The mappings with data, in :data:`MAPPINGS` order."""
        present = {m for m, _ in self._counts}
        return [m for m in MAPPINGS if m in present]

    def __repr__(self) -> str:
        sizes = {m: len(self.generations(m)) for m in self.mappings()}
        return f"DriftStats(generations={sizes})"
