"""The chef_* smoke tasks end to end through the real ``lmms-eval`` command, with
the ``chef`` model type around lmms-eval's own ``llava_hf`` class on a tiny
random-weight checkpoint. The model's answers are noise: these tests check the
plumbing and the bookkeeping, not scores. lmms-eval exits 0 even when a task
crashed, so every test reads the results files."""

import glob
import json

import pytest

from lmms_genbench.chef.readers import REASONS
from tests.support.lmms_eval_runs import BIN, response, results_file, samples
from tests.support.lmms_eval_runs import run as run_offline

SMOKE_TASKS = ["chef_calibration_smoke", "chef_icl_smoke", "chef_insfollow_smoke", "chef_robustness_smoke",
               "chef_hallucination_smoke", "chef_language_smoke", "chef_scenario_smoke_direct",
               "chef_scenario_smoke_cot"]


def _run(tmp, tasks, model_args="preset=smoke,judge=inner"):
    out = tmp / "out"
    proc = run_offline(
        [str(BIN / "lmms-eval"), "--model", "chef", "--model_args", model_args, "--tasks", ",".join(tasks),
         "--output_path", str(out), "--log_samples"],
        tmp,
    )
    files = glob.glob(str(out / "**" / "*_results.json"), recursive=True)
    assert len(files) == 1, proc.stderr[-4000:]
    return results_file(out)[1], {task: samples(out, task) for task in tasks}


def _metrics(results, task):
    # only numbers: lmms-eval would write a raw per-doc list for a metric it cannot aggregate
    raw = {k.split(",")[0]: v for k, v in results["results"][task].items() if "," in k and "stderr" not in k}
    # the one mapping: unreadable answers per reason, which add up to n_unmatched
    unreadable = raw.pop("unreadable")
    assert isinstance(unreadable, dict) and set(unreadable) <= set(REASONS), unreadable
    assert sum(unreadable.values()) == raw["n_unmatched"], (unreadable, raw["n_unmatched"])
    # None: not a number (lmms-eval prints N/A; a bare NaN would make the file invalid JSON)
    assert all(v is None or isinstance(v, (int, float)) for v in raw.values()), {k: type(v) for k, v in raw.items()}
    return raw


def _response(sample):
    return json.loads(response(sample))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("chef"), SMOKE_TASKS)


def test_every_smoke_task_scores_every_doc(run):
    results, samples = run
    for task in SMOKE_TASKS:
        m = _metrics(results, task)
        assert m["n_docs"] == 6 and m["n_failed"] == 0, (task, m)
        assert len(samples[task]) == 6
        # every smoke question has a photo: each variant showed the inner model its image(s)
        shown = [v["n_images"] for s in samples[task] for v in _response(s)["variants"]]
        assert min(shown) >= 1, (task, shown)
    # headline metrics carry the bootstrap's standard error where lmms-eval keeps its own
    r = results["results"]
    for task, metric in (("chef_hallucination_smoke", "pope_accuracy"), ("chef_calibration_smoke", "ece"),
                         ("chef_scenario_smoke_direct", "acc")):
        assert isinstance(r[task][f"{metric}_stderr,none"], float), (task, r[task][f"{metric}_stderr,none"])


def test_each_sample_carries_its_score_for_lmms_evals_baseline(run):
    """lmms-eval's --baseline pairs the logged samples' `score`: variant 0 right or not, whose
    mean is the task's acc (POPE accuracy for hallucination)."""
    results, samples = run
    for task in SMOKE_TASKS:
        m = _metrics(results, task)
        scores = [s["score"] for s in samples[task]]
        assert set(scores) <= {0.0, 1.0}, task
        assert sum(scores) / len(scores) == pytest.approx(m["acc"] if "acc" in m else m["pope_accuracy"]), task


def test_calibration_reports_both_eces_and_reliability_bins(run):
    results, samples = run
    m = _metrics(results, "chef_calibration_smoke")
    assert 0 <= m["ece"] <= 1 and 0 <= m["ece_equal_width"] <= 1
    assert sum(m[f"bin{b}_n"] for b in range(10)) == 6
    resp = _response(samples["chef_calibration_smoke"][0])
    v = resp["variants"][0]
    # Multi-Turn: a chain of thought, then one mean log-prob per option
    assert resp["inferencer"] == "multiturn" and isinstance(v["cot"], str)
    assert len(v["scores"]) == v["n_options"] and v["ppl_score"] == "mean"
    assert v["confidence"] == pytest.approx(max(_softmax(v["scores"])))


