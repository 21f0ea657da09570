"""Streaming statistics of feature sets, and the Fréchet distance (FID) between them.

The distance between two Gaussians given by (mu, sigma), clean-fid's algorithm, is
:func:`~.frechet.frechet_distance` (re-exported here).

:class:`FrechetStats` accumulates the sufficient statistics of a feature set
(count, mean, centred sum of outer products) in float64. Its memory is O(D^2)
whatever the number of images, and two partial statistics merge exactly, so
per-shard or per-category statistics can be combined afterwards. While it has seen no
more vectors than dimensions it keeps them (a factor of the moment matrix, at most D x D
floats) instead of the D x D matrix itself; :class:`FrechetReference` factorises one side
once (per reference set) and measures any number of others against it, in the n x n low-rank
form when n < D.

Note: with fewer images than feature dimensions (N <= 2048 for Inception) the
covariance is singular and FID is strongly biased upwards; always report ``n``
next to an FID.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.args import check_int
from .arrays import float64_array
from .frechet import frechet_distance, psd_sqrt, sum_sqrt_eigvalsh

__all__ = ["FrechetReference", "FrechetStats", "frechet_distance"]


def _add_gram(m2: np.ndarray, z: np.ndarray) -> None:
    """``m2 += z.T @ z`` in place, without a D x D temporary (BLAS gemm with beta = 1).

    ``m2`` is symmetric and C-ordered, so its transpose is the Fortran-ordered matrix
    BLAS updates in place; ``z.T @ z`` is symmetric, so updating the transpose updates ``m2``."""
    from scipy.linalg import blas

    gemm = blas.get_blas_funcs("gemm", (m2, z))
    out = gemm(1.0, z, z, beta=1.0, c=m2.T, trans_a=1, overwrite_c=1)
    if not np.shares_memory(out, m2):  # a BLAS that copied after all: keep the result
        m2[...] = out.T


class FrechetStats:
    """Streaming mean and covariance of a set of feature vectors.

    The state is ``n``, the running mean and ``M2 = sum_i (x_i - mean)(x_i - mean)^T``
    (all float64): equivalent to (n, sum x, sum x x^T) but without the cancellation
    that the raw second moment suffers when the mean is large against the spread.
    Batches are combined with Chan et al.'s parallel update, so the result does not
    depend on how the features were chunked (up to float rounding).

    Up to ``n = D`` vectors the statistics keep the vectors themselves instead of ``M2``
    (``M2 = C^T C`` with ``C`` the centred rows: the same information in at most D x D
    floats), which lets :class:`FrechetReference` use the n x n low-rank form of the
    distance. ``M2`` is formed once, when a batch takes n past D; later batches update it
    in place (no D x D temporary per batch). :attr:`cov` and :meth:`state_dict` form it
    from the rows when asked.

    Args:
        dim: feature dimension D. If omitted it is taken from the first update.

    Example:
        >>> stats = FrechetStats()
        >>> stats.update(features_batch_1); stats.update(features_batch_2)
        >>> stats.fid(reference_stats)
    """

    __slots__ = ("_dim", "_m2", "_mean", "_n", "_rows")

    def __init__(self, dim: int | None = None) -> None:
        if dim is not None:
            check_int("dim", dim, minimum=1, what="a positive integer or None")
        self._dim: int | None = None if dim is None else int(dim)
        self._n: int = 0
        self._mean: np.ndarray | None = None
        # exactly one of the two holds the second moment once n > 0: the raw rows
        # (while n <= D) or M2
        self._rows: list[np.ndarray] | None = []
        self._m2: np.ndarray | None = None
        if self._dim is not None:
            self._mean = np.zeros(self._dim, dtype=np.float64)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_features(cls, features: Any) -> FrechetStats:
        """Statistics of an N x D feature array in one go."""
        stats = cls()
        stats.update(features)
        return stats

    @classmethod
    def _from_moments(cls, n: int, mean: np.ndarray, m2: np.ndarray) -> FrechetStats:
        stats = cls(dim=mean.shape[0])
        stats._n = int(n)
        stats._mean = np.array(mean, dtype=np.float64, copy=True)
        stats._m2 = np.array(m2, dtype=np.float64, copy=True)
        stats._rows = None
        return stats

    # ------------------------------------------------------------------ properties
    @property
    def n(self) -> int:
        """Number of feature vectors seen."""
        return self._n

    @property
    def dim(self) -> int | None:
        """Feature dimension D, or None before the first update."""
        return self._dim

    @property
    def mean(self) -> np.ndarray:
        """Mean feature vector (float64, length D). Needs n >= 1."""
        if self._n < 1:
            raise ValueError(
                "FrechetStats.mean needs at least 1 feature vector, got n=0"
            )
        assert self._mean is not None
        return self._mean.copy()

    @property
    def cov(self) -> np.ndarray:
        """Unbiased covariance (divisor n - 1), equal to ``np.cov(features, rowvar=False)``. Needs n >= 2."""
        if self._n < 2:
            raise ValueError(
                f"FrechetStats.cov needs at least 2 feature vectors for an unbiased covariance, got n={self._n}"
            )
        cov = self._moment() / (self._n - 1)
        # symmetrise away rounding so sqrtm sees an exactly symmetric matrix
        return (cov + cov.T) / 2.0

    def _centred(self) -> np.ndarray | None:
        """The centred rows C (n x D, ``C^T C = M2``) while the rows are kept, else None."""
        if self._rows is None or self._n == 0:
            return None
        assert self._mean is not None
        rows = self._rows[0] if len(self._rows) == 1 else np.concatenate(self._rows)
        self._rows = [rows]  # join the blocks once
        return rows - self._mean

    def _moment(self) -> np.ndarray:
        """M2 (D x D), formed from the rows when they are what is kept."""
        if self._m2 is not None:
            return self._m2
        assert self._dim is not None
        centred = self._centred()
        if centred is None:
            return np.zeros((self._dim, self._dim), dtype=np.float64)
        return centred.T @ centred

    def _to_moment(self) -> None:
        """Switch the state from rows to M2 (once; in place afterwards)."""
        if self._m2 is None:
            self._m2 = np.ascontiguousarray(self._moment())
            self._rows = None

    # ------------------------------------------------------------------ updates
    def update(self, features: Any) -> FrechetStats:
        """Add an N x D batch of feature vectors (a 1-D vector counts as one row).

        Accepts numpy arrays, nested sequences, or torch tensors (moved to CPU).
        An empty batch (N = 0) is a no-op. Returns ``self`` for chaining.
        """
        x = float64_array(features, "features", "an N x D array of numbers")
        if x.ndim == 1:
            x = x[None, :]
        if x.ndim != 2:
            raise ValueError(f"features must be an N x D array, got shape {x.shape}")
        if x.shape[0] == 0:
            return self
        if self._dim is None:
            if x.shape[1] == 0:
                raise ValueError("features must have at least one column (D >= 1)")
            self._dim = int(x.shape[1])
            self._mean = np.zeros(self._dim, dtype=np.float64)
        if x.shape[1] != self._dim:
            raise ValueError(
                f"features have dimension {x.shape[1]} but these statistics have dimension {self._dim}"
            )
        if not np.isfinite(x).all():
            raise ValueError("features contain NaN or inf")
        n_b = x.shape[0]
        mean_b = x.mean(axis=0)
        if self._rows is not None and self._n + n_b <= self._dim:
            self._rows.append(np.array(x, dtype=np.float64, copy=True))
            self._combine_mean(n_b, mean_b)
            return self
        self._combine_inplace(n_b, mean_b, x - mean_b)
        return self

    def _combine_mean(self, n_b: int, mean_b: np.ndarray) -> tuple[int, np.ndarray]:
        """Chan's update of n and the mean; returns (n_a, delta) for the M2 term."""
        assert self._mean is not None
        n_a = self._n
        if n_a == 0:
            self._n, self._mean = n_b, np.array(mean_b, dtype=np.float64, copy=True)
            return 0, np.zeros_like(self._mean)
        n = n_a + n_b
        delta = mean_b - self._mean
        self._mean = self._mean + delta * (n_b / n)
        self._n = n
        return n_a, delta

    def _combine_inplace(self, n_b: int, mean_b: np.ndarray, centred_b: np.ndarray | None,
                         m2_b: np.ndarray | None = None) -> None:
        """Chan's parallel update with a batch given by its centred rows or its M2."""
        if n_b == 0:
            return
        self._to_moment()
        assert self._m2 is not None
        n_a, delta = self._combine_mean(n_b, mean_b)
        # M2 += M2_b + delta delta^T n_a n_b / n, as one in-place rank update
        rank_one = delta[None, :] * np.sqrt(n_a * n_b / (n_a + n_b)) if n_a else None
        if m2_b is not None:
            np.add(self._m2, m2_b, out=self._m2)
            if rank_one is not None:
                _add_gram(self._m2, rank_one)
            return
        parts = [centred_b] if rank_one is None else [centred_b, rank_one]
        _add_gram(self._m2, parts[0] if len(parts) == 1 else np.concatenate(parts))

    def merge(self, other: FrechetStats) -> FrechetStats:
        """Return new statistics of the union of both feature sets (neither input changes)."""
        if not isinstance(other, FrechetStats):
            raise TypeError(f"can only merge FrechetStats, got {type(other).__name__}")
        if self._dim is not None and other._dim is not None and self._dim != other._dim:
            raise ValueError(
                f"cannot merge statistics of dimension {self._dim} and {other._dim}"
            )
        if other._n == 0:
            return self.copy()
        if self._n == 0:
            return other.copy()
        out = self.copy()
        assert other._mean is not None
        if out._rows is not None and other._rows is not None and out._n + other._n <= (out._dim or 0):
            out._rows = out._rows + other._rows  # blocks are never written to: share them
            out._combine_mean(other._n, other._mean)
        elif other._rows is not None:
            out._combine_inplace(other._n, other._mean, other._centred())
        else:
            out._combine_inplace(other._n, other._mean, None, m2_b=other._m2)
        return out

    def __add__(self, other: FrechetStats) -> FrechetStats:
        if not isinstance(other, FrechetStats):
            return NotImplemented
        return self.merge(other)

    def copy(self) -> FrechetStats:
        """An independent copy."""
        out = FrechetStats(dim=self._dim)
        out._n = self._n
        if self._mean is not None:
            out._mean = self._mean.copy()
        out._rows = None if self._rows is None else list(self._rows)
        out._m2 = None if self._m2 is None else self._m2.copy()
        return out

    # ------------------------------------------------------------------ distance
    def fid(self, other: FrechetStats, eps: float = 1e-6, method: str = "sqrtm") -> float:
        """Fréchet distance between the Gaussians fitted to the two feature sets.

        ``method``: ``"sqrtm"`` or ``"eigh"`` as in :func:`frechet_distance`, or
        ``"factored"``: ``self.reference().fid(other)`` (:class:`FrechetReference`; to
        measure several sets against one, build the reference once).

        Raises:
            ValueError: if either side has fewer than 2 vectors or the dimensions differ.
        """
        if not isinstance(other, FrechetStats):
            raise TypeError(f"other must be FrechetStats, got {type(other).__name__}")
        _check_pair(self, other)
        if method == "factored":
            return self.reference().fid(other)
        return frechet_distance(self.mean, self.cov, other.mean, other.cov, eps=eps, method=method)

    def reference(self) -> FrechetReference:
        """This set factorised once, to measure any number of others against it."""
        return FrechetReference(self)

    # ------------------------------------------------------------------ serialisation
    def state_dict(self) -> dict[str, Any]:
        """Plain data (``n``, ``mean``, ``m2`` as numpy arrays) for saving or sending between processes."""
        if self._n == 0:
            return {"n": 0, "dim": self._dim, "mean": None, "m2": None}
        assert self._mean is not None
        return {
            "n": self._n,
            "dim": self._dim,
            "mean": self._mean.copy(),
            "m2": np.array(self._moment(), copy=True),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> FrechetStats:
        """Inverse of :meth:`state_dict`."""
        if not isinstance(state, dict) or "n" not in state:
            raise ValueError(
                "state must be a dict produced by FrechetStats.state_dict()"
            )
        n = int(state["n"])
        if n == 0:
            return cls(dim=state.get("dim"))
        mean = np.asarray(state["mean"], dtype=np.float64)
        m2 = np.asarray(state["m2"], dtype=np.float64)
        if mean.ndim != 1 or m2.shape != (mean.shape[0], mean.shape[0]):
            raise ValueError(
                f"inconsistent state: mean shape {mean.shape}, m2 shape {m2.shape}"
            )
        return cls._from_moments(n, mean, m2)

    def __repr__(self) -> str:
        return f"FrechetStats(n={self._n}, dim={self._dim})"


def _check_pair(a: FrechetStats, b: FrechetStats) -> None:
    for label, stats in (("self", a), ("other", b)):
        if stats.n < 2:
            raise ValueError(
                f"FID needs at least 2 feature vectors per set; {label} has n={stats.n}"
            )
    if a.dim != b.dim:
        raise ValueError(f"cannot compare statistics of dimension {a.dim} and {b.dim}")


class FrechetReference:
    """One set of :class:`FrechetStats` factorised once, to measure others against it
    (GenCeption's FID@t: every t of a category against its seed images).

    ``Tr((S1 S2)^{1/2})`` is the sum of the square roots of the eigenvalues of ``S1 S2``.
    With ``S1 = A^T A`` (``A`` = the n1 centred rows over ``sqrt(n1 - 1)``, kept while
    n1 <= D) those are the eigenvalues of the n1 x n1 matrix ``A S2 A^T``; when the other
    side is low-rank too (``S2 = B^T B``) they are the squared singular values of the
    n1 x n2 matrix ``A B^T``. So with fewer images than dimensions (every MME category:
    n << 2048) no D x D matrix is formed or decomposed at all. Only when both sides
    hold more vectors than dimensions is ``S1^{1/2}`` formed, once, by a symmetric
    eigendecomposition, and each other set costs one ``eigvalsh(S1^{1/2} S2 S1^{1/2})``
    (the ``"eigh"`` method of :func:`frechet_distance`).

    The low-rank forms compute only the n - 1 eigenvalues that are not zero; the D x D
    forms also take square roots of about D rounding-noise eigenvalues, which bias the
    trace (FID of 6 random 2048-d vectors with themselves: -2.4e-4 through ``eigh``,
    -6e-14 here).
    """

    __slots__ = ("_factor", "_mean", "_n", "_root", "_sigma", "_trace")

    def __init__(self, stats: FrechetStats) -> None:
        if not isinstance(stats, FrechetStats):
            raise TypeError(f"stats must be FrechetStats, got {type(stats).__name__}")
        if stats.n < 2:
            raise ValueError(f"FID needs at least 2 feature vectors per set; the reference has n={stats.n}")
        self._n, self._mean = stats.n, stats.mean
        centred = stats._centred()
        self._factor = self._sigma = self._root = None
        if centred is not None:
            self._factor = centred / np.sqrt(stats.n - 1)
            self._trace = float(np.einsum("ij,ij->", self._factor, self._factor))
        else:
            self._sigma = stats.cov
            self._trace = float(np.trace(self._sigma))

    @property
    def n(self) -> int:
        return self._n

    def _tr_sqrt_product(self, other: FrechetStats) -> tuple[float, float]:
        """(Tr((S1 S2)^{1/2}), Tr(S2))."""
        centred = other._centred()
        if centred is not None:
            b = centred / np.sqrt(other.n - 1)
            trace2 = float(np.einsum("ij,ij->", b, b))
            if self._factor is not None:  # both low-rank: singular values of A B^T
                return float(np.linalg.svd(self._factor @ b.T, compute_uv=False).sum()), trace2
            return sum_sqrt_eigvalsh(b @ (self._sigma @ b.T)), trace2
        sigma2 = other.cov
        if self._factor is not None:
            return sum_sqrt_eigvalsh(self._factor @ (sigma2 @ self._factor.T)), float(np.trace(sigma2))
        if self._root is None:  # both full rank: S1^{1/2} once, for every other set
            self._root = psd_sqrt(self._sigma)
        return sum_sqrt_eigvalsh(self._root @ sigma2 @ self._root), float(np.trace(sigma2))

    def fid(self, other: FrechetStats) -> float:
        """Fréchet distance from this reference to ``other`` (at least 2 vectors, same D)."""
        if not isinstance(other, FrechetStats):
            raise TypeError(f"other must be FrechetStats, got {type(other).__name__}")
        if other.n < 2:
            raise ValueError(f"FID needs at least 2 feature vectors per set; other has n={other.n}")
        if other.dim != self._mean.shape[0]:
            raise ValueError(f"cannot compare statistics of dimension {self._mean.shape[0]} and {other.dim}")
        tr_covmean, trace2 = self._tr_sqrt_product(other)
        diff = self._mean - other.mean
        return float(diff.dot(diff) + self._trace + trace2 - 2 * tr_covmean)

    def __repr__(self) -> str:
        form = "low-rank" if self._factor is not None else "full"
        return f"FrechetReference(n={self._n}, dim={self._mean.shape[0]}, {form})"
