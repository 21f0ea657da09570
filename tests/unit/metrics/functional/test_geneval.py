"""Tests of lmms_genbench.metrics.functional.geneval: GenEval's rules on hand-worked detections,
GenEval/MGG aggregation, and the OWLv2 / CLIP adapters on tiny random-weight models.

Nothing is downloaded: the networks are built from configs (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import math
import subprocess
import sys
import types

import pytest

from lmms_genbench.metrics.functional.geneval import (
    COLORS,
    DEFAULT_RULES,
    RULE_PRESETS,
    TAGS,
    Detection,
    GenEvalResult,
    GenEvalRules,
    GenEvalStats,
    box_iou,
    evaluate_detections,
    relative_position,
    rules_preset,
    select_detections,
    validate_metadata,
)
from lmms_genbench.metrics.networks.detection import (
    CLIPColorClassifier,
    OWLv2Detector,
    build_color_classifier,
    build_detector,
    evaluate_image,
)

from tests.support.owlv2_scores import PASS_UNDER_GENEVAL, REALISTIC

SIZE = (512, 512)
# the rule tests below check GenEval's own rules, thresholds included (0.3, counting 0.9)
GENEVAL = RULE_PRESETS["geneval"]


def D(box, score=0.8, color=None):
    return Detection(box, score, color)


def judge(meta, dets, **kw):
    kw.setdefault("rules", GENEVAL)
    return evaluate_detections(meta, dets, image_size=kw.pop("image_size", SIZE), **kw)


def single(cls="cat"):
    return {
        "tag": "single_object",
        "include": [{"class": cls, "count": 1}],
        "prompt": f"a photo of a {cls}",
    }


def counting(cls, n):
    # GenEval's counting entries: at least n, and an exclude at n + 1 makes it exactly n
    return {
        "tag": "counting",
        "include": [{"class": cls, "count": n}],
        "exclude": [{"class": cls, "count": n + 1}],
    }


def position(relation, a="cat", b="dog", b_count=1):
    return {
        "tag": "position",
        "include": [
            {"class": b, "count": b_count},
            {"class": a, "count": 1, "position": [relation, 0]},
        ],
    }


# --------------------------------------------------------------------------- single / two objects
def test_single_object_present_and_absent():
    ok = judge(single(), {"cat": [D((10, 10, 50, 50), 0.8)]})
    assert ok == GenEvalResult(
        "single_object", True, "", {"cat": (D((10, 10, 50, 50), 0.8),)}
    )
    missing = judge(single(), {"dog": [D((10, 10, 50, 50), 0.8)]})
    assert not missing.correct and missing.reason == "expected cat >= 1, found 0"
    assert not judge(single(), {}).correct


def test_two_objects_need_both():
    meta = {
        "tag": "two_object",
        "include": [{"class": "cat", "count": 1}, {"class": "dog", "count": 1}],
    }
    assert judge(meta, {"cat": [D((0, 0, 9, 9))], "dog": [D((50, 50, 90, 90))]}).correct
    only_cat = judge(meta, {"cat": [D((0, 0, 9, 9))]})
    assert not only_cat.correct and only_cat.reason == "expected dog >= 1, found 0"


# --------------------------------------------------------------------------- thresholds
def test_threshold_is_strict_and_03_by_default():
    assert judge(single(), {"cat": [D((0, 0, 9, 9), 0.31)]}).correct
    assert not judge(
        single(), {"cat": [D((0, 0, 9, 9), 0.30)]}
    ).correct  # "> 0.3", not ">="
    assert not judge(single(), {"cat": [D((0, 0, 9, 9), 0.29)]}).correct


def test_counting_uses_threshold_09():
    dets = {"cat": [D((0, 0, 9, 9), 0.95), D((20, 0, 29, 9), 0.5)]}
    # the same two detections: two cats for a non-counting tag (0.5 > 0.3) ...
    two = {"tag": "single_object", "include": [{"class": "cat", "count": 2}]}
    assert judge(two, dets).correct
    # ... but one cat for counting (0.5 <= 0.9)
    res = judge(counting("cat", 2), dets)
    assert not res.correct and res.reason == "expected cat >= 2, found 1"
    assert GENEVAL.confidence_threshold("counting") == 0.9
    assert GENEVAL.confidence_threshold("position") == 0.3


def test_the_default_rules_are_owlv2s_0_1_for_every_tag():
    """The default everywhere is the Semantic Drift authors' OWLv2 threshold (0.1, counting
    included); GenEval's 0.3 / 0.9 stay a named rule set."""
    assert DEFAULT_RULES == "owlv2" and rules_preset("owlv2") == GenEvalRules()
    assert all(GenEvalRules().confidence_threshold(t) == 0.1 for t in TAGS)
    assert rules_preset("geneval") == GenEvalRules(threshold=0.3, counting_threshold=0.9)
    # only the thresholds differ between the two rule sets
    assert RULE_PRESETS["owlv2"].max_objects == GENEVAL.max_objects == 16
    assert RULE_PRESETS["owlv2"].position_threshold == GENEVAL.position_threshold == 0.1
    dets = {"cat": [D((0, 0, 9, 9), 0.12)]}
    assert evaluate_detections(single(), dets, image_size=SIZE).correct  # None = the default
    assert not evaluate_detections(
        single(), {"cat": [D((0, 0, 9, 9), 0.1)]}, image_size=SIZE
    ).correct  # strictly above, as transformers' post-processing the authors used
    with pytest.raises(ValueError, match=r"rules must be one of \['geneval', 'owlv2'\], got 'mask2former'"):
        rules_preset("mask2former")


