"""Semantic Drift Rate (SDR): an exponential decay fitted to each S_δ(g) curve. Numpy and scipy.

The Semantic Drift authors added SDR after the paper (``semantic-drift/mcd-sdr.py``, commit
c1ddd67 "Add SDR" of mollahsabbir/Semantic-Drift-in-Unified-Models). What their code does, and
this module follows:

* per mapping δ, ``a * exp(-b * g) + c`` is fitted to the per-generation means S_δ(g) with
  ``scipy.optimize.curve_fit(exp_decay, generations, means, p0=(1, 0.1, 0), maxfev=5000)``,
  g being the generations the mapping compares (2, 4, … or 1, 3, …);
* SDR is the mean of the four mappings' (a, b, c);
* a last fit is made to the four curves averaged point by point after cutting them to the
  shortest, against x = 1, 2, …, n (their ``range(1, min_len + 1)``): its b is per *round* of
  two generations, not per generation.

b is the rate: a smaller b drifts more slowly. Where their code crashes or reports whatever
the optimiser stopped at, a fit here is null with a reason (:class:`DecayFit`): fewer than 3
points (3 parameters), a non-finite value, a flat curve (the decay is not identifiable), no
convergence within ``maxfev`` evaluations (their ``RuntimeError``), non-finite parameters.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MAXFEV", "MIN_POINTS", "P0", "PARAMS", "DecayFit", "SDRResult", "exp_decay", "fit_decay",
           "fit_rows", "sdr"]

P0 = (1.0, 0.1, 0.0)  # the authors' starting point
MAXFEV = 5000  # the authors' evaluation budget
MIN_POINTS = 3  # three parameters
PARAMS = ("a", "b", "c")
#: a curve whose spread is at most this (relative to its size) is flat: any b fits it
FLAT_REL = 1e-12


def exp_decay(x: Any, a: float, b: float, c: float) -> Any:
    """The authors' model, ``a * exp(-b * x) + c``."""
    return a * np.exp(-b * x) + c


@dataclass(frozen=True)
class DecayFit:
    """One fit: ``params`` (a, b, c), or None and ``reason`` (short, countable)."""

    params: tuple[float, float, float] | None
    reason: str | None = None
    points: int = 0

    @property
    def ok(self) -> bool:
        return self.params is not None

    def value(self, param: str) -> float:
        """``a``, ``b`` or ``c``; NaN when the fit failed."""
        return self.params[PARAMS.index(param)] if self.params is not None else math.nan


def _why_not(x: np.ndarray, y: np.ndarray) -> str | None:
    if y.size < MIN_POINTS:
        return f"fewer than {MIN_POINTS} generations"
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(x))):
        return "a non-finite value in the curve"
    if np.ptp(y) <= FLAT_REL * max(1.0, float(np.max(np.abs(y)))):
        return "flat curve (the decay is not identifiable)"
    return None


def fit_decay(generations: Sequence[float], means: Sequence[float]) -> DecayFit:
    """The authors' fit of ``means`` over ``generations``, or why there is none.

    Raises:
        ValueError: ``generations`` and ``means`` are not 1-D of one length."""
    x = np.asarray(generations, dtype=np.float64)
    y = np.asarray(means, dtype=np.float64)
    if x.ndim != 1 or y.shape != x.shape:
        raise ValueError(f"generations and means must be 1-D of one length, got shapes {x.shape} and {y.shape}")
    reason = _why_not(x, y)
    if reason:
        return DecayFit(None, reason, int(y.size))
    from scipy.optimize import OptimizeWarning, curve_fit  # scipy.optimize is slow to import

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        # three points fit exactly and leave no covariance: the parameters still stand
        warnings.simplefilter("ignore", OptimizeWarning)
        try:
            params, _ = curve_fit(exp_decay, x, y, p0=P0, maxfev=MAXFEV)
        except RuntimeError:
            return DecayFit(None, f"no convergence in {MAXFEV} evaluations", int(y.size))
    if not np.all(np.isfinite(params)):
        return DecayFit(None, "the fit's parameters are not finite", int(y.size))
    a, b, c = (float(p) for p in params)
    return DecayFit((a, b, c), None, int(y.size))


def fit_rows(generations: Sequence[float], rows: np.ndarray) -> np.ndarray:
    """(B, 3) parameters of each row's fit (rows: (B, n) curves); a failed fit is a NaN row."""
    out = np.full((rows.shape[0], 3), np.nan)
    for i, row in enumerate(rows):
        fit = fit_decay(generations, row)
        if fit.ok:
            out[i] = fit.params
    return out


@dataclass(frozen=True)
class SDRResult:
    """Each mapping's fit, SDR (the mean of their parameters) and the averaged curve's fit."""

    fits: dict[str, DecayFit]
    mean: DecayFit
    avg_curve: DecayFit

    def values(self) -> dict[str, float]:
        """``sdr_<p>_<mapping>``, ``sdr_<p>``, ``sdr_avg_curve_<p>`` (NaN where a fit failed)."""
        out: dict[str, float] = {}
        for mapping, fit in self.fits.items():
            out.update({f"sdr_{p}_{mapping}": fit.value(p) for p in PARAMS})
        out.update({f"sdr_{p}": self.mean.value(p) for p in PARAMS})
        out.update({f"sdr_avg_curve_{p}": self.avg_curve.value(p) for p in PARAMS})
        return out

    def reasons(self) -> dict[str, str]:
        """Metric group (a mapping, ``"sdr"``, ``"avg_curve"``) -> why its fit is null."""
        out = {m: f.reason for m, f in self.fits.items() if f.reason}
        out.update({k: f.reason for k, f in (("sdr", self.mean), ("avg_curve", self.avg_curve)) if f.reason})
        return out


def mean_fit(fits: Sequence[DecayFit]) -> DecayFit:
    """SDR: the mean of the fits' parameters (``np.mean(all_params, axis=0)``), null unless all fitted."""
    if not fits:
        return DecayFit(None, "no curve to fit")
    failed = sum(not f.ok for f in fits)
    if failed:
        return DecayFit(None, f"{failed} of {len(fits)} mapping fits failed")
    a, b, c = (float(v) for v in np.mean(np.array([f.params for f in fits]), axis=0))
    return DecayFit((a, b, c), None, min(f.points for f in fits))


def averaged_curve(curves: Sequence[Sequence[float]]) -> np.ndarray:
    """The curves cut to the shortest and averaged point by point (the authors' final curve)."""
    if not curves:
        return np.zeros(0)
    n = min(len(c) for c in curves)
    return np.mean(np.array([list(c)[:n] for c in curves], dtype=np.float64), axis=0)


def sdr(curves: Mapping[str, Mapping[int, float]]) -> SDRResult:
    """SDR of S_δ(g) curves (mapping -> {g: mean}, in the authors' mapping order; mappings
    without data left out): each mapping's fit over its own g, the mean of their parameters,
    and the fit of the averaged curve over x = 1..n."""
    present = {m: dict(sorted(c.items())) for m, c in curves.items() if c}
    fits = {m: fit_decay(list(c), list(c.values())) for m, c in present.items()}
    avg = averaged_curve([list(c.values()) for c in present.values()])
    avg_fit = fit_decay(np.arange(1, avg.size + 1), avg) if present else DecayFit(None, "no curve to fit")
    return SDRResult(fits, mean_fit(list(fits.values())), avg_fit)
