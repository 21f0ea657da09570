"""ChEF recipes: rendering, in-context retrieval, option matching, scoring records,
and the task YAMLs' metric lists agreeing with what the scorer emits."""

import json
import math
from pathlib import Path

import datasets
import pytest
import yaml

from lmms_genbench.chef import recipe as R
from lmms_genbench.chef import results as scoring
from lmms_genbench.chef.readers import lenient
from lmms_genbench.models.chef import parse_judge_score

TASKS = Path(R.__file__).resolve().parents[1] / "tasks" / "chef"


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def _task(name):
    cfg = yaml.load((TASKS / f"{name}.yaml").read_text(), Loader=_Loader)
    return cfg, cfg["lmms_eval_specific_kwargs"]["default"]


@pytest.fixture(scope="module")
def docs():
    ds = datasets.Dataset.from_json(str(TASKS / "smoke_mc.jsonl"))
    pool = R.register_pool(ds)
    return ds.add_column("chef_row", list(range(len(ds)))).add_column("chef_pool", [pool] * len(ds))


def test_every_task_lists_exactly_the_metrics_its_recipe_emits():
    for path in sorted(TASKS.glob("chef_*.yaml")):
        if "group" in yaml.load(path.read_text(), Loader=_Loader):
            continue
        cfg, rec = _task(path.stem)
        listed = [m["metric"] for m in cfg["metric_list"]]
        names = [v["name"] for v in rec.get("variants") or [{"name": "base"}]]
        scenario = {**R.PRESETS.get(rec["scenario"].get("preset"), {}), **rec["scenario"]}
        group = "0" if scenario.get("group") else None  # circular scenarios add acc_circular, n_groups
        emitted = scoring.metric_names({"desideratum": rec.get("desideratum", "accuracy"), "group": group}, names)
        assert sorted(listed) == sorted(emitted), path.name
        assert all(m["aggregation"] == "utils.aggregate" for m in cfg["metric_list"])


def test_render_is_deterministic_and_shuffle_keeps_the_gold_text(docs):
    _, rec = _task("chef_robustness_smoke")
    a, b = R.render(docs[3], rec), R.render(docs[3], rec)
    assert a == b
    variants = {v["name"]: v for v in a["variants"]}
    clean, shuffled = variants["clean"], variants["shuffle"]
    assert shuffled["option_texts"][shuffled["gold"]] == clean["option_texts"][clean["gold"]] == "a rocket"
    assert variants["text_word"]["prompt"] != clean["prompt"]
    # each image corruption has its own image; text corruptions reuse the clean one
    assert clean["visuals"] == [0] and variants["text_char"]["visuals"] == [0]
    assert len({tuple(variants[n]["visuals"]) for n in ("gaussian_noise", "fog", "jpeg")}) == 3
    images = R.visuals(docs[3], rec)
    assert len(images) == 6 and max(max(v["visuals"]) for v in a["variants"]) == 5


def test_verbalizer_prompt_and_labels(docs):
    _, rec = _task("chef_insfollow_smoke")
    variants = {v["name"]: v for v in R.render(docs[0], rec)["variants"]}
    v = variants["natural_numbers"]
    # ChEF's sentence and continuations ("The answer is {option}", its "(A"-style PPL options)
    assert 'If the answer is "(A)", you need to output "1". ' in v["prompt"]
    assert v["options"] == ["The answer is 1", "The answer is 2", "The answer is 3", "The answer is 4"]
    assert variants["unnatural_rotated"]["labels"] == ["(B", "(C", "(D", "(A"]
    assert variants["neutral_words"]["labels"] == ["foo", "dog", "hip", "oh"]
    assert variants["base"]["options"][0] == "The answer is (A"