@pytest.mark.parametrize("tag", TAGS)
def test_realistic_owlv2_scores_pass_the_default_rules_not_genevals(tag):
    meta, dets = REALISTIC[tag]
    assert meta["tag"] == tag
    assert evaluate_detections(meta, dets, image_size=SIZE).correct, tag
    under_geneval = judge(meta, dets)  # GenEval's thresholds
    assert under_geneval.correct == (tag in PASS_UNDER_GENEVAL), under_geneval.reason


def test_counting_exact_versus_one_too_many():
    two = [D((0, 0, 9, 9), 0.95), D((20, 0, 29, 9), 0.95)]
    assert judge(counting("cat", 2), {"cat": two}).correct
    three = two + [D((40, 0, 49, 9), 0.92)]
    res = judge(counting("cat", 2), {"cat": three})
    # the include (>= 2) holds; the exclude (>= 3 is wrong) fails it
    assert not res.correct and res.reason == "expected cat < 3, found 3"
    # a third cat below 0.9 does not count
    assert judge(counting("cat", 2), {"cat": two + [D((40, 0, 49, 9), 0.9)]}).correct


def test_exclude_of_another_class():
    meta = {**single("cat"), "exclude": [{"class": "dog", "count": 1}]}
    assert judge(meta, {"cat": [D((0, 0, 9, 9))]}).correct
    res = judge(meta, {"cat": [D((0, 0, 9, 9))], "dog": [D((50, 0, 59, 9), 0.4)]})
    assert not res.correct and res.reason == "expected dog < 1, found 1"
    # a dog below the threshold is not "found"
    assert judge(
        meta, {"cat": [D((0, 0, 9, 9))], "dog": [D((50, 0, 59, 9), 0.2)]}
    ).correct


# --------------------------------------------------------------------------- cap and NMS
def test_max_16_objects_per_class():
    cats = [D((i * 20, 0, i * 20 + 9, 9), 0.99 - i * 0.001) for i in range(20)]
    meta = counting("cat", 16)  # exclude at 17
    res = judge(meta, {"cat": cats})
    # GenEval keeps the 16 most confident, so the exclude (>= 17) can never fire
    assert res.correct and res.kept["cat"] == tuple(cats[:16])
    uncapped = judge(meta, {"cat": cats}, rules=GenEvalRules(max_objects=None))
    assert not uncapped.correct and uncapped.reason == "expected cat < 17, found 20"


