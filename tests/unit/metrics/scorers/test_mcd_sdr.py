"""SDR in the MCD report: the fits of the S_δ(g) curves, null with a reason where no fit can be
made, the per-generation doc table its intervals resample, and the names the tasks report."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from lmms_genbench.metrics.functional import intervals
from lmms_genbench.metrics.functional.drift import MAPPINGS
from lmms_genbench.metrics.functional.sdr import sdr
from lmms_genbench.metrics.scorers.mcd import MCD
from lmms_genbench.metrics.scorers.mcd_report import DriftSums, drift_report, sdr_names
from lmms_genbench.plugin import TASKS_DIR

BOOT = {"resamples": 60, "seed": 0, "level": 0.95}


def _sums(G, n=6, seed=0, flat=False):
    """n chains per direction whose similarities decay with g (or stay flat), with noise."""
    rng = np.random.default_rng(seed)
    sums = DriftSums()
    for direction, (same, cross) in {"text_first": MAPPINGS[:2], "image_first": MAPPINGS[2:]}.items():
        chunk = [SimpleNamespace(chain_id=f"{direction}-{i}", direction=direction, source="s") for i in range(n)]
        rows = {}
        for mapping, gens in ((same, range(2, G + 1, 2)), (cross, range(1, G + 1, 2))):
            g = np.array(list(gens), dtype=np.float64)
            curve = np.full(g.shape, 0.4) if flat else 0.5 * np.exp(-0.2 * g) + 0.3
            rows[mapping] = curve[None, :] + (np.zeros((n, g.size)) if flat else rng.normal(0, 0.01, (n, g.size)))
        sums.add(direction, chunk, rows, Counter())
    return sums


def _report(G, **kw):
    return drift_report(_sums(G, **kw), {}, {}, G, "truncate")


def test_the_report_holds_the_fits_of_its_own_curves():
    report = _report(12)
    curves = {m: {g: report[f"s_{m}@{g}"] for g in range(1, 13) if f"s_{m}@{g}" in report} for m in MAPPINGS}
    expected = sdr(curves).values()
    assert {k: report[k] for k in expected} == expected  # one computation, not approximately
    assert report["sdr_n_mappings"] == 4 and report["sdr_failures"] == {} and report["sdr_failure_reasons"] == {}
    assert 0.1 < report["sdr_b_text->text"] < 0.3  # the decay put in, 0.2 per generation
    assert report["sdr_b"] == pytest.approx(np.mean([report[f"sdr_b_{m}"] for m in MAPPINGS]), rel=1e-12)
    # the averaged curve is fitted over rounds 1..6 (the authors' x), so its rate is per two generations
    assert report["sdr_avg_curve_b"] == pytest.approx(2 * 0.2, rel=0.3)


def test_two_generations_per_mapping_give_null_with_the_reason():
    report = _report(4)
    assert all(math.isnan(report[n]) for n in sdr_names())
    assert report["sdr_failures"] == {**{m: "fewer than 3 generations" for m in MAPPINGS},
                                      "sdr": "4 of 4 mapping fits failed", "avg_curve": "fewer than 3 generations"}
    assert report["sdr_failure_reasons"] == {"4 of 4 mapping fits failed": 1, "fewer than 3 generations": 5}
    assert MCD.null_reason("/summary/sdr_b_text->image", report) == "no SDR fit: fewer than 3 generations"
    assert MCD.null_reason("/summary/sdr_avg_curve_c", report) == "no SDR fit: fewer than 3 generations"
    assert MCD.null_reason("/summary/mcd_avg", report).startswith("not a number")


def test_flat_curves_are_null_not_an_invented_rate():
    report = _report(8, flat=True)
    assert report["sdr_failures"]["text->text"] == "flat curve (the decay is not identifiable)"
    assert math.isnan(report["sdr_b"]) and math.isnan(report["sdr_avg_curve_b"])


def test_only_one_direction_scored_fits_its_two_mappings():
    sums = _sums(8)
    sums.blocks = [b for b in sums.blocks if b[0][0].direction == "text_first"]
    from lmms_genbench.metrics.functional.drift import DriftStats

    total = DriftStats()
    for m in MAPPINGS[:2]:
        for g, v in sums.total.curve(m).items():
            total.update(m, g, [v])
    sums.total = total
    report = drift_report(sums, {}, {}, 8, "truncate")
    assert report["sdr_n_mappings"] == 2 and not math.isnan(report["sdr_b"])
    assert report["sdr_failures"] == {m: "no chains of this mapping were scored" for m in MAPPINGS[2:]}


def test_intervals_refit_resampled_curves_and_estimate_the_reported_values():
    report = _report(10)
    columns = report["doc_scores"]["columns"]
    assert columns["s_text->text@4"][-1] is not None and columns["s_text->text@4"][0] is None  # image-first rows
    MCD.add_intervals(report, None, BOOT)
    for name in sdr_names():
        spec = report["estimators"][name]
        # the table's means differ from the exact sums in the last bits, and the fit stops at
        # MINPACK's tolerance (1.5e-8 relative), so a refit agrees to about that
        assert intervals.estimate(columns, spec) == pytest.approx(report[name], rel=1e-6, abs=1e-9), name
        found = report["intervals"][name]
        assert found["low"] <= found["high"] and found["stderr"] > 0, name
        assert found["method"] == "percentile bootstrap, over docs, stratified by direction"
    assert report["intervals"]["sdr_b"]["low"] < report["sdr_b"] < report["intervals"]["sdr_b"]["high"]


def test_no_interval_where_no_fit_is_made():
    report = _report(4)
    MCD.add_intervals(report, None, BOOT)
    assert report["intervals"]["sdr_b"]["reason"].startswith("the score is not a number")


@pytest.mark.parametrize("task", ["sdp_nocaps", "sdp_smoke"])
def test_the_tasks_report_sdr_with_b_and_a_lower_is_better(task):
    text = (Path(TASKS_DIR) / "sdp" / f"{task}.yaml").read_text()
    listed = {}
    for line in text.splitlines():
        if line.strip().startswith("- {metric:"):
            entry = yaml.safe_load(line.strip()[2:].replace("!function ", ""))
            listed[entry["metric"]] = entry["higher_is_better"]
    settings = MCD.task_settings(yaml.safe_load(text.split("scorer: ")[1].split("\n")[0].split("#")[0]))
    G = int(text.split("generations: ")[1].split()[0])
    assert list(listed) == MCD.metric_names(G, settings)
    for name in sdr_names():
        param = name.split("_")[-1] if name.startswith("sdr_avg_curve") else name.split("_")[1]
        assert listed[name] is (param == "c"), name
        assert f"{name}_stderr" in listed
