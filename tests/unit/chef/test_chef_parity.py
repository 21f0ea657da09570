"""ChEF scored as its authors score it: our answer matching, the task's results pipeline
(``process_results``/``aggregate``) and the functional maths against the outputs of the authors'
own metric code (OpenGVLab/LAMM ea571363) recorded on synthetic predictions
(tests/support/data/parity/chef/README.md): every desideratum, ScienceQA- and MMBench-format."""

import json
from pathlib import Path

import pytest
import yaml

from lmms_genbench.chef import recipe as R
from lmms_genbench.chef.readers import lenient
from lmms_genbench.tasks.chef import utils

DATA = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "chef"
TASKS = Path(__file__).resolve().parents[3] / "lmms_genbench" / "tasks" / "chef"
INPUTS = json.loads((DATA / "inputs.json").read_text())
AUTHORS = json.loads((DATA / "authors_outputs.json").read_text())
LETTERS = "ABCDEFG"
DATASETS = ("scienceqa", "mmbench")
#: our verbalizer names for the authors' OPTION_MAP settings
VERBALIZERS = {"natural_0": "natural_numbers", "natural_1": "natural_roman", "natural_2": "natural_ordinals",
               "neutral_0": "neutral_surnames", "neutral_1": "neutral_words", "unnatural_0": "unnatural_rotated"}
EXACT = {"abs": 1e-12}


def _chance(ds):
    preset = {"scienceqa": "scienceqa", "mmbench": "mmbench"}[ds]
    return R.scoring({"scenario": {"preset": preset}})["chance"]


def _pred(text, n, variant):
    """Our model's reading of an answer: letters, or the verbalizer's labels."""
    if variant in VERBALIZERS:
        labels = R._verbalizer(VERBALIZERS[variant], n)
        return lenient(text, labels, labels)[0]
    return lenient(text, list(LETTERS[:n]), [])[0]


def _response(row, ds, desideratum, variants, conf=False):
    n = len(row["choices"])
    out = {"key": row["id"], "group": str(int(row["id"]) % 1_000_000) if ds == "mmbench" else None,
           "inferencer": "ppl", "desideratum": desideratum,
           "scoring": {"copies": "original", "chance": _chance(ds), "original": int(row["id"]) < 1_000_000},
           "variants": []}
    for i, v in enumerate(variants):
        out["variants"].append({"name": v, "pred": _pred(row["answers"][v], n, v), "gold": row["gt_choice"],
                                "n_options": n, "confidence": row["prob"] if conf and i == 0 else None})
    return json.dumps(out)


def _run(ds, desideratum, variants, conf=False):
    """Every metric our task pipeline reports for these rows: {name: value}."""
    items = {}
    for row in INPUTS[ds]:
        for name, value in utils.process_results({}, [_response(row, ds, desideratum, variants, conf)]).items():
            items.setdefault(name, []).append(value)
    return {name: utils.aggregate(v) for name, v in items.items()}


def test_chance_constants_are_the_authors():
    assert _chance("mmbench") == pytest.approx(AUTHORS["rand_acc"]["MMBench"]["vanilla"] / 100, **EXACT)
    assert _chance("scienceqa") == pytest.approx(AUTHORS["rand_acc"]["ScienceQA"]["vanilla"] / 100, **EXACT)
    # a user's own scenario has no constant: the mean of 1/#options, as documented
    assert R.scoring({"scenario": {"question": "q", "answer": "a", "options": "o"}})["chance"] is None


@pytest.mark.parametrize("ds", DATASETS)
def test_calibration(ds):
    ours, theirs = _run(ds, "calibration", ["ref"], conf=True), AUTHORS["calibration"][ds]
    assert ours["ece"] == pytest.approx(theirs["ECE"], **EXACT)
    acc = theirs["ACC"] if ds == "scienceqa" else theirs["vanilla_acc"]
    assert ours["acc"] == pytest.approx(acc / 100, **EXACT)
    for b, (a, p) in enumerate(zip(theirs["Acc_bins"], theirs["Prob_bins"])):
        assert ours[f"bin{b}_acc"] == pytest.approx(a, **EXACT) and ours[f"bin{b}_conf"] == pytest.approx(p, **EXACT)
    if ds == "mmbench":
        assert ours["acc_circular"] == pytest.approx(theirs["circular_acc"] / 100, **EXACT)