def test_in_context_examples_never_include_the_query(docs):
    _, rec = _task("chef_icl_smoke")
    for retriever in R.RETRIEVERS:
        for i in range(len(docs)):
            rows = R.retrieve(docs[i], rec, retriever, 2, seed=0)
            assert len(rows) == 2 and i not in rows and len(set(rows)) == 2
            assert rows == R.retrieve(docs[i], rec, retriever, 2, seed=0)
    # fixed: the same examples for every query that is not one of them
    assert R.retrieve(docs[5], rec, "fixed", 2, 0) == R.retrieve(docs[4], rec, "fixed", 2, 0) == [0, 1]
    payload = R.render(docs[0], rec)
    one = next(v for v in payload["variants"] if v["name"] == "random_1")
    # the example's answer is ChEF's template with its "(A)"
    assert one["prompt"].count("\nThe answer is (") == 1 and one["visuals"][-1] == 0


def test_scenario_mapping_errors_name_the_problem():
    with pytest.raises(ValueError, match="preset"):
        R.normalize({}, {"scenario": {"preset": "cifar"}})
    with pytest.raises(ValueError, match="at least two options"):
        R.normalize({"q": "x", "o": ["a"], "a": 0}, {"scenario": {"question": "q", "options": "o", "answer": "a"}})
    with pytest.raises(ValueError, match="inferencer"):
        R.render({"q": "x", "o": ["a", "b"], "a": 0},
                 {"scenario": {"question": "q", "options": "o", "answer": "a", "image": "img"}, "inferencer": "beam"})


def test_mmbench_and_pope_presets():
    mm = {"question": "Q?", "hint": float("nan"), "A": "x", "B": "y", "C": "z", "D": float("nan"),
          "answer": "C", "index": 7, "image": None}
    item = R.normalize(mm, {"scenario": {"preset": "mmbench"}})
    assert item.options == ("x", "y", "z") and item.gold == 2 and item.hint == "" and item.key == "7"
    pope = R.normalize({"question": "Is there a cat?", "answer": "no", "question_id": "3"}, {"scenario": {"preset": "pope"}})
    assert pope.options == ("Yes", "No") and pope.gold == 1


@pytest.mark.parametrize(("text", "expected"), [
    ("(B) a swimsuit", 1), ("C. because", 2), ("The answer is D", 3), ("it is a swimsuit", 1), ("none", -1),
])
def test_lenient_reader(text, expected):
    assert lenient(text, ["A", "B", "C", "D"], ["a space suit", "a swimsuit", "an apron", "a kit"])[0] == expected


def test_lenient_reader_verbalized_labels():
    assert lenient("I think third.", ["first", "second", "third"], ["x", "y", "z"]) == (2, None)


def test_parse_judge_score():
    assert parse_judge_score(" 7") == 7.0
    assert parse_judge_score("Score: 8.5/10") == 8.5
    assert parse_judge_score("eleven") is None and parse_judge_score("42") is None


def _resp(desideratum, variants, judge=None):
    return json.dumps({"desideratum": desideratum, "variants": [
        {"name": n, "pred": p, "gold": g, "n_options": k, "confidence": c} for n, p, g, k, c in variants
    ], **({"judge": judge} if judge else {})})


def _aggregate(responses, name):
    items = []
    for r in responses:
        out = scoring.process_results({}, [r])
        items.append(out.get(name, (name, scoring.record(r))))
    return scoring.aggregate(items)


