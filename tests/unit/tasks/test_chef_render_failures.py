"""ChEF's doc_to_text: a row that cannot be rendered becomes a payload naming why (the chef
model fails that doc alone); a recipe wrong for every doc raises (the task stops)."""

import json

import pytest

from lmms_genbench.tasks.chef import utils

# lmms-eval hands doc_to_text the recipe (lmms_eval_specific_kwargs.default, resolved)
RECIPE = {"scenario": {"question": "q", "options": "o", "answer": "a"}, "inferencer": "direct"}


def test_a_row_with_one_option_renders_as_a_failure_payload():
    payload = json.loads(utils.doc_to_text({"q": "x", "o": ["only"], "a": 0}, RECIPE))
    assert payload == {"chef": 1, "error": "the doc cannot be rendered: a ChEF question needs at least two options, doc has ['only']"}
    assert "variants" in json.loads(utils.doc_to_text({"q": "x", "o": ["a", "b"], "a": 1}, RECIPE))


@pytest.mark.parametrize("change, message", [
    ({"inferencer": "beam"}, "recipe inferencer must be one of"),
    ({"desideratum": "speed"}, "recipe desideratum"),
    ({"scenario": {"question": "q", "options": "o", "answer": "a", "answer_type": "roman"}}, "answer_type"),
    ({"scenario": {"question": "q", "options": "o", "answer": "a", "group": "g", "group_modulo": 0}}, "group_modulo"),
    ({"variants": [{"name": "base", "blur": 1}]}, "unknown keys"),
])
def test_a_recipe_wrong_for_every_doc_raises(change, message):
    with pytest.raises(ValueError, match=message):
        utils.doc_to_text({"q": "x", "o": ["a", "b"], "a": 0}, {**RECIPE, **change})
