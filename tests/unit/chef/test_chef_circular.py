"""MMBench circular groups in ChEF recipes: in-context retrieval never hands the model
a rotated copy of the question it asks, and ``acc_circular`` follows MMBench's rule.

The fixture is MMBench-shaped. Columns and types: the lmms-lab/MMBench card, config
``cn`` (index int64, question, hint, answer, A, B, C, D, category, image, source,
L2-category, comment, split; shared DATASET_SCHEMAS.md §5; ``en``'s dtypes at main
are unconfirmed). Circular copies: open-compass/MMBench issues #12 and #31 (up to 4
copies per question in the dev TSV) and lmms-eval's mmbench_evals.py ``eval_result``
(copy k of question i has ``index = i + k * 1_000_000``, grouped by ``index % 1e6``).
"""

import json

import datasets
import pytest
import yaml

from lmms_genbench.chef import recipe as R
from lmms_genbench.chef import results as scoring

from tests.support.mmbench_circular import FEATURES, QUESTIONS, TASKS, mmbench_circular_rows


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def _recipe(task):
    return yaml.load((TASKS / f"{task}.yaml").read_text(), Loader=_Loader)["lmms_eval_specific_kwargs"]["default"]


@pytest.fixture(scope="module")
def docs():
    ds = datasets.Dataset.from_list(mmbench_circular_rows(), features=FEATURES)
    pool = R.register_pool(ds)
    return ds.add_column("chef_row", list(range(len(ds)))).add_column("chef_pool", [pool] * len(ds))


def test_the_fixture_is_mmbench_shaped(docs):
    assert docs.features["index"].dtype == "int64" and len(docs) == 13
    for doc in docs:
        item = R.normalize(doc, _recipe("chef_icl_mmbench"))
        main = QUESTIONS[doc["index"] % 1_000_000]
        assert item.options[item.gold] == main[1][main[2]]  # the rotation keeps the right answer
        assert item.group == str(doc["index"] % 1_000_000)


@pytest.mark.parametrize("retriever", R.RETRIEVERS)
def test_in_context_examples_never_come_from_the_question_s_own_group(docs, retriever):
    # before the fix, top-k by text or image returned a rotated copy of the query itself
    rec = _recipe("chef_icl_mmbench")
    for doc in docs:
        own = doc["index"] % 1_000_000
        for shots in (1, 3):
            rows = R.retrieve(doc, rec, retriever, shots, seed=0)
            assert len(rows) == shots
            assert all(docs[r]["index"] % 1_000_000 != own for r in rows), (retriever, doc["index"], rows)


def test_rendered_icl_prompts_hold_no_copy_of_the_question(docs):
    rec = _recipe("chef_icl_mmbench")
    for doc in docs:
        payload = R.render(doc, rec)
        for v in payload["variants"][1:]:
            examples = v["prompt"].split("\n\n")[:-1]
            assert examples and not any(doc["question"] in e for e in examples), v["name"]


def test_a_group_needing_more_rows_than_the_pool_has_outside_it_is_refused():
    ds = datasets.Dataset.from_list(mmbench_circular_rows()[:6], features=FEATURES)  # groups 0 (4 rows), 1 (2)
    pool = R.register_pool(ds)
    ds = ds.add_column("chef_row", list(range(6))).add_column("chef_pool", [pool] * 6)
    with pytest.raises(ValueError, match="2 documents outside the question's own group, fewer than 3 shots"):
        R.retrieve(ds[0], _recipe("chef_icl_mmbench"), "random", 3, seed=0)


def test_group_rule_reads_string_indices_and_names_bad_values():
    mm = {"scenario": {"preset": "mmbench"}}
    row = {"question": "Q?", "A": "x", "B": "y", "answer": "A"}
    # en's index is a string at card revision ac155b9 (DATASET_SCHEMAS §5)
    assert R.normalize({**row, "index": "2000007"}, mm).group == "7"
    with pytest.raises(ValueError, match="group field 'index' must hold an integer"):
        R.normalize({**row, "index": "q7"}, mm)
    with pytest.raises(ValueError, match="group_modulo must be a positive integer, got 0"):
        R.normalize({**row, "index": 7}, {"scenario": {"preset": "mmbench", "group_modulo": 0}})
    with pytest.raises(ValueError, match="group field 'index' is missing"):
        R.normalize(row, mm)