def test_aggregates_by_hand():
    # 4 docs, 4 options each (chance 0.25); base correct on 2, corrupted correct on 1
    rob = [_resp("robustness", [("clean", 0, 0, 4, None), ("noise", 0, 0, 4, None)]),
           _resp("robustness", [("clean", 1, 1, 4, None), ("noise", 0, 1, 4, None)]),
           _resp("robustness", [("clean", 0, 2, 4, None), ("noise", 0, 2, 4, None)]),
           _resp("robustness", [("clean", 0, 3, 4, None), ("noise", 1, 3, 4, None)])]
    assert _aggregate(rob, "acc") == 0.5 and _aggregate(rob, "acc_noise") == 0.25
    assert _aggregate(rob, "rrm") == pytest.approx(0.0) and _aggregate(rob, "rr") == pytest.approx(0.5)
    assert _aggregate(rob, "acc_rand") == 0.25
    ins = [r.replace("robustness", "instruction_following").replace('"noise"', '"numbers"') for r in rob]
    # base preds 0,1,0,0 vs verbalized 0,0,0,1: two of four match
    assert _aggregate(ins, "match_ratio") == 0.5 == _aggregate(ins, "match_ratio_numbers")
    pope = [_resp("hallucination", [("base", 0, 0, 2, 0.9)]), _resp("hallucination", [("base", 0, 1, 2, 0.6)]),
            _resp("hallucination", [("base", 1, 1, 2, 0.7)]), _resp("hallucination", [("base", 1, 0, 2, 0.8)])]
    assert _aggregate(pope, "pope_accuracy") == 0.5 and _aggregate(pope, "pope_precision") == 0.5
    assert _aggregate(pope, "pope_recall") == 0.5 and _aggregate(pope, "pope_yes_ratio") == 0.5
    assert _aggregate(pope, "pope_f1_score") == 0.5 and "pope_f1_score" in scoring.process_results({}, [pope[0]])
    cal = [r.replace("hallucination", "calibration") for r in pope]
    # equal-mass with 4 samples: one per bin; gaps 0.1 + 0.6 + 0.3 + 0.8 over 4
    assert _aggregate(cal, "ece") == pytest.approx((0.1 + 0.6 + 0.3 + 0.8) / 4)
    # the exported bins are the ECE's: 4 samples fill bins 0-3 in order of confidence (0.6 .. 0.9)
    assert _aggregate(cal, "bin0_n") == 1 and _aggregate(cal, "bin0_acc") == 0.0 and _aggregate(cal, "bin3_acc") == 1.0
    assert _aggregate(cal, "bin0_conf") == 0.6 and _aggregate(cal, "bin9_n") == 0 and _aggregate(cal, "bin9_acc") is None


def test_hallucination_metrics_carry_the_names_of_lmms_eval_s_pope_task():
    import lmms_eval.tasks

    upstream = Path(lmms_eval.tasks.__file__).parent / "pope" / "pope.yaml"
    names = [m["metric"] for m in yaml.load(upstream.read_text(), Loader=_Loader)["metric_list"]]
    ours = [n for n in scoring.FAMILIES["hallucination"][0] if not n.endswith("_stderr")]
    assert names == ours[: len(names)]


def test_failed_and_judge_records():
    bad = json.dumps({"error": "ValueError: context is not a chef payload"})  # the chef model's failed doc
    assert set(scoring.process_results({}, [bad])) == {"n_docs", "n_failed", "n_unmatched", "unreadable"}
    lang = [_resp("language_performance", [("base", 0, 0, 4, None)], {"scores": [6, 8], "failed": 0}),
            _resp("language_performance", [("base", 0, 0, 4, None)], {"scores": [], "failed": 2}), bad]
    assert _aggregate(lang, "judge_score") == 7.0 and _aggregate(lang, "n_judge_failed") == 2
    assert _aggregate(lang, "n_judged") == 1 and _aggregate(lang, "n_failed") == 1 and _aggregate(lang, "n_docs") == 3


def _shaped_docs():
    """Rows shaped like the hub datasets the real tasks load (no download here)."""
    from PIL import Image

    img = Image.new("RGB", (32, 24), (120, 30, 200))
    mmbench = [{"index": i, "question": f"Which colour is shown {i}?", "hint": "nan" if i % 2 else "A hint.",
                "A": "red", "B": "purple", "C": "green", "D": "blue" if i % 3 else None,
                "answer": "B", "category": "c", "image": img} for i in range(5)]
    sqa = [{"question": f"Which is a mammal {i}?", "hint": "", "choices": ["cat", "trout", "eagle"],
            "answer": 0, "image": img} for i in range(5)]
    pope = [{"question_id": str(i), "question": "Is there a cat in the image?", "answer": "yes" if i % 2 else "no",
             "image": img, "category": "random"} for i in range(5)]
    return {"mmbench": mmbench, "scienceqa": sqa, "hallucination": pope}


