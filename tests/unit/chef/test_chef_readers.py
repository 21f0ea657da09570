"""Free-text answers read as ChEF's authors read them (the default reader against the verdicts their
own code gave on 1,356 adversarial replies, tests/support/data/parity/readers/README.md), and the
package's named readers to their documented verdicts (lmms_genbench/tasks/chef/README.md)."""

import json
from pathlib import Path

import pytest

from lmms_genbench.chef import recipe as R
from lmms_genbench.chef.readers import lenient, read_answer, strict

DATA = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "readers"
INPUTS = json.loads((DATA / "inputs.json").read_text(encoding="utf-8"))
AUTHORS = json.loads((DATA / "authors_outputs.json").read_text(encoding="utf-8"))
LETTERS = "ABCDEFG"


def _labels(options):
    return list(LETTERS[: len(options)])


def test_the_default_reader_gives_chefs_verdict_on_every_recorded_reply():
    wrong = []
    for case, theirs in zip(INPUTS["choice"], AUTHORS["choice"], strict=True):
        expected = -1 if theirs["letter"] is None else LETTERS.index(theirs["letter"])
        if read_answer(case["reply"], _labels(case["options"]), case["options"])[0] != expected:
            wrong.append(case["reply"])
    for case, theirs in zip(INPUTS["pope"], AUTHORS["pope"], strict=True):
        if read_answer(case["reply"], ["A", "B"], ["Yes", "No"], pope=True)[0] != ["yes", "no"].index(theirs["reads"]):
            wrong.append(case["reply"])
    for case, theirs in zip(INPUTS["verbalizer"], AUTHORS["verbalizer"], strict=True):
        expected = -1 if theirs["label"] is None else case["labels"].index(theirs["label"])
        if read_answer(case["reply"], case["labels"], case["labels"])[0] != expected:
            wrong.append(case["reply"])
    assert wrong == []
    assert len(INPUTS["choice"]) + len(INPUTS["pope"]) + len(INPUTS["verbalizer"]) == 1356


@pytest.mark.parametrize("reader", [lenient, strict])
def test_the_named_readers_never_read_a_negated_an_article_or_one_of_several_letters(reader):
    for case in INPUTS["choice"]:
        pred, reason = reader(case["reply"], _labels(case["options"]), case["options"])
        if case["category"] in ("negation", "several"):
            assert pred == -1 and reason in ("negation", "several_options"), case["reply"]
        if case["category"] == "article" and not case["template"].startswith("A is") and case["template"] not in ("A", "A."):
            assert pred != 0, case["reply"]  # the article is never option A


OPTIONS = ["a cat", "a dog", "two", "red"]


# (reply, chef, lenient, strict): the verdicts tasks/chef/README.md documents
@pytest.mark.parametrize(("reply", "chef", "lenient_", "strict_"), [
    ("B", (1, None), (1, None), (1, None)),
    ("The answer is B.", (1, None), (1, None), (1, None)),
    ("Not C, it's A.", (0, None), (-1, "negation"), (-1, "negation")),
    ("isn't C", (2, None), (-1, "negation"), (-1, "negation")),
    ("A two is shown, so D.", (3, None), (3, None), (-1, "not_alone")),
    ("A is correct", (-1, "chef_none"), (0, None), (-1, "not_alone")),
    ("B and C", (-1, "chef_none"), (-1, "several_options"), (-1, "several_options")),
    ("both A and B", (-1, "chef_none"), (-1, "several_options"), (-1, "several_options")),
    ("**A**", (-1, "chef_none"), (0, None), (0, None)),
    ("[C]", (-1, "chef_none"), (2, None), (2, None)),
    ("答案：D。", (-1, "chef_none"), (3, None), (-1, "not_alone")),
    ("b", (-1, "chef_none"), (-1, "no_option"), (-1, "no_option")),
    ("a dog", (1, None), (1, None), (1, None)),
    ("I think it is a dog", (1, None), (1, None), (-1, "not_alone")),
    ("E", (4, None), (-1, "no_option"), (-1, "no_option")),
    ("", (-1, "chef_none"), (-1, "no_option"), (-1, "no_option")),
])
def test_documented_verdicts(reply, chef, lenient_, strict_):
    labels = _labels(OPTIONS)
    assert read_answer(reply, labels, OPTIONS, "chef") == chef
    assert read_answer(reply, labels, OPTIONS, "lenient") == lenient_
    assert read_answer(reply, labels, OPTIONS, "strict") == strict_


@pytest.mark.parametrize(("reply", "chef", "lenient_"), [
    ("NO.", 0, 1), ("B", 0, 1), ("Yes and no.", 1, -1), ("Yes, no doubt.", 1, -1), ("I don't know.", 0, -1),
    ("", 0, -1), ("There is not a dog.", 1, -1),
])
def test_documented_pope_verdicts(reply, chef, lenient_):
    assert read_answer(reply, ["A", "B"], ["Yes", "No"], "chef", pope=True)[0] == chef
    assert read_answer(reply, ["A", "B"], ["Yes", "No"], "lenient", pope=True)[0] == lenient_


def test_the_recipe_names_its_reader_and_the_payload_carries_it():
    doc = {"q": "Which?", "o": ["a cat", "a dog"], "a": 1}
    base = {"scenario": {"question": "q", "options": "o", "answer": "a", "image": None}, "inferencer": "direct"}
    assert R.render(doc, base)["answer_reader"] == "chef"
    assert R.render(doc, {**base, "answer_reader": "strict"})["answer_reader"] == "strict"
    assert R.render(doc, {**base, "desideratum": "hallucination"})["pope"] is True
    with pytest.raises(ValueError, match="answer_reader must be one of"):
        R.check({**base, "answer_reader": "fuzzy"})