@pytest.mark.parametrize("ds", DATASETS)
def test_robustness(ds):
    settings = INPUTS["robustness_settings"]
    ours, theirs = _run(ds, "robustness", ["ref", *settings]), AUTHORS["robustness"][ds]
    assert ours["acc"] == pytest.approx(theirs[0]["Acc"] / 100, **EXACT)
    for s, t in zip(settings, theirs[1:]):
        assert ours[f"acc_{s}"] == pytest.approx(t["Acc"] / 100, **EXACT)
        assert ours[f"rrm_{s}"] == pytest.approx(t["RRM"] / 100, **EXACT)
        assert ours[f"rr_{s}"] == pytest.approx(t["RR"] / 100, **EXACT)
    assert ours["rrm"] == pytest.approx(sum(t["RRM"] for t in theirs[1:]) / 300, **EXACT)
    assert ours["acc_rand"] == _chance(ds)


@pytest.mark.parametrize("ds", DATASETS)
def test_instruction_following(ds):
    settings = list(VERBALIZERS)
    ours, theirs = _run(ds, "instruction_following", ["ppl_ref", *settings]), AUTHORS["instruction_following"][ds]
    mrs = [m for kind in ("natural", "neutral", "unnatural") for m in theirs["MRs"][kind]]
    accs = [a for kind in ("natural", "neutral", "unnatural") for a in theirs["Accs"][kind]]
    for s, mr, acc in zip(settings, mrs, accs):
        assert ours[f"match_ratio_{s}"] == pytest.approx(mr / 100, **EXACT)
        assert ours[f"acc_{s}"] == pytest.approx(acc / 100, **EXACT)
    assert ours["match_ratio"] == pytest.approx(theirs["weighted_avg_MR"] / 100, **EXACT)


@pytest.mark.parametrize("ds", DATASETS)
def test_in_context_learning_runs_the_authors_12_settings(ds):
    theirs = AUTHORS["in_context_learning"][ds]
    settings = theirs["order"]
    assert settings == INPUTS["icl_settings"] and len(settings) == 12
    ours = _run(ds, "in_context_learning", ["zero_shot", *settings])
    zero = (theirs["zero_shot"].get("ACC") or theirs["zero_shot"]["vanilla_acc"]) / 100
    assert ours["acc"] == pytest.approx(zero, **EXACT)
    accs = [r["metric_result"] / 100 for r in theirs["results"]]
    for s, a in zip(settings, accs):
        assert ours[f"acc_{s}"] == pytest.approx(a, **EXACT)
    # RIAM, Eq. (1), against the 0-shot reference (the authors' own formula is commented out)
    riam = (sum(accs) / 12 - zero) / (zero - _chance(ds))
    assert ours["riam"] == pytest.approx(riam, **EXACT)
    # the shipped ICL tasks run exactly these settings after a 0-shot reference
    for task in (f"chef_icl_{ds}", "chef_icl_smoke"):
        text = (TASKS / f"{task}.yaml").read_text().split("metric_list:")[0]
        rec = yaml.safe_load(text.replace("!function", ""))["lmms_eval_specific_kwargs"]["default"]
        names = [f"{v['ice']['retriever']}_{v['ice']['shots']}".replace("topk_image", "topk_img")
                 for v in rec["variants"][1:]]
        assert rec["variants"][0] == {"name": "zero_shot"} and names == settings


def test_hallucination_where_answers_name_an_option_and_free_text_is_never_a_no():
    recs, clean = [], []
    for row in INPUTS["pope"]:
        pred = lenient(row["answer"], ["A", "B"], ["Yes", "No"])[0]
        assert (pred >= 0) == row["names_option"], row["answer"]
        resp = json.dumps({"key": row["id"], "group": None, "inferencer": "direct", "desideratum": "hallucination",
                           "variants": [{"name": "base", "pred": pred, "gold": 0 if row["gt"] == "yes" else 1,
                                         "n_options": 2}]})
        recs.append(utils.process_results({}, [resp]))
        if row["names_option"]:
            clean.append(recs[-1])
    theirs = AUTHORS["hallucination"]["names_option"]
    for ours_name, their_name in (("pope_accuracy", "Accuracy"), ("pope_precision", "Precision"),
                                  ("pope_recall", "Recall"), ("pope_f1_score", "F1 score"), ("pope_yes_ratio", "Yes ratio")):
        assert utils.aggregate([r[ours_name] for r in clean]) == pytest.approx(theirs[their_name], **EXACT)
    # on every answer: the free-text ones ("I don't know", "Not sure", ...) are all wrong
    n_clean_right = sum(utils.aggregate([r["pope_accuracy"]]) for r in clean)
    assert utils.aggregate([r["pope_accuracy"] for r in recs]) == pytest.approx(n_clean_right / len(recs), **EXACT)
    assert utils.aggregate([r["n_unmatched"] for r in recs]) == len(recs) - len(clean)