@pytest.mark.parametrize("name", sorted(p.stem for p in TASKS.glob("chef_*.yaml")
                                        if "smoke" not in p.stem and p.stem != "chef_hallucination"))
def test_real_scenario_recipes_render_hub_shaped_rows(name):
    cfg, rec = _task(name)
    shaped = _shaped_docs()
    rows = shaped["hallucination"] if "hallucination" in name else shaped[name.rsplit("_", 1)[-1]]
    ds = datasets.Dataset.from_list(rows)
    pool = R.register_pool(ds)
    ds = ds.add_column("chef_row", list(range(len(ds)))).add_column("chef_pool", [pool] * len(ds))
    # as lmms-eval 0.7.3 (api/task.py): doc_to_text sees the docs without their Image columns,
    # doc_to_visual (in the chef model) the full row
    assert isinstance(ds.features["image"], datasets.Image)
    no_media = ds.remove_columns("image")
    for doc, bare in zip(ds, no_media):
        payload = R.render(bare, rec)
        assert payload == R.render(doc, rec)
        images = R.visuals(doc, rec)
        assert len(images) == payload["n_visuals"]
        assert all(images[i] is not None for v in payload["variants"] for i in v["visuals"])
        assert all(0 <= v["gold"] < len(v["options"]) for v in payload["variants"])
        with pytest.raises(ValueError, match="no image column 'image'"):
            R.visuals(bare, rec)
    assert cfg["dataset_path"].startswith("lmms-lab-encoder/")


def test_an_empty_image_fails_where_the_scenario_needs_one():
    mm = {"index": 1, "question": "Q?", "A": "x", "B": "y", "answer": "A", "image": None}
    with pytest.raises(ValueError, match="image_required"):
        R.visuals(mm, {"scenario": {"preset": "mmbench"}})
    sqa = {"question": "Q?", "choices": ["x", "y"], "answer": 0, "image": None}  # ScienceQA-FULL: text-only rows
    assert R.visuals(sqa, {"scenario": {"preset": "scienceqa"}}) == [None]
    with pytest.raises(ValueError, match="image_required"):
        R.visuals(sqa, {"scenario": {"preset": "scienceqa", "image_required": True}})
    text_only = {"scenario": {"question": "question", "options": "choices", "answer": "answer", "image": None}}
    assert R.visuals({"question": "Q?", "choices": ["x", "y"], "answer": 0}, text_only) == [None]


def test_headline_metrics_get_a_bootstrap_stderr_and_nan_is_none():
    """Each headline's estimator over the doc table gives back its aggregate; its ``_stderr``
    is the bootstrap's; a metric that is not a number is None (plain JSON in results)."""
    from lmms_genbench.metrics.functional.intervals import estimate

    rob = [_resp("robustness", [("clean", int(i % 2 == 1), 0, 4, None), ("noise", 0, 0, 4, None)]) for i in range(40)]
    pope = [_resp("hallucination", [("base", p, g, 2, c)]) for p, g, c in
            [(0, 0, 0.9), (0, 1, 0.6), (1, 1, 0.7), (1, 0, 0.8), (0, 0, 0.55), (1, 1, 0.95)] * 5]
    cal = [r.replace("hallucination", "calibration") for r in pope]
    for responses, metrics in ((rob, ("acc", "rrm", "rr")), (pope, ("pope_accuracy", "pope_f1_score")), (cal, ("ece",))):
        ok = [scoring.record(r) for r in responses]
        names = [v["name"] for v in ok[0]["variants"]]
        for metric in metrics:
            spec = scoring.estimator(metric, names, grouped=False)
            assert estimate(scoring.doc_columns(ok), spec) == pytest.approx(_aggregate(responses, metric)), metric
            assert _aggregate(responses, f"{metric}_stderr") > 0, metric
    # acc of 40 docs, 20 right: the bootstrap's stderr is close to sqrt(0.25 / 40)
    assert _aggregate(rob, "acc_stderr") == pytest.approx(math.sqrt(0.25 / 40), rel=0.1)
    assert "acc_stderr" in scoring.process_results({}, [rob[0]])
    # the corrupted variant is never right and the clean one at chance: RRM divides by 0
    flat = [_resp("robustness", [("clean", int(i % 4 != 0), 0, 4, None), ("noise", 1, 0, 4, None)]) for i in range(8)]
    assert _aggregate(flat, "rrm") is None and _aggregate(flat, "rrm_stderr") is None