def _softmax(xs):
    import math

    e = [math.exp(x - max(xs)) for x in xs]
    return [x / sum(e) for x in e]


def test_icl_riam_matches_its_accuracies(run):
    results, _ = run
    m = _metrics(results, "chef_icl_smoke")
    others = [m[k] for k in m if k.startswith("acc_") and k != "acc_rand"]
    assert len(others) == 12  # ChEF's 12 settings: random, top-k text, fixed, top-k image x 1-3 shots
    acc_icl = sum(others) / len(others)
    if m["acc"] != m["acc_rand"]:
        assert m["riam"] == pytest.approx((acc_icl - m["acc"]) / (m["acc"] - m["acc_rand"]))


def test_instruction_following_six_verbalizers(run):
    results, samples = run
    m = _metrics(results, "chef_insfollow_smoke")
    settings = [k[len("match_ratio_"):] for k in m if k.startswith("match_ratio_")]
    assert len(settings) == 6
    assert m["match_ratio"] == pytest.approx(sum(m[f"match_ratio_{s}"] for s in settings) / 6)
    # the unnatural setting asks for the next letter; its options are those labels
    resp = _response(samples["chef_insfollow_smoke"][0])
    rotated = next(v for v in resp["variants"] if v["name"] == "unnatural_rotated")
    assert rotated["n_options"] == 4


def test_robustness_rrm_and_rr(run):
    results, _ = run
    m = _metrics(results, "chef_robustness_smoke")
    for name in ("gaussian_noise", "gaussian_blur", "fog", "jpeg", "pixelate", "text_char", "text_word",
                 "text_sentence", "shuffle"):
        assert f"rrm_{name}" in m and f"rr_{name}" in m
    if m["acc"] > 0:
        assert m["rr_fog"] == pytest.approx(m["acc_fog"] / m["acc"])


def test_hallucination_pope_counts(run):
    results, samples = run
    m = _metrics(results, "chef_hallucination_smoke")
    preds = [_response(s)["variants"][0]["pred"] for s in samples["chef_hallucination_smoke"]]
    golds = [_response(s)["variants"][0]["gold"] for s in samples["chef_hallucination_smoke"]]
    assert golds.count(0) == 3  # three "yes" questions
    assert m["pope_yes_ratio"] == pytest.approx(preds.count(0) / 6)
    assert m["pope_accuracy"] == pytest.approx(sum(p == g for p, g in zip(preds, golds)) / 6)


def test_language_judge_samples_are_scored_or_counted(run):
    results, samples = run
    m = _metrics(results, "chef_language_smoke")
    judged = [_response(s)["judge"] for s in samples["chef_language_smoke"]]
    assert all(len(j["raw"]) == 2 for j in judged)  # judge_samples: 2
    n_scored = sum(len(j["scores"]) for j in judged)
    assert n_scored + m["n_judge_failed"] == 12  # an unparsable verdict is never a score


def test_direct_and_cot_inferencers_generate_then_match(run):
    _, samples = run
    for task, inferencer in (("chef_scenario_smoke_direct", "direct"), ("chef_scenario_smoke_cot", "cot")):
        resp = _response(samples[task][0])
        v = resp["variants"][0]
        assert resp["inferencer"] == inferencer and isinstance(v["answer"], str)
        assert ("cot" in v) == (inferencer == "cot") and "scores" not in v
        assert -1 <= v["pred"] < v["n_options"]


def test_bad_model_args_fail_with_a_message(tmp_path):
    from lmms_genbench.models.chef import ChefModel

    with pytest.raises(ValueError, match="inner is required"):
        ChefModel()
    with pytest.raises(ValueError, match="unknown model_args"):
        ChefModel(inner="llava_hf", pretrained="x")
    with pytest.raises(ValueError, match="ll_returns"):
        ChefModel(inner="llava_hf", ll_returns="prob")