def test_cap_comes_before_nms_and_nms_is_off_by_default():
    dup = [D((0, 0, 9, 9), 0.95), D((0, 0, 9, 9), 0.94)]
    # max_overlap 1.0 (GenEval's default): identical boxes are two objects
    assert judge(counting("cat", 2), {"cat": dup}).correct
    assert not judge(
        counting("cat", 2), {"cat": dup}, rules=GenEvalRules(nms_iou=0.5)
    ).correct
    # cap 2 keeps the two duplicates, NMS then leaves one: the third box never gets in
    three = dup + [D((100, 0, 109, 9), 0.93)]
    kept = select_detections(three, threshold=0.3, max_objects=2, nms_iou=0.5)
    assert kept == [dup[0]]


def test_box_iou_uses_genevals_inclusive_pixels():
    assert box_iou((0, 0, 9, 9), (0, 0, 9, 9)) == 1.0
    # 10 x 10 boxes sharing 5 columns: 50 / (100 + 100 - 50)
    assert box_iou((0, 0, 9, 9), (5, 0, 14, 9)) == pytest.approx(1 / 3)
    assert box_iou((0, 0, 9, 9), (20, 20, 29, 29)) == 0.0
    # suppression at IoU >= nms_iou: 1/3 is kept at 0.34, dropped at 1/3
    pair = [D((0, 0, 9, 9), 0.9), D((5, 0, 14, 9), 0.8)]
    assert len(select_detections(pair, threshold=0.3, nms_iou=0.34)) == 2
    assert len(select_detections(pair, threshold=0.3, nms_iou=1 / 3)) == 1


def test_select_sorts_by_score_and_keeps_ties_in_order():
    a, b, c = D((0, 0, 1, 1), 0.5), D((2, 2, 3, 3), 0.9), D((4, 4, 5, 5), 0.5)
    assert select_detections([a, b, c], threshold=0.3) == [b, a, c]


# --------------------------------------------------------------------------- colours
def colors_meta(color="red", cls="car"):
    return {"tag": "colors", "include": [{"class": cls, "count": 1, "color": color}]}


def test_color_right_and_wrong():
    assert judge(colors_meta(), {"car": [D((0, 0, 9, 9), 0.8, "red")]}).correct
    res = judge(colors_meta(), {"car": [D((0, 0, 9, 9), 0.8, "blue")]})
    assert (
        not res.correct and res.reason == "expected red car >= 1, found 0 red (1 blue)"
    )


def test_color_is_judged_on_the_most_confident_objects_only():
    red_first = [D((0, 0, 9, 9), 0.9, "red"), D((20, 0, 29, 9), 0.8, "blue")]
    blue_first = [D((0, 0, 9, 9), 0.9, "blue"), D((20, 0, 29, 9), 0.8, "red")]
    assert judge(colors_meta(), {"car": red_first}).correct
    assert not judge(colors_meta(), {"car": blue_first}).correct
    # with count 2 every one of the two must be red
    two_red = {
        "tag": "colors",
        "include": [{"class": "car", "count": 2, "color": "red"}],
    }
    res = judge(two_red, {"car": red_first})
    assert (
        not res.correct
        and res.reason == "expected red car >= 2, found 1 red (1 red, 1 blue)"
    )


def test_color_fn_gets_only_the_boxes_geneval_classifies():
    calls = []

    def color_fn(cls, boxes):
        calls.append((cls, list(boxes)))
        return ["green"] * len(boxes)

    cars = [D((0, 0, 9, 9), 0.9), D((20, 0, 29, 9), 0.8), D((40, 0, 49, 9), 0.1)]
    assert judge(colors_meta("green"), {"car": cars}, color_fn=color_fn).correct
    assert calls == [("car", [(0.0, 0.0, 9.0, 9.0)])]
    # not called when the count already fails
    calls.clear()
    assert not judge(colors_meta("green"), {}, color_fn=color_fn).correct
    assert calls == []
    with pytest.raises(ValueError, match="color_fn must return one of"):
        judge(colors_meta(), {"car": cars}, color_fn=lambda cls, boxes: ["teal"])
    with pytest.raises(ValueError, match="pass color_fn"):
        judge(colors_meta(), {"car": cars})


