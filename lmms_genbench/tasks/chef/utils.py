"""ChEF task glue: the recipe is the task's ``lmms_eval_specific_kwargs.default``.

Rendering lives in :mod:`lmms_genbench.chef.recipe` and scoring in
:mod:`lmms_genbench.chef.results` (imported once per process); these functions
only pass the recipe along. The context is a JSON payload for ``--model chef``.
"""

import json

from lmms_genbench.chef import recipe as _recipe
from lmms_genbench.chef import results as _scoring

_NOT_RECIPE = ("default",)


def _recipe_of(kwargs):
    if not kwargs or "scenario" not in kwargs:
        raise ValueError("chef tasks need the recipe in lmms_eval_specific_kwargs.default (with a 'scenario')")
    return {k: v for k, v in kwargs.items() if k not in _NOT_RECIPE}


def process_docs(dataset):
    """Register the split as the in-context example pool and number its rows."""
    pool_id = _recipe.register_pool(dataset)
    return dataset.add_column("chef_row", list(range(len(dataset)))).add_column("chef_pool", [pool_id] * len(dataset))


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    recipe = _recipe_of(lmms_eval_specific_kwargs)
    try:
        payload = _recipe.render(doc, recipe)
    except ValueError as exc:
        _recipe.check(recipe)  # raises again where the recipe is wrong for every doc: the task stops
        # this doc's data (too few options, gold out of range): it fails alone
        payload = {"chef": 1, "error": f"the doc cannot be rendered: {exc}"}
    return json.dumps(payload, ensure_ascii=False)


def doc_to_visual(doc, lmms_eval_specific_kwargs=None):
    return _recipe.visuals(doc, _recipe_of(lmms_eval_specific_kwargs))


def process_results(doc, results):
    return _scoring.process_results(doc, results)


def aggregate(items):
    return _scoring.aggregate(items)