def test_scenarios_without_a_group_rule_keep_one_group_per_row():
    sqa = R.normalize({"question": "Q?", "choices": ["a", "b"], "answer": 1, "hint": ""}, {"scenario": {"preset": "scienceqa"}})
    pope = R.normalize({"question": "Is there a cat?", "answer": "no", "question_id": "3"}, {"scenario": {"preset": "pope"}})
    assert sqa.group is None and pope.group is None


def _response(payload, preds):
    """What the chef model answers: it echoes the payload's key and group (chef.generate_until)."""
    return json.dumps({"key": payload["key"], "group": payload.get("group"), "inferencer": payload["inferencer"], "desideratum": payload["desideratum"],
                       "scoring": payload.get("scoring"),
                       "variants": [{"name": v["name"], "gold": v["gold"], "n_options": len(v["options"]), "pred": p}
                                    for v, p in zip(payload["variants"], preds)]})


def test_acc_circular_scores_a_group_only_when_every_copy_is_right(docs):
    rec = _recipe("chef_calibration_mmbench")
    # question 0: all 4 right; 1: one copy of 4 wrong; 2: all 3 right; 3: both wrong
    wrong = {1_000_001, 3, 1_000_003}
    items = {}
    for doc in docs:
        payload = R.render(doc, rec)
        gold = payload["variants"][0]["gold"]
        pred = (gold + 1) % len(payload["variants"][0]["options"]) if doc["index"] in wrong else gold
        for name, value in scoring.process_results(doc, [_response(payload, [pred])]).items():
            items.setdefault(name, []).append(value)
    listed = {m["metric"] for m in yaml.load((TASKS / "chef_calibration_mmbench.yaml").read_text(),
                                             Loader=_Loader)["metric_list"]}
    assert set(items) == listed
    assert scoring.aggregate(items["acc_circular"]) == 0.5  # questions 0 and 2
    # acc: ChEF's vanilla accuracy on the original questions (index < 1e6; 3 wrong); per copy: 10 of 13
    assert scoring.aggregate(items["acc"]) == pytest.approx(3 / 4)
    assert scoring.aggregate(items["acc_per_copy"]) == pytest.approx(10 / 13)
    # lmms-eval's per-sample score (--baseline) exists for the rows acc counts: the originals
    assert sum("score" in rec for _, rec in items["acc"]) == 4
    assert scoring.aggregate(items["n_groups"]) == 4 and scoring.aggregate(items["n_docs"]) == 13


def test_per_row_scenarios_emit_no_circular_metric():
    payload = {"key": "k1", "inferencer": "ppl", "desideratum": "accuracy",
               "variants": [{"name": "base", "gold": 0, "options": ["a", "b"]}]}
    assert "acc_circular" not in scoring.process_results({}, [_response(payload, [0])])


def test_a_group_without_its_original_row_is_scored_on_its_first_copy_and_counted(docs):
    """A sampled or cut split: groups 1 and 3 lost their original rows (index 1 and 3). ChEF's loop
    scores such a group's first remaining copy (smallest id) for vanilla accuracy, as we do; its
    circular score (rows with id % 1e6 == the copy's full id: none, so 1) is its grouping defect:
    we score the copies that are there."""
    rec = _recipe("chef_calibration_mmbench")
    wrong = {1_000_001}
    items = {}
    for doc in docs:
        if doc["index"] in (1, 3):
            continue
        payload = R.render(doc, rec)
        gold = payload["variants"][0]["gold"]
        pred = (gold + 1) % len(payload["variants"][0]["options"]) if doc["index"] in wrong else gold
        for name, value in scoring.process_results(doc, [_response(payload, [pred])]).items():
            items.setdefault(name, []).append(value)
    assert scoring.aggregate(items["n_groups"]) == 4 and scoring.aggregate(items["n_groups_no_original"]) == 2
    # acc over 0, 1_000_001 (wrong), 2, 1_000_003: ChEF's vanilla rows
    assert [r["key"] for r in scoring.scored_records([r for _, r in items["acc"]])] == ["0", "2", "1000001", "1000003"]
    assert scoring.aggregate(items["acc"]) == pytest.approx(3 / 4)
    # group 1 has a wrong copy (ChEF's defect would count it right), group 3's one copy is right
    assert scoring.aggregate(items["acc_circular"]) == pytest.approx(3 / 4)