def test_color_attribution_binds_each_colour_to_its_object():
    meta = {
        "tag": "color_attr",
        "include": [
            {"class": "car", "count": 1, "color": "red"},
            {"class": "bench", "count": 1, "color": "blue"},
        ],
    }
    right = {
        "car": [D((0, 0, 9, 9), 0.8, "red")],
        "bench": [D((50, 0, 59, 9), 0.8, "blue")],
    }
    swapped = {
        "car": [D((0, 0, 9, 9), 0.8, "blue")],
        "bench": [D((50, 0, 59, 9), 0.8, "red")],
    }
    assert judge(meta, right).correct
    res = judge(meta, swapped)
    assert not res.correct
    assert (
        res.reason
        == "expected red car >= 1, found 0 red (1 blue); expected blue bench >= 1, found 0 blue (1 red)"
    )


# --------------------------------------------------------------------------- positions
DOG = (200, 200, 240, 240)  # centre (220, 220), 40 x 40
CATS = {
    "left of": (
        100,
        200,
        140,
        240,
    ),  # offset (-100, 0): shrunk by 0.1 * 80 = 8 -> dx = -92 / 100
    "right of": (300, 200, 340, 240),
    "above": (200, 100, 240, 140),
    "below": (200, 300, 240, 340),
}


@pytest.mark.parametrize("actual", list(CATS))
def test_position_each_relation(actual):
    dets = {"dog": [D(DOG)], "cat": [D(CATS[actual])]}
    assert relative_position(CATS[actual], DOG) == {actual}
    for asked in CATS:
        res = judge(position(asked), dets)
        assert res.correct == (asked == actual), (asked, actual, res.reason)
        if asked != actual:
            assert res.reason == f"expected cat {asked} dog, found {actual} dog"


def test_position_hand_worked_geometry():
    # normalised by the unshrunk offset: (60, 0) shrunk by 0.1 * (100 + 100) = 20 -> dx = 40 / 60
    assert relative_position((60, 0, 160, 100), (0, 0, 100, 100)) == {"right of"}
    # (20, 0) shrunk by 20 -> 0 on both axes: no relation at all
    assert relative_position((20, 0, 120, 100), (0, 0, 100, 100)) == frozenset()
    # a clear diagonal gives two relations (dx = dy = 96 / 141.4 > 0.5)
    assert relative_position((100, 100, 120, 120), (0, 0, 20, 20)) == {
        "right of",
        "below",
    }
    assert relative_position((0, 0, 20, 20), (100, 100, 120, 120)) == {
        "left of",
        "above",
    }
    # the setting scales the shrink: with 0.5, (60, 0) is shrunk by 100 -> nothing
    assert relative_position((60, 0, 160, 100), (0, 0, 100, 100), 0.5) == frozenset()


def test_position_near_tie_normalised_versus_authors_pixels():
    """B at centre (10, 10), A at centre (110, 18), both 20 x 20.

    Offset (100, 8), shrunk by 0.1 * 40 = 4 per axis -> (96, 4). GenEval divides by |(100, 8)|
    = 100.3: (0.957, 0.040) -> only "right of". The Semantic Drift code compares the shrunk
    *pixels* (96, 4) with +-0.5 and so also reports "below": "a cat below a dog" passes there
    and fails here.
    """
    a, b = (100, 8, 120, 28), (0, 0, 20, 20)
    assert relative_position(a, b) == {"right of"}

    def authors_pixel_rule(
        box_a, box_b, t=0.1
    ):  # their test, restated for the comparison
        ox = (box_a[0] + box_a[2]) / 2 - (box_b[0] + box_b[2]) / 2
        oy = (box_a[1] + box_a[3]) / 2 - (box_b[1] + box_b[3]) / 2
        rx = math.copysign(
            max(abs(ox) - t * (box_a[2] - box_a[0] + box_b[2] - box_b[0]), 0), ox
        )
        ry = math.copysign(
            max(abs(oy) - t * (box_a[3] - box_a[1] + box_b[3] - box_b[1]), 0), oy
        )
        return {
            r
            for r, hit in (
                ("left of", rx < -0.5),
                ("right of", rx > 0.5),
                ("above", ry < -0.5),
                ("below", ry > 0.5),
            )
            if hit
        }

    assert authors_pixel_rule(a, b) == {"right of", "below"}
    dets = {"dog": [D(b)], "cat": [D(a)]}
    res = judge(position("below"), dets)
    assert (
        not res.correct and res.reason == "expected cat below dog, found right of dog"
    )
    assert judge(position("right of"), dets).correct


