"""Fréchet distance between two Gaussians given by their means and covariances.

:func:`frechet_distance` follows clean-fid's ``cleanfid.fid.frechet_distance``
step by step (same matrix square root, same eps fallback, same tolerance on the
imaginary part), so both give the same number for the same inputs. The streaming
statistics of feature sets that feed it, and a reference set factorised once, are in
:mod:`.fid`.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

__all__ = ["frechet_distance", "psd_sqrt", "sum_sqrt_eigvalsh"]

logger = logging.getLogger(__name__)


def _check_gaussian(mu: Any, sigma: Any, which: str) -> tuple[np.ndarray, np.ndarray]:
    mu_arr = np.atleast_1d(np.asarray(mu, dtype=np.float64))
    sigma_arr = np.atleast_2d(np.asarray(sigma, dtype=np.float64))
    if mu_arr.ndim != 1:
        raise ValueError(f"mu{which} must be a vector, got shape {mu_arr.shape}")
    d = mu_arr.shape[0]
    if sigma_arr.shape != (d, d):
        raise ValueError(
            f"sigma{which} must be a {d}x{d} covariance matching mu{which} (length {d}), "
            f"got shape {sigma_arr.shape}"
        )
    if not (np.isfinite(mu_arr).all() and np.isfinite(sigma_arr).all()):
        raise ValueError(f"mu{which}/sigma{which} contain NaN or inf")
    return mu_arr, sigma_arr


def psd_sqrt(sigma: np.ndarray) -> np.ndarray:
    """The symmetric square root of a covariance (symmetric PSD) matrix, by ``eigh``;
    rounding-noise negative eigenvalues count as 0."""
    w, v = np.linalg.eigh(sigma)
    return (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T


def _trace_sqrt_product_eigh(sigma1: np.ndarray, sigma2: np.ndarray) -> float:
    """Tr((S1 S2)^{1/2}) = Tr((A S2 A)^{1/2}) with A = S1^{1/2}: for covariance
    (symmetric PSD) matrices this needs two symmetric eigendecompositions
    instead of a general matrix square root, about 5x faster at D = 2048."""
    root = psd_sqrt(sigma1)
    ev = np.linalg.eigvalsh(root @ sigma2 @ root)
    return float(np.sqrt(np.clip(ev, 0.0, None)).sum())


def frechet_distance(
    mu1: Any, sigma1: Any, mu2: Any, sigma2: Any, eps: float = 1e-6, method: str = "sqrtm"
) -> float:
    """Fréchet distance ``|mu1 - mu2|^2 + Tr(S1 + S2 - 2 (S1 S2)^{1/2})`` between two Gaussians.

    Args:
        mu1, mu2: mean vectors of equal length D.
        sigma1, sigma2: D x D covariance matrices.
        eps: added to both diagonals when the product is too singular for a
            finite square root (same fallback as clean-fid).
        method: ``"sqrtm"`` (clean-fid's algorithm, the default) or ``"eigh"``
            (the same trace through symmetric eigendecompositions; about 5x
            faster for 2048-d features, agrees with sqrtm to ~1e-5 relative).

    Returns:
        The distance as a Python float (may be a tiny negative number from rounding
        when the two Gaussians are equal, exactly as clean-fid).

    Raises:
        ValueError: on mismatched shapes, non-finite input, or a square root whose
            imaginary part is not negligible.
    """
    from scipy import linalg  # scipy.linalg is slow to import; only load it when needed

    if not (isinstance(eps, (int, float)) and eps >= 0):
        raise ValueError(f"eps must be a non-negative number, got {eps!r}")
    mu1_arr, sigma1_arr = _check_gaussian(mu1, sigma1, "1")
    mu2_arr, sigma2_arr = _check_gaussian(mu2, sigma2, "2")
    if mu1_arr.shape != mu2_arr.shape:
        raise ValueError(
            f"mu1 and mu2 must have the same length, got {mu1_arr.shape[0]} and {mu2_arr.shape[0]}"
        )

    diff = mu1_arr - mu2_arr
    if method == "eigh":
        tr_covmean = _trace_sqrt_product_eigh(sigma1_arr, sigma2_arr)
        return float(diff.dot(diff) + np.trace(sigma1_arr) + np.trace(sigma2_arr) - 2 * tr_covmean)
    if method != "sqrtm":
        raise ValueError(f"method must be 'sqrtm' or 'eigh', got {method!r}")
    # sqrtm without `disp`: same algorithm as clean-fid's call, minus SciPy's deprecated tuple return
    covmean = linalg.sqrtm(sigma1_arr.dot(sigma2_arr))
    if not np.isfinite(covmean).all():
        logger.warning(
            "FID: the covariance product is singular; adding eps=%g to the diagonals",
            eps,
        )
        offset = np.eye(sigma1_arr.shape[0]) * eps
        covmean = linalg.sqrtm((sigma1_arr + offset).dot(sigma2_arr + offset))
    if np.iscomplexobj(covmean):
        if not np.allclose(np.diagonal(covmean).imag, 0, atol=1e-3):
            m = float(np.max(np.abs(covmean.imag)))
            raise ValueError(
                f"FID: the matrix square root has a large imaginary component ({m:.3g}); "
                "the covariances are probably not positive semi-definite"
            )
        covmean = covmean.real
    tr_covmean = np.trace(covmean)
    return float(
        diff.dot(diff) + np.trace(sigma1_arr) + np.trace(sigma2_arr) - 2 * tr_covmean
    )


def sum_sqrt_eigvalsh(m: np.ndarray) -> float:
    """Sum of the square roots of the eigenvalues of ``m`` symmetrised (``Tr(m^{1/2})``),
    rounding-noise negative eigenvalues counting as 0."""
    m = (m + m.T) / 2.0
    return float(np.sqrt(np.clip(np.linalg.eigvalsh(m), 0.0, None)).sum())
