"""MMECeption task functions and the GenCeption scorer on hand-made chains."""

import math

import datasets
import numpy as np
import pytest

from lmms_genbench.core.errors import WrongModelError
from lmms_genbench.metrics.functional.intervals import estimate
from lmms_genbench.metrics.scorers.settings import BOOTSTRAP_DEFAULTS
from lmms_genbench.metrics.scorers.genception import GENCEPTION, GenCeptionSettings, _groups
from lmms_genbench.tasks.mmeception import utils

from tests.support.chains import MeanColourEncoder
from tests.support.chains import genception_chain as _chain


def test_each_mme_image_is_used_once():
    ds = datasets.Dataset.from_dict({
        "question_id": ["code/1.png", "code/1.png", "ocr/2.png", "ocr/2.png", "ocr/3.png"],
        "question": ["a", "b", "c", "d", "e"],
        "category": ["code_reasoning", "code_reasoning", "OCR", "OCR", "OCR"],
    })
    unique = utils.mme_unique_images(ds)
    assert unique["chain_id"] == ["code/1.png", "ocr/2.png", "ocr/3.png"]
    assert unique["question"] == ["a", "c", "e"]


def test_prompt_is_the_papers_p_desc_verbatim():
    assert utils.doc_to_text({}).startswith("Please write a clear, precise, detailed, and concise description")
    assert utils.doc_to_text({}).endswith("You must complete the description using less than 500 words.")
    assert len(utils.MME_GROUPS["visual"]) == 10 and len(utils.MME_GROUPS["textual"]) == 4


def test_scores_on_hand_worked_chains(tmp_path, monkeypatch):
    import lmms_genbench.metrics.networks.encoders as encoders

    monkeypatch.setattr(encoders, "get_image_encoder", lambda *a, **k: MeanColourEncoder())
    red, grey = (255, 0, 0), (128, 128, 128)
    records = [
        # identical redraws: s(t) = 1, GC@3 = 1
        _chain(tmp_path, "existence", "a", [red, red, red, red]),
        # unit vectors (256,1,1) and (129,129,129): cosine known in closed form
        _chain(tmp_path, "existence", "b", [red, grey, grey, grey]),
        _chain(tmp_path, "OCR", "c", [red, red, red, red]),
        _chain(tmp_path, "OCR", "d", [red, red], status="failed"),
        # claims success but has only 2 of 3 iterations: must fail, not score GC@2
        _chain(tmp_path, "OCR", "e", [red, red, red]),
    ]
    config = GenCeptionSettings("mean-colour", None, "cpu", 4, groups=_groups(utils.MME_GROUPS))
    report = GENCEPTION.score(records, config, length=6)
    cos = (256 * 129 + 129 + 129) / (math.sqrt(256**2 + 2) * math.sqrt(3 * 129**2))
    assert report["gc@3_existence"] == pytest.approx((1.0 + cos) / 2)  # mean of GC@3 over a and b
    assert report["gc@3_OCR"] == pytest.approx(1.0)
    assert report["gc@3"] == pytest.approx(((1.0 + cos) / 2 + 1.0) / 2)  # mean over categories
    assert report["gc@3_visual"] == pytest.approx((1.0 + cos) / 2)
    assert report["gc@3_textual"] == pytest.approx(1.0)
    assert report["s@1"] == pytest.approx(((1 + cos) / 2 + 1) / 2)
    assert report["n_scored"] == 3 and report["n_failed"] == 2
    assert report["n_failed_OCR"] == 2
    assert report["failure_reasons"] == {"describe failed at hop 1": 1, "chain has 2 of 3 iterations": 1}
    assert "gc_fid@3" not in report  # FID off
    # the doc table (scored chains, by chain id) and the estimators give back every score
    table = report["doc_scores"]
    assert table["chain_ids"] == ["a", "b", "c"] and table["columns"]["category"] == ["existence", "existence", "OCR"]
    assert table["columns"]["gc"] == pytest.approx([1.0, cos, 1.0])
    specs = GENCEPTION.estimators(report, config)
    assert set(specs) == {"gc@3", "s@1", "s@2", "s@3", "gc@3_visual", "gc@3_textual", "gc@3_existence", "gc@3_OCR"}
    for metric, spec in specs.items():
        assert estimate(table["columns"], spec) == pytest.approx(report[metric], rel=1e-12), metric
    # resampled within categories: OCR's one chain always scores 1; existence draws a and b
    GENCEPTION.add_intervals(report, config, BOOTSTRAP_DEFAULTS)
    ocr, existence = report["intervals"]["gc@3_OCR"], report["intervals"]["gc@3_existence"]
    assert ocr["low"] == ocr["high"] == pytest.approx(1.0) and ocr["stderr"] == pytest.approx(0.0, abs=1e-12)
    assert existence["low"] == pytest.approx(cos) and existence["high"] == pytest.approx(1.0)
    assert existence["method"] == "percentile bootstrap, over docs, stratified by category"
    # the mean of two equally likely draws of a and b: stderr of (1 + cos)/2 +- (1 - cos)/2 per half
    assert existence["stderr"] == pytest.approx((1 - cos) / 2 / math.sqrt(2), rel=0.1)