def test_position_needs_a_target_and_every_pair():
    res = judge(position("left of"), {"cat": [D(CATS["left of"])]})
    assert not res.correct
    assert res.reason == "expected dog >= 1, found 0; no target for cat to be left of"
    # two dogs required; the cat is left of one and right of the other: GenEval wants all pairs
    dogs = [D(DOG, 0.9), D((0, 200, 40, 240), 0.8)]
    res = judge(
        position("left of", b_count=2), {"dog": dogs, "cat": [D(CATS["left of"])]}
    )
    assert (
        not res.correct and res.reason == "expected cat left of dog, found right of dog"
    )


def test_position_target_failing_its_colour_is_no_target():
    meta = {
        "tag": "position",
        "include": [
            {"class": "dog", "count": 1, "color": "black"},
            {"class": "cat", "count": 1, "position": ["left of", 0]},
        ],
    }
    dets = {"dog": [D(DOG, 0.8, "white")], "cat": [D(CATS["left of"])]}
    res = judge(meta, dets)
    assert not res.correct and res.reason.endswith("no target for cat to be left of")


def test_boxes_are_clipped_to_the_image():
    res = judge(single(), {"cat": [D((-10, 5, 600, 50), 0.8)]}, image_size=(100, 80))
    assert res.kept["cat"][0].box == (0.0, 5.0, 100.0, 50.0)


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "meta, match",
    [
        (
            {"tag": "shapes", "include": [{"class": "cat", "count": 1}]},
            "tag must be one of",
        ),
        (
            {"tag": "single_object", "include": []},
            r"metadata\['include'\] must be a non-empty list",
        ),
        (
            {"tag": "single_object", "include": [{"class": "cat", "count": 0}]},
            r"\['count'\] must be a positive integer, got 0",
        ),
        (
            {"tag": "single_object", "include": [{"class": "", "count": 1}]},
            r"\['class'\] must be a non-empty string",
        ),
        (
            {
                "tag": "colors",
                "include": [{"class": "cat", "count": 1, "color": "teal"}],
            },
            r"\['color'\] must be one of",
        ),
        (position("beside"), r"\['position'\]\[0\] must be one of"),
        (
            {
                "tag": "position",
                "include": [{"class": "cat", "count": 1, "position": ["left of", 0]}],
            },
            "earlier include",
        ),
        (
            {
                "tag": "counting",
                "include": [{"class": "cat", "count": 2}],
                "exclude": [{"class": "cat"}],
            },
            r"exclude'\]\[0\]\['count'\]",
        ),
    ],
)
def test_metadata_validation(meta, match):
    with pytest.raises(ValueError, match=match):
        validate_metadata(meta)


def test_metadata_normalised_and_extra_keys_ignored():
    meta = validate_metadata(position("above"))
    assert meta == {
        "tag": "position",
        "include": [
            {"class": "dog", "count": 1},
            {"class": "cat", "count": 1, "position": ("above", 0)},
        ],
        "exclude": [],
    }


def test_argument_validation():
    with pytest.raises(ValueError, match="threshold must be in"):
        GenEvalRules(threshold=1.0)
    with pytest.raises(
        ValueError, match="max_objects must be a positive integer or None, got 0"
    ):
        GenEvalRules(max_objects=0)
    with pytest.raises(ValueError, match=r"nms_iou must be in \(0, 1\]"):
        GenEvalRules(nms_iou=0.0)
    with pytest.raises(ValueError, match="x2 >= x1"):
        Detection((10, 0, 5, 5), 0.5)
    with pytest.raises(ValueError, match="score must be a number in"):
        Detection((0, 0, 5, 5), 1.5)
    with pytest.raises(ValueError, match="image_size must be"):
        judge(single(), {}, image_size=(0, 10))
    with pytest.raises(TypeError, match="must be a Detection"):
        judge(single(), {"cat": [((0, 0, 1, 1), 0.9)]})
    with pytest.raises(TypeError, match="rules must be a GenEvalRules"):
        judge(single(), {}, rules={"threshold": 0.1})