def test_language_performance_mean_of_per_doc_means():
    theirs = AUTHORS["language_performance"]
    items = []
    for i, scores in enumerate(theirs["scores"]):
        resp = json.dumps({"key": str(i), "group": None, "inferencer": "multiturn", "desideratum": "language_performance",
                           "variants": [{"name": "base", "pred": 0, "gold": 0, "n_options": 2}],
                           "judge": {"scores": scores, "failed": 6 - len(scores)}})
        items.append(utils.process_results({}, [resp])["judge_score"])
    assert utils.aggregate(items) == pytest.approx(theirs["avg_score"], **EXACT)


@pytest.mark.parametrize("ds", ["mmbench"])
def test_pooled_copies_is_an_explicit_option_and_differs(ds):
    def run(copies):
        items = {}
        for row in INPUTS[ds]:
            resp = json.loads(_response(row, ds, "calibration", ["ref"], conf=True))
            resp["scoring"]["copies"] = copies
            for name, value in utils.process_results({}, [json.dumps(resp)]).items():
                items.setdefault(name, []).append(value)
        return {k: utils.aggregate(v) for k, v in items.items()}
    original, pooled = run("original"), run("pooled")
    assert original["ece"] == pytest.approx(AUTHORS["calibration"][ds]["ECE"], **EXACT)
    assert pooled["ece"] != original["ece"] and pooled["acc"] == pytest.approx(original["acc_per_copy"], **EXACT)


# What ChEF's desiderata recipes score (src/config/ChEF/desiderata_recipes at ea571363): the PPL
# option "(A" inside VQA answer template 1 where the recipe sets template_assigned_ids: 1
# (calibration, MMBench ICL/Insfollow/Robust), else template 0 (instruction/template.py)
TEMPLATE_0, TEMPLATE_1 = "The answer is {option}", "The correct option for the question is {option}"
SHIPPED = {"chef_calibration_mmbench": TEMPLATE_1, "chef_calibration_scienceqa": TEMPLATE_1,
           "chef_icl_mmbench": TEMPLATE_1, "chef_insfollow_mmbench": TEMPLATE_1, "chef_robustness_mmbench": TEMPLATE_1,
           "chef_icl_scienceqa": TEMPLATE_0, "chef_insfollow_scienceqa": TEMPLATE_0,
           "chef_robustness_scienceqa": TEMPLATE_0}


def _shipped(task):
    text = (TASKS / f"{task}.yaml").read_text().split("metric_list:")[0]
    return yaml.safe_load(text.replace("!function", ""))["lmms_eval_specific_kwargs"]["default"]


@pytest.mark.parametrize("task", sorted(SHIPPED))
def test_shipped_recipes_score_chef_s_continuations_and_verbalizers(task):
    rec = _shipped(task)
    if "mmbench" in task:
        doc = {"index": 1_000_007, "question": "Q?", "hint": None, "A": "red", "B": "blue", "C": "green", "D": None,
               "E": None, "answer": "B", "image": None}
    else:
        doc = {"question": "Q?", "hint": "", "choices": ["red", "blue", "green"], "answer": 1, "image": None}
    rec = {**rec, "variants": [v for v in rec["variants"] if not v.get("ice")]}  # examples need a pool
    payload = R.render(doc, rec)
    ref = payload["variants"][0]
    assert ref["options"] == [SHIPPED[task].format(option=f"({x}") for x in "ABC"]
    assert payload["scoring"]["chance"] == _chance("mmbench" if "mmbench" in task else "scienceqa")
    assert payload["scoring"]["copies"] == "original"
    assert payload["scoring"]["original"] is ("mmbench" not in task)  # index 1,000,007 is a copy of 7
    by_name = {v["name"]: v for v in payload["variants"]}
    for ours, theirs in ((n, s) for s, n in VERBALIZERS.items() if n in by_name):
        labels = INPUTS["verbalizers"][theirs] or ["(B", "(C", "(A"]
        v = by_name[ours]
        assert v["labels"] == labels[:3]
        assert v["options"] == [SHIPPED[task].format(option=lab) for lab in labels[:3]]
        assert v["prompt"].endswith("".join(f'If the answer is "({x})", you need to output "{lab}". '
                                            for x, lab in zip("ABC", labels)))