def test_gc_fid_one_rule_for_small_samples_in_the_mean_and_n_min(tmp_path, monkeypatch):
    """A category with fewer than 2 scored images (one photo; one whose only chain failed) is
    left out of gc_fid@3, of its group mean and of gc_fid@3_n_min alike, and named."""
    import lmms_genbench.metrics.networks.encoders as encoders

    monkeypatch.setattr(encoders, "get_image_encoder", lambda *a, **k: MeanColourEncoder())
    rng = np.random.default_rng(0)
    records = []
    for category, n in (("many", 3), ("few", 2)):
        for k in range(n):
            colours = [tuple(int(c) for c in rng.integers(0, 255, 3)) for _ in range(4)]
            records.append(_chain(tmp_path, category, f"{category}{k}", colours))
    records.append(_chain(tmp_path, "one", "solo", [(1, 2, 3)] * 4))
    records.append(_chain(tmp_path, "none", "broken", [(1, 2, 3)] * 2, status="failed"))
    groups = _groups({"all": ["many", "few", "one", "none"]})
    report = GENCEPTION.score(records, GenCeptionSettings("mean-colour", "fid-helper", "cpu", 8, groups), length=6)
    assert report["gc_fid@3_many_n"] == 3 and report["gc_fid@3_few_n"] == 2 and report["gc_fid@3_one_n"] == 1
    assert math.isfinite(report["gc_fid@3_many"]) and math.isnan(report["gc_fid@3_one"])
    fids = [report[f"fid@{t}_many"] for t in (1, 2, 3)]
    assert report["gc_fid@3_many"] == pytest.approx((fids[0] + 2 * fids[1] + 3 * fids[2]) / 6)
    mean = (report["gc_fid@3_many"] + report["gc_fid@3_few"]) / 2
    assert report["gc_fid@3"] == pytest.approx(mean) and report["gc_fid@3_all"] == pytest.approx(mean)
    assert report["gc_fid@3_n_min"] == 2  # of the categories in the mean: "one" (1 image) is not
    assert report["gc_fid@3_excluded"] == ["none", "one"] and report["gc_fid@3_n_excluded"] == 2
    summary = GENCEPTION.payload(report)["summary"]
    assert summary["gc_fid@3_excluded"] == ["none", "one"] and summary["gc_fid@3_n_excluded"] == 2
    # FID scores get no bootstrap interval, and say why; their sample sizes are no score
    exempt = GENCEPTION.no_intervals(report, None)
    assert {"gc_fid@3", "gc_fid@3_all", "gc_fid@3_many", "gc_fid@3_one", "fid@1_many"} <= set(exempt)
    assert not {"gc_fid@3_n_min", "gc_fid@3_many_n", "gc_fid@3_excluded"} & set(exempt)
    assert "set-level statistic" in exempt["gc_fid@3"]
    # with no category large enough there is no mean, and no sample behind it
    alone = GENCEPTION.score(records[-2:], GenCeptionSettings("mean-colour", "fid-helper", "cpu", 8), length=6)
    assert math.isnan(alone["gc_fid@3"]) and alone["gc_fid@3_n_min"] == 0 and alone["gc_fid@3_n_excluded"] == 2


def test_a_response_that_is_not_a_chain_stops_with_the_model_to_use():
    with pytest.raises(WrongModelError, match=r"not a chain.*must run with --model cycle"):
        utils.process_results({"chain_id": "q1", "category": "scene"}, ["I am a plain text answer"])


def test_scorer_settings_come_from_the_task_and_the_environment(monkeypatch):
    monkeypatch.setenv("LMMS_GENBENCH_IMAGE_ENCODER", "clip:openai/clip-vit-base-patch32")
    monkeypatch.setenv("LMMS_GENBENCH_FID_FEATURES", "none")
    monkeypatch.setenv("LMMS_GENBENCH_SCORER_BATCH", "7")
    config = GENCEPTION.resolve({"preset": "smoke"})
    assert config == GenCeptionSettings("clip:openai/clip-vit-base-patch32", None, "cpu", 7)
    monkeypatch.setenv("LMMS_GENBENCH_SCORER_BATCH", "many")
    with pytest.raises(ValueError, match="LMMS_GENBENCH_SCORER_BATCH must be an integer"):
        GENCEPTION.resolve({"preset": "smoke"})