# --------------------------------------------------------------------------- aggregation
# per tag: (correct, images) at generation 0, then at generation 1
COUNTS = {
    "single_object": ((7, 8), (1, 2)),
    "two_object": ((1, 2), (0, 2)),
    "counting": ((0, 1), (0, 1)),
    "colors": ((1, 1), (1, 2)),
    "position": ((1, 4), (0, 1)),
    "color_attr": ((1, 2), (1, 2)),
}
GEN0 = {tag: gens[0] for tag, gens in COUNTS.items()}
GEN1 = {tag: gens[1] for tag, gens in COUNTS.items()}


def fill(stats, counts, generation):
    for tag, (c, n) in counts.items():
        for i in range(n):
            stats.add(tag, i < c, generation=generation)


def test_per_tag_overall_per_generation_and_mgg():
    stats = GenEvalStats()
    fill(stats, GEN0, 0)
    fill(stats, GEN1, 1)
    assert stats.tag_accuracy(0) == {
        "single_object": 0.875,
        "two_object": 0.5,
        "counting": 0.0,
        "colors": 1.0,
        "position": 0.25,
        "color_attr": 0.5,
    }
    # mean over the six tags (3.125 / 6), not the pooled 11 / 18 of images
    assert stats.overall(0) == pytest.approx(3.125 / 6)
    assert stats.overall(1) == pytest.approx(1.5 / 6)
    assert stats.mgg() == pytest.approx((3.125 / 6 + 0.25) / 2)
    assert stats.mgg([1]) == pytest.approx(0.25)
    summary = stats.summary()
    assert summary["per_generation"][1]["overall"] == pytest.approx(0.25)
    assert summary["mgg"] == pytest.approx(stats.mgg())
    assert stats.generations == [0, 1]


def test_stats_merge_and_round_trip():
    whole = GenEvalStats()
    fill(whole, GEN0, 0)
    fill(whole, GEN1, 3)
    part_a, part_b = GenEvalStats(), GenEvalStats()
    fill(part_a, {t: GEN0[t] for t in TAGS[:3]}, 0)
    fill(part_b, {t: GEN0[t] for t in TAGS[3:]}, 0)
    part_b.add_counts("single_object", 1, 2, generation=3)
    fill(part_b, {t: GEN1[t] for t in TAGS[1:]}, 3)
    merged = part_a.merge(part_b)
    assert merged == whole and (part_a + part_b) == whole
    assert merged.counts[(0, "single_object")] == (7, 8)
    assert GenEvalStats.from_dict(whole.to_dict()) == whole
    # merging leaves the inputs untouched
    assert (3, "single_object") not in part_a.counts


def test_stats_missing_tags_and_errors():
    stats = GenEvalStats()
    stats.add("position", True)
    stats.add("position", False)
    assert stats.overall() == 0.5 and stats.missing_tags() == [
        t for t in TAGS if t != "position"
    ]
    with pytest.raises(ValueError, match="generation 2 has no images"):
        stats.overall(2)
    with pytest.raises(ValueError, match="tag must be one of"):
        stats.add("shapes", True)
    with pytest.raises(ValueError, match="generation must be an integer >= 0"):
        stats.add("position", True, generation=-1)
    with pytest.raises(ValueError, match="correct must be <= total"):
        stats.add_counts("position", 3, 2)
    with pytest.raises(ValueError, match="no generations"):
        GenEvalStats().mgg()
    result = judge(single(), {"cat": [D((0, 0, 9, 9))]})
    stats.add_result(result, generation=1)
    assert stats.tag_accuracy(1) == {"single_object": 1.0}


# --------------------------------------------------------------------------- adapters
def test_import_loads_no_torch():
    code = "import sys, lmms_genbench.metrics.functional.geneval; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False"]


