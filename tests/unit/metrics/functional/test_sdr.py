"""SDR's fits against what the Semantic Drift authors' fitting code gave on the same curves
(tests/support/data/parity/sdr/: their exp_decay and curve_fit calls, run in a scratch
environment), and the fits that cannot be made: null with a reason, never a crash."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from lmms_genbench.metrics.functional.sdr import DecayFit, exp_decay, fit_decay, fit_rows, sdr

PARITY = Path(__file__).parents[3] / "support" / "data" / "parity" / "sdr" / "authors.json"
CASES = json.loads(PARITY.read_text())["cases"]
#: parameters where their fit converged: one MINPACK on one curve; the allowance covers
#: another scipy build or CPU (their 1.15.3 here, the lock's version in CI)
TOL = 1e-6
#: what their script raised -> our reason for the same curve
SAME_OUTCOME = {
    "RuntimeError": "no convergence in 5000 evaluations",
    "TypeError": "fewer than 3 generations",
    "ValueError": "a non-finite value in the curve",
}
#: where we differ on purpose: their optimiser stops somewhere on a curve any b fits
FLAT = "flat curve (the decay is not identifiable)"


def _check(ours: DecayFit, theirs: dict, flat_ok: bool = False) -> None:
    if theirs["outcome"] == "params":
        if flat_ok and ours.reason == FLAT:
            return
        assert ours.ok, ours.reason
        assert ours.params == pytest.approx(theirs["params"], rel=TOL, abs=TOL)
    elif theirs["error"].startswith("a mapping's curve_fit raised"):
        assert not ours.ok and "mapping fits failed" in ours.reason
    else:
        assert ours.reason == SAME_OUTCOME[theirs["error"].split(":")[0]], theirs["error"]


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "fit"], ids=lambda c: c["name"])
def test_one_curve_fits_as_the_authors_fit_it(case):
    ours = fit_decay(case["generations"], case["means"])
    if case["name"] == "flat":
        assert ours.reason == FLAT and case["authors"]["outcome"] == "params"
        return
    _check(ours, case["authors"])


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "sdr"], ids=lambda c: c["name"])
def test_four_curves_give_the_authors_sdr_and_averaged_fit(case):
    result = sdr({c["mapping"]: dict(zip(c["generations"], c["means"])) for c in case["curves"]})
    for curve, theirs in zip(case["curves"], case["authors"]["mappings"]):
        _check(result.fits[curve["mapping"]], theirs)
    _check(result.mean, case["authors"]["sdr"])
    _check(result.avg_curve, case["authors"]["avg_curve"])


def test_the_recorded_cases_cover_each_outcome():
    names = {c["name"] for c in CASES}
    assert {"steep", "flat", "noisy", "rising_linear", "short", "ours_sdp_smoke"} <= names
    outcomes = {c["authors"].get("outcome") or c["authors"]["sdr"]["outcome"] for c in CASES}
    assert outcomes == {"params", "error"}


def test_the_model_and_rows_of_fits():
    assert exp_decay(np.array([0.0, 1.0]), 2.0, math.log(2), 1.0).tolist() == [3.0, 2.0]
    g = np.arange(2.0, 21.0, 2.0)
    rows = np.stack([0.5 * np.exp(-0.2 * g) + 0.3, np.full(g.shape, 0.4)])
    out = fit_rows(g, rows)
    assert out[0] == pytest.approx([0.5, 0.2, 0.3], rel=1e-6) and np.isnan(out[1]).all()
    with pytest.raises(ValueError, match="1-D of one length"):
        fit_decay([1, 2, 3], [0.1, 0.2])