def test_a_pool_row_without_its_image_fails_only_the_docs_that_show_it():
    _, rec = _task("chef_icl_mmbench")
    rows = _shaped_docs()["mmbench"]
    rows[4] = {**rows[4], "image": None}
    ds = datasets.Dataset.from_list(rows)
    pool = R.register_pool(ds)
    ds = ds.add_column("chef_row", list(range(len(ds)))).add_column("chef_pool", [pool] * len(ds))
    bare = ds.remove_columns("image")
    for i in range(len(ds)):  # top-k by image still ranks the pool: every doc renders
        R.render(bare[i], rec)
    shown = {i: {r for v in rec["variants"] if v.get("ice")
                 for r in R.retrieve(ds[i], rec, v["ice"]["retriever"], v["ice"]["shots"], 0)} for i in range(4)}
    for i in range(4):
        if 4 in shown[i]:
            with pytest.raises(ValueError, match=r"in-context example \(row 4\)"):
                R.visuals(ds[i], rec)
        else:
            assert None not in R.visuals(ds[i], rec)
    assert any(4 in rows for rows in shown.values())
    with pytest.raises(ValueError, match="image_required"):
        R.visuals(ds[4], rec)


def test_an_option_reading_none_or_nan_is_an_option_where_the_row_has_it():
    """MMBench's TSV layout (mmbench_dev_20230712.tsv: index, question, hint, A-D, answer, category,
    image, source, l2-category, comment, split; DATASET_SCHEMAS §5), read keeping its strings: the
    blank cell is the missing marker (a null in the dataset), a cell reading "None" or "nan" is an
    option's text. (pandas' default NA strings would turn both into nulls: ChEF's reading.)"""
    import csv
    import io

    tsv = ("index\tquestion\thint\tA\tB\tC\tD\tanswer\tcategory\timage\tsource\tl2-category\tcomment\tsplit\n"
           "7\tHow many dogs are there?\t\tTwo\tNone\tOne\t\tB\tcount\tiVBOR\tseed\tfine\t\tdev\n"
           "8\tWhich value is missing?\t\tnan\t0\t1\tNone\tA\tcount\tiVBOR\tseed\tfine\t\tdev\n")
    rows = [{k: (v if v != "" else None) for k, v in row.items()} for row in csv.DictReader(io.StringIO(tsv), delimiter="\t")]
    docs = datasets.Dataset.from_list([{**row, "index": int(row["index"])} for row in rows])
    mm = {"scenario": {"preset": "mmbench", "image_required": False}}
    first, second = (R.normalize(doc, mm) for doc in docs)
    assert first.options == ("Two", "None", "One") and first.gold == 1
    assert second.options == ("nan", "0", "1", "None") and second.gold == 0
    payload = R.render(docs[0], {**mm, "inferencer": "direct"})
    assert payload["variants"][0]["option_texts"] == ["Two", "None", "One"]
    # a copy whose absent options read "nan" names that marker
    assert R.normalize(docs[1], {"scenario": {"preset": "mmbench", "missing_option": ["nan"]}}).options == ("0", "1", "None")
    with pytest.raises(ValueError, match="missing_option must be a list of strings"):
        R.normalize(docs[1], {"scenario": {"preset": "mmbench", "missing_option": "nan"}})
    with pytest.raises(ValueError, match="missing_option must be a list of strings"):
        R.check({"scenario": {"preset": "mmbench", "missing_option": [None]}})