@pytest.fixture(scope="module")
def image():
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 256, size=(48, 64, 3), dtype=np.uint8))


@pytest.fixture(scope="module")
def tiny_detector():
    return build_detector("tiny-owlv2", score_floor=0.0)


@pytest.fixture(scope="module")
def tiny_colors():
    return build_color_classifier("tiny-clip")


def test_tiny_owlv2_detector_end_to_end(tiny_detector, image):
    import torch
    from torchvision.ops import box_iou as tv_iou

    assert isinstance(tiny_detector, OWLv2Detector)
    out = tiny_detector.detect(image, ["cat", "dog", "cat"])
    assert list(out) == ["cat", "dog"]
    for dets in out.values():
        assert dets and all(isinstance(d, Detection) for d in dets)
        scores = [d.score for d in dets]
        assert scores == sorted(scores, reverse=True)
        for d in dets:
            x1, y1, x2, y2 = d.box
            assert 0 <= x1 <= x2 <= 64 and 0 <= y1 <= y2 <= 48
        boxes = torch.tensor([d.box for d in dets], dtype=torch.float64)
        iou = tv_iou(boxes, boxes) - torch.eye(len(dets), dtype=torch.float64)
        assert float(iou.max()) <= 0.5 + 1e-6  # NMS at 0.5
    assert tiny_detector.detect(image, ["cat", "dog"]) == out  # deterministic
    # class names of different lengths (a batch of uneven queries once failed to tensorise)
    uneven = tiny_detector.detect(image, ["cat", "traffic light", "a very long class name indeed"])
    assert set(uneven) == {"cat", "traffic light", "a very long class name indeed"}


def test_owlv2_postprocessing_by_hand():
    """Logits/boxes of a stub model: scaling by the padded square, clipping, sigmoid, NMS."""
    import torch

    class Stub(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, input_ids, attention_mask, pixel_values):
            boxes = torch.tensor(
                [
                    [
                        [0.5, 0.25, 0.2, 0.1],
                        [0.5, 0.25, 0.2, 0.1],
                        [0.5, 0.5, 0.2, 0.2],
                        [0.1, 0.8, 0.1, 0.1],
                    ]
                ]
            )
            # 4 boxes x 2 queries
            logits = torch.tensor([[[2.0, -9.0], [1.0, -9.0], [0.0, 3.0], [5.0, 5.0]]])
            return types.SimpleNamespace(logits=logits, pred_boxes=boxes)

    def processor(text, images, return_tensors, **kwargs):
        assert text == [["a photo of a cat", "a photo of a dog"]]
        # queries of different lengths pad to OWLv2's 16 positions and never exceed them
        assert kwargs == {"padding": "max_length", "truncation": True}
        z = torch.zeros((2, 4), dtype=torch.long)  # what the stub ignores
        return {
            "input_ids": z,
            "attention_mask": z,
            "pixel_values": torch.zeros((1, 3, 4, 4)),
        }

    from PIL import Image

    det = OWLv2Detector(Stub(), processor, nms_iou=0.5, score_floor=0.1)
    out = det.detect(Image.new("RGB", (200, 100)), ["cat", "dog"])
    # 200 x 100 is padded to 200 x 200: (cx .5, cy .25, w .2, h .1) -> (80, 40, 120, 60)
    sig = lambda x: 1 / (1 + math.exp(-x))
    # box 1 duplicates box 0 with a lower cat score: suppressed (IoU 1); box 2 (cat 0.5) kept.
    # box 2 spans y 80..120 and is clipped to the picture's bottom, y = 100; box 3 (y 150..170)
    # lies wholly in the padding and is dropped despite its high scores.
    box0 = pytest.approx((80.0, 40.0, 120.0, 60.0), abs=1e-4)
    box2 = pytest.approx((80.0, 80.0, 120.0, 100.0), abs=1e-4)
    assert [d.box for d in out["cat"]] == [box0, box2]
    assert [d.score for d in out["cat"]] == pytest.approx([sig(2.0), 0.5])
    assert [d.box for d in out["dog"]] == [box2]
    assert out["dog"][0].score == pytest.approx(sig(3.0))
    with pytest.raises(ValueError, match="classes must be a non-empty list"):
        det.detect(Image.new("RGB", (8, 8)), [])


