"""Bootstrap intervals, paired differences and Kendall's tau on hand-worked numbers, and the
strict JSON every report is written with."""

import json
import math

import numpy as np
import pytest

from lmms_genbench.core.keys import json_nulls, strict_json
from lmms_genbench.metrics.functional import chef
from lmms_genbench.metrics.functional import intervals as I

MEAN = {"kind": "mean", "column": "x"}


def test_a_constant_score_has_a_zero_width_interval():
    out = I.bootstrap_interval({"x": [0.7] * 25}, MEAN)
    assert out["low"] == pytest.approx(0.7) and out["high"] == pytest.approx(0.7)
    assert out["stderr"] == pytest.approx(0.0, abs=1e-12)
    assert out["n"] == 25 and out["level"] == 0.95 and out["resamples"] == 1000 and out["seed"] == 0
    assert out["method"] == "percentile bootstrap, over docs"


def test_the_mean_of_bernoulli_draws_has_the_textbook_width():
    n = 400
    out = I.bootstrap_interval({"x": [1.0, 0.0] * (n // 2)}, MEAN, n_resamples=2000)
    textbook = math.sqrt(0.25 / n)  # p(1 - p) / n at p = 1/2
    assert out["stderr"] == pytest.approx(textbook, rel=0.08)
    assert out["high"] - out["low"] == pytest.approx(2 * 1.96 * textbook, rel=0.1)
    assert out["low"] < 0.5 < out["high"]


def test_a_stratified_macro_mean_resamples_within_strata():
    # stratum a: three 1s (its mean is always 1); stratum b: 0 and 1, two draws -> mean 0, .5 or 1
    columns = {"x": [1, 1, 1, 0, 1], "s": ["a", "a", "a", "b", "b"]}
    spec = {"kind": "macro", "column": "x", "by": "s"}
    assert I.estimate(columns, spec) == pytest.approx((1 + 0.5) / 2)  # not the pooled 0.8
    out = I.bootstrap_interval(columns, spec, n_resamples=4000)
    assert out["method"] == "percentile bootstrap, over docs, stratified by s" and out["smallest_stratum"] == 2
    assert (out["low"], out["high"]) == pytest.approx((0.5, 1.0))
    # var of b's mean is 1/8, the macro halves it: sd = sqrt(1/8) / 2
    assert out["stderr"] == pytest.approx(math.sqrt(1 / 8) / 2, rel=0.05)
    for weights in I.resample_weights(columns, spec, 50):
        assert np.all(weights[:, :3].sum(axis=1) == 3) and np.all(weights[:, 3:].sum(axis=1) == 2)
    only_a = I.bootstrap_interval(columns, {**spec, "members": ["a"]})
    assert only_a["low"] == only_a["high"] == pytest.approx(1.0)


def test_whole_clusters_are_resampled():
    columns = {"x": [1, 1, 0, 0, 0, 1], "g": ["p", "p", "q", "q", "q", "r"]}
    spec = {**MEAN, "cluster": "g"}
    for weights in I.resample_weights(columns, spec, 100):
        assert np.all(weights[:, 0] == weights[:, 1]) and np.all(weights[:, 2] == weights[:, 4])
        clusters = weights[:, [0, 2, 5]]  # one doc of each cluster: its count
        assert np.all(clusters.sum(axis=1) == 3)
    assert I.bootstrap_interval(columns, spec)["method"] == "percentile bootstrap, over g clusters"


def test_the_same_seed_gives_the_same_interval():
    rng = np.random.default_rng(3)
    columns = {"x": rng.random(50).tolist()}
    assert I.bootstrap_interval(columns, MEAN, seed=5) == I.bootstrap_interval(columns, MEAN, seed=5)
    assert I.bootstrap_interval(columns, MEAN, seed=5)["low"] != I.bootstrap_interval(columns, MEAN, seed=6)["low"]
    # specs drawn together share resamples and get what they get alone
    together = I.bootstrap_intervals(columns, {"m": MEAN, "avg": {"kind": "avg", "of": [MEAN]}}, seed=5)
    assert together["m"] == I.bootstrap_interval(columns, MEAN, seed=5)
    assert together["avg"]["low"] == pytest.approx(together["m"]["low"])


def test_no_interval_says_why():
    assert I.bootstrap_interval({"x": [None, None]}, MEAN)["reason"].startswith("the score is not a number")
    assert I.bootstrap_interval({"x": [0.5]}, MEAN)["reason"] == "fewer than 2 docs"
    off = I.bootstrap_interval({"x": [0.5, 1.0]}, MEAN, n_resamples=0)
    assert off["low"] is None and off["stderr"] is None and "0 resamples" in off["reason"]
    assert off["value"] == 0.75


def test_paired_bootstrap_of_identical_runs_and_of_a_shift():
    rng = np.random.default_rng(0)
    a = {"x": rng.random(30).tolist()}
    same = I.paired_bootstrap(a, a, MEAN)
    assert same["diff"] == 0 and same["p_value"] == 1.0 and same["low"] == same["high"] == 0
    # b = a - 0.1 on every doc: every resampled difference is 0.1, p = 2 / (B + 1)
    b = {"x": [v - 0.1 for v in a["x"]]}
    shift = I.paired_bootstrap(a, b, MEAN, n_resamples=999)
    assert shift["diff"] == pytest.approx(0.1) and shift["low"] == pytest.approx(0.1) == shift["high"]
    assert shift["p_value"] == pytest.approx(2 / 1000)
    with pytest.raises(ValueError, match="same docs"):
        I.paired_bootstrap(a, {"x": [1.0]}, MEAN)


def test_paired_noise_is_not_significant():
    rng = np.random.default_rng(1)
    a = {"x": rng.integers(0, 2, 200).astype(float).tolist()}
    b = {"x": rng.integers(0, 2, 200).astype(float).tolist()}
    out = I.paired_bootstrap(a, b, MEAN)
    assert out["low"] < out["diff"] < out["high"]
    # the p-value and the interval agree: 0 inside the 95% interval <=> p above 0.05
    assert (out["p_value"] > 0.05) == (out["low"] < 0 < out["high"])
    shifted = I.paired_bootstrap(a, {"x": [v - 0.3 for v in b["x"]]}, MEAN)
    assert shifted["p_value"] < 0.05 and shifted["low"] > 0


@pytest.mark.parametrize(("a", "b", "tau"), [
    ([1, 2, 3, 4], [1, 2, 3, 4], 1.0),
    ([1, 2, 3, 4], [4, 3, 2, 1], -1.0),
    ([1, 2, 3], [1, 3, 2], 1 / 3),  # 2 concordant, 1 discordant pair
    ([1, 1, 2], [1, 2, 3], 2 / math.sqrt(6)),  # tau-b: 2 / sqrt(2 untied in a x 3 untied in b)
])
def test_kendall_tau_b_by_hand(a, b, tau):
    assert I.kendall_tau(a, b) == pytest.approx(tau)


def test_kendall_tau_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(2)
    for _ in range(5):
        a, b = rng.integers(0, 5, 15), rng.integers(0, 5, 15)
        assert I.kendall_tau(a, b) == pytest.approx(stats.kendalltau(a, b).statistic)
    assert math.isnan(I.kendall_tau([1, 1, 1], [1, 2, 3])) and math.isnan(I.kendall_tau([1], [2]))


def test_estimators_give_back_chefs_formulas():
    rng = np.random.default_rng(4)
    conf = rng.random(23)
    corr = (rng.random(23) < conf).astype(float)
    columns = {"conf": conf.tolist(), "corr": corr.tolist()}
    ece = {"kind": "ece", "confidence": "conf", "correct": "corr"}
    assert I.estimate(columns, ece) == pytest.approx(chef.ece_equal_mass(conf, corr))
    assert I.estimate({k: v[:7] for k, v in columns.items()}, ece) == pytest.approx(chef.ece_equal_mass(conf[:7], corr[:7]))
    width = {**ece, "kind": "ece_width"}
    assert I.estimate(columns, width) == pytest.approx(chef.EqualWidthECE().update(conf, corr).value())
    # a doc drawn twice fills two places of the sorted list: ECE of the doubled list
    weights = np.ones((1, 23))
    weights[0, :5] = 2
    doubled = np.concatenate([np.arange(23), np.arange(5)])
    assert I.ESTIMATORS["ece"](I.Table(columns), weights, ece)[0] == pytest.approx(
        chef.ece_equal_mass(conf[doubled], corr[doubled]))

    pred, gold = [1, 1, 0, 0, 1, 0], [1, 0, 0, 1, 1, 1]
    counts = chef.PopeCounts()
    for p, g in zip(pred, gold):
        counts.add(bool(p), bool(g))
    for stat, value in counts.metrics().items():
        spec = {"kind": "pope", "stat": stat, "pred": "p", "gold": "g"}
        assert I.estimate({"p": pred, "g": gold}, spec) == pytest.approx(value), stat

    ref, other, chance = [1, 1, 0, 1], [1, 0, 0, 0], [0.25] * 4
    table = {"ref": ref, "other": other, "chance": chance}
    for formula, fn in (("riam", chef.riam), ("rrm", chef.rrm)):
        spec = {"kind": "ratio", "formula": formula, "ref": "ref", "others": ["other"], "chance": "chance"}
        assert I.estimate(table, spec) == pytest.approx(fn(0.25, 0.75, 0.25))
    spec = {"kind": "ratio", "formula": "rr", "ref": "ref", "others": ["other"]}
    assert I.estimate(table, spec) == pytest.approx(chef.rr(0.25, 0.75))

    groups, right = ["a", "a", "b", "c", "c"], [1, 1, 1, 1, 0]
    spec = {"kind": "circular", "column": "r", "group": "g"}
    assert I.estimate({"r": right, "g": groups}, spec) == pytest.approx(chef.circular_accuracy(groups, right))


def test_specs_are_checked_by_name():
    with pytest.raises(ValueError, match=r"kind must be one of \['avg', .*got 'median'"):
        I.check_spec({"kind": "median", "column": "x"})
    with pytest.raises(ValueError, match="needs \\['by'\\]"):
        I.check_spec({"kind": "macro", "column": "x"})
    with pytest.raises(ValueError, match="no column 'y'"):
        I.estimate({"x": [1.0]}, {"kind": "mean", "column": "y"})


def test_the_doc_table_is_sorted_plain_json():
    table = I.doc_table(["b", "a", "c"], {"x": [0.5, float("nan"), np.float32(1.0)], "s": ["u", "v", "w"]})
    assert table == {"chain_ids": ["a", "b", "c"], "columns": {"x": [None, 0.5, 1.0], "s": ["v", "u", "w"]}}
    strict_json(table)  # no NaN left
    assert I.estimate(table["columns"], MEAN) == pytest.approx(0.75)  # None reads back as no value


def test_reports_are_strict_json_with_a_pointer_per_null():
    clean, nulls = json_nulls({"summary": {"fid@1_x": float("nan"), "gc": 0.5}, "a/b": [1.0, float("inf")]})
    assert clean == {"summary": {"fid@1_x": None, "gc": 0.5}, "a/b": [1.0, None]}
    assert nulls == ["/summary/fid@1_x", "/a~1b/1"]
    with pytest.raises(ValueError, match="Out of range float"):
        strict_json({"fid": float("nan")})
    assert json.loads(strict_json(clean)) == clean
