"""ChEF metrics on hand-worked numbers."""

import math

import numpy as np
import pytest

from lmms_genbench.metrics.functional.chef import (
    EqualWidthECE,
    PopeCounts,
    circular_accuracy,
    desideratum_score,
    ece_equal_mass,
    match_ratio,
    random_accuracy,
    riam,
    rr,
    rrm,
    softmax_confidence,
)

CONF = [0.9, 0.8, 0.6, 0.3]
CORRECT = [1, 0, 1, 0]


def test_ece_equal_mass_two_bins_by_hand():
    # sorted: (0.3,0) (0.6,1) | (0.8,0) (0.9,1): gaps |0.5-0.45| and |0.5-0.85|
    assert ece_equal_mass(CONF, CORRECT, n_bins=2) == pytest.approx(0.5 * 0.05 + 0.5 * 0.35)


def test_ece_equal_mass_uneven_bins_follow_array_split():
    # 5 samples, 2 bins -> sizes 3 and 2 (sorted ascending)
    conf = [0.1, 0.2, 0.3, 0.7, 0.9]
    corr = [0, 0, 1, 1, 1]
    expected = 3 / 5 * abs(1 / 3 - 0.2) + 2 / 5 * abs(1 - 0.8)
    assert ece_equal_mass(conf, corr, n_bins=2) == pytest.approx(expected)


def test_ece_equal_width_and_equal_mass_agree_with_one_sample_per_bin():
    # bins 9, 8, 6, 3; gaps 0.1 + 0.8 + 0.4 + 0.3 over 4 samples
    ece = EqualWidthECE().update(CONF, CORRECT)
    assert ece.value() == pytest.approx(1.6 / 4)
    assert ece_equal_mass(CONF, CORRECT, n_bins=10) == pytest.approx(0.4)


def test_equal_width_ece_merges_exactly_and_puts_one_in_last_bin():
    a = EqualWidthECE().update([1.0, 0.05], [1, 0])
    b = EqualWidthECE().update([0.55], [1])
    merged = a.merge(b)
    whole = EqualWidthECE().update([1.0, 0.05, 0.55], [1, 0, 1])
    assert merged.value() == pytest.approx(whole.value()) == pytest.approx((0 + 0.05 + 0.45) / 3)
    assert merged.count[9] == 1 and merged.count[0] == 1 and merged.count[5] == 1
    rows = merged.reliability()
    assert rows[5]["accuracy"] == 1.0 and math.isnan(rows[3]["confidence"])


def test_ece_empty_and_bad_input():
    assert math.isnan(ece_equal_mass([], []))
    assert math.isnan(EqualWidthECE().value())
    with pytest.raises(ValueError, match="confidences"):
        ece_equal_mass([1.5], [1])
    with pytest.raises(ValueError, match="equal length"):
        ece_equal_mass([0.5, 0.2], [1])


def test_softmax_confidence():
    p = softmax_confidence([math.log(1), math.log(3)])
    assert p == pytest.approx([0.25, 0.75])
    with pytest.raises(ValueError):
        softmax_confidence([])


def test_riam_rrm_rr_by_hand():
    assert riam(0.5, 0.4, 0.25) == pytest.approx(0.1 / 0.15)
    assert riam(0.3, 0.4, 0.25) == pytest.approx(-0.1 / 0.15)
    assert math.isnan(riam(0.5, 0.25, 0.25))
    assert rrm(0.35, 0.45, 0.25) == pytest.approx(0.5)
    assert rr(0.35, 0.45) == pytest.approx(0.35 / 0.45)
    assert math.isnan(rr(0.1, 0.0))


def test_random_accuracy_is_mean_inverse_option_count():
    assert random_accuracy([2, 4, 4]) == pytest.approx((0.5 + 0.25 + 0.25) / 3)


def test_match_ratio():
    assert match_ratio([0, 1, 2, 3], [0, 1, 3, 2]) == 0.5
    assert math.isnan(match_ratio([], []))
    with pytest.raises(ValueError):
        match_ratio([0], [0, 1])


def test_pope_counts_by_hand_and_merge():
    a = PopeCounts()
    for pred, gold in [(1, 1)] * 3 + [(1, 0)]:
        a.add(bool(pred), bool(gold))
    b = PopeCounts(tn=4, fn=2)
    m = a.merge(b).metrics()
    assert m["accuracy"] == pytest.approx(0.7)
    assert m["precision"] == pytest.approx(0.75)
    assert m["recall"] == pytest.approx(0.6)
    assert m["f1"] == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    assert m["yes_ratio"] == pytest.approx(0.4)
    assert math.isnan(PopeCounts(tn=3).metrics()["precision"])


def test_desideratum_scores():
    assert desideratum_score("calibration", 0.12) == pytest.approx(88.0)
    assert desideratum_score("in_context_learning", 0.0) == 50.0
    assert desideratum_score("in_context_learning", -3.0) == 0.0
    assert desideratum_score("language_performance", 7.5) == 75.0
    assert desideratum_score("robustness", 1.3) == 100.0
    assert desideratum_score("hallucination", 0.81) == pytest.approx(81.0)
    assert math.isnan(desideratum_score("robustness", float("nan")))
    with pytest.raises(ValueError, match="desideratum"):
        desideratum_score("speed", 1.0)
    assert np.isfinite(desideratum_score("instruction_following", 0.4))


def test_circular_accuracy_needs_every_copy_of_a_group_right():
    # groups 0 (3 copies, all right), 1 (2 copies, one wrong), 2 (1 copy, right)
    assert circular_accuracy([0, 0, 0, 1, 1, 2], [1, 1, 1, 1, 0, 1]) == pytest.approx(2 / 3)
    assert math.isnan(circular_accuracy([], []))
    with pytest.raises(ValueError, match="one group per answer"):
        circular_accuracy([0, 1], [1])