def test_tiny_clip_color_classifier(tiny_colors, image):
    import torch

    from lmms_genbench.smoke.vision import tiny_clip

    assert isinstance(tiny_colors, CLIPColorClassifier)
    boxes = [(0, 0, 30, 20), (10, 10, 64, 48), (5, 5, 5, 5)]
    colors = tiny_colors.classify(image, boxes, "cat")
    assert len(colors) == 3 and all(c in COLORS for c in colors)
    assert tiny_colors.classify(image, [], "cat") == []
    # the same zero-shot rule computed by hand from the encoders
    txt = tiny_colors.text_encoder.encode(
        [
            t.format_map({"color": c, "class": "cat"})
            for c in COLORS
            for t in tiny_colors.templates
        ]
    ).reshape(10, 3, -1)
    txt = torch.nn.functional.normalize(
        torch.nn.functional.normalize(txt, dim=-1).mean(1), dim=-1
    )
    crop = tiny_colors.image_encoder.encode([image.crop((10, 10, 64, 48))])
    assert (
        COLORS[int((torch.nn.functional.normalize(crop, dim=-1) @ txt.T).argmax())]
        == colors[1]
    )
    # a loaded CLIPModel with its processor and tokenizer: same seed, same answers
    tiny = tiny_clip(seed=0)
    loaded = build_color_classifier(
        tiny.model, image_processor=tiny.image_processor, tokenizer=tiny.tokenizer
    )
    assert loaded.classify(image, boxes, "cat") == colors


def test_evaluate_image_end_to_end(tiny_detector, tiny_colors, image):
    calls = []

    class Spy:
        def classify(self, img, boxes, classname):
            calls.append((classname, len(boxes)))
            return tiny_colors.classify(img, boxes, classname)

    meta = {
        "tag": "color_attr",
        "include": [
            {"class": "car", "count": 1, "color": "red"},
            {"class": "bench", "count": 1, "color": "blue"},
        ],
    }
    rules = GenEvalRules(
        threshold=0.0
    )  # random weights: keep every box so the colour path runs
    res = evaluate_image(
        image, meta, detector=tiny_detector, color_classifier=Spy(), rules=rules
    )
    assert isinstance(res, GenEvalResult) and res.tag == "color_attr"
    assert isinstance(res.correct, bool) and (res.reason == "") == res.correct
    assert set(res.kept) == {"car", "bench"}
    assert calls and all(n == 1 for _, n in calls)
    with pytest.raises(ValueError, match="color_classifier must have classify"):
        evaluate_image(image, meta, detector=tiny_detector)


def test_evaluate_image_with_injected_detector(tmp_path, image):
    class Fixed:
        def __init__(self):
            self.seen = None

        def detect(self, img, classes):
            self.seen = (img.size, list(classes))
            return {
                "cat": [
                    Detection((0, 0, 10, 10), 0.95),
                    Detection((20, 0, 30, 10), 0.95),
                ]
            }

    path = tmp_path / "img.png"
    image.save(path)
    det = Fixed()
    assert evaluate_image(path, counting("cat", 2), detector=det).correct
    assert det.seen == ((64, 48), ["cat"])
    # build_detector passes objects through and calls loaders
    assert build_detector(det) is det
    assert build_detector(lambda: det) is det
    with pytest.raises(TypeError, match="has no detect"):
        build_detector(lambda: object())
    with pytest.raises(TypeError, match="spec must be"):
        build_detector(3)
    with pytest.raises(TypeError, match="detector must have detect"):
        evaluate_image(path, single(), detector=object())


def test_loaded_detector_needs_its_processor():
    from lmms_genbench.smoke.vision import tiny_owlv2

    model, processor = tiny_owlv2(seed=0)
    with pytest.raises(ValueError, match="processor is required"):
        build_detector(model)
    assert isinstance(build_detector(model, processor=processor), OWLv2Detector)
    with pytest.raises(ValueError, match="query_template must be"):
        OWLv2Detector(model, processor, query_template="a photo of a {cls}")
