"""ChEF scenarios: reading a document into ChEF's multi-choice form.

A scenario is a preset (:data:`PRESETS`: MMBench, ScienceQA, POPE as lmms-eval's own
tasks load them) or a field mapping (grammar in :mod:`lmms_genbench.chef.recipe`).
:func:`normalize` reads question, hint, options, gold index, key and circular group;
:func:`doc_image` the image. Pure functions of the document and the recipe.
"""

from __future__ import annotations

import json
import math
import numbers
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.registry import lookup

__all__ = ["LETTERS", "PRESETS", "Item", "doc_image", "group_value", "is_original", "normalize", "scenario_spec"]

LETTERS = "ABCDEFGHIJ"

PRESETS: dict[str, dict[str, Any]] = {
    # lmms-lab-encoder/MMBench (what lmms-eval's mmbench_en_* load): options in columns A..E;
    # dev holds CircularEval copies at index + k * 1_000_000 (lmms-eval mmbench_evals.py
    # groups them by index % 1e6; shared DATASET_SCHEMAS.md §5)
    # chance: ChEF's constant for MMBench's vanilla accuracy (scenario/utils.py, mmbench_rand_acc)
    # an absent option is a null (a blank cell in the TSV); "None" and "nan" are options' texts
    # (SEED-Bench-style counting answers); a copy whose absent options read "nan" sets missing_option
    "mmbench": {"question": "question", "hint": "hint", "options": ["A", "B", "C", "D", "E"],
                "answer": "answer", "answer_type": "letter", "image": "image", "key": "index",
                "group": "index", "group_modulo": 1_000_000, "image_required": True, "chance": 0.2757},
    # lmms-lab-encoder/ScienceQA, ScienceQA-IMG: options a list, answer an index; FULL has
    # text-only questions (image None), so an image is required only where a YAML says so (IMG)
    # chance: ChEF's constant for its ScienceQA (the 2,017 ScienceQA-IMG test questions; sqa_rand_acc)
    "scienceqa": {"question": "question", "hint": "hint", "options": "choices",
                  "answer": "answer", "answer_type": "index", "image": "image", "chance": 0.358},
    # lmms-lab-encoder/POPE: yes/no questions about COCO images
    "pope": {"question": "question", "fixed_options": ["Yes", "No"], "answer": "answer",
             "answer_type": "text", "image": "image", "key": "question_id", "image_required": True},
}


@dataclass(frozen=True)
class Item:
    """A scenario document in ChEF's multi-choice form."""

    key: str
    question: str
    hint: str
    options: tuple[str, ...]
    gold: int
    group: str | None = None  # the circular group (copies of one question); None: the row alone


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip().lower() in ("", "nan", "none")


def _no_option(value: Any, markers: Sequence[str]) -> bool:
    """Whether an option column holds no option: the dataset's own missing marker decides (a null,
    a blank cell, or a string the scenario's ``missing_option`` names), never the text: an option
    reading "None" (a counting question's answer) or "nan" is an option."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    return str(value).strip() == "" or str(value) in markers


def scenario_spec(recipe: Mapping[str, Any]) -> dict[str, Any]:
    spec = recipe.get("scenario")
    if not isinstance(spec, Mapping):
        raise TypeError(f"recipe 'scenario' must be a mapping (preset or field mapping), got {spec!r}")
    spec = dict(spec)
    preset = spec.pop("preset", None)
    if preset is not None:
        spec = {**lookup(PRESETS, preset, "scenario preset"), **spec}
    for required in ("question", "answer"):
        if required not in spec:
            raise ValueError(f"scenario mapping needs a {required!r} field name, got {sorted(spec)}")
    return spec


def group_value(value: Any, spec: Mapping[str, Any]) -> str:
    """The group of a row whose ``spec['group']`` field holds ``value``."""
    field, modulo = spec["group"], spec.get("group_modulo")
    if _missing(value):
        raise ValueError(f"scenario group field {field!r} is missing or empty in a doc, got {value!r}")
    if modulo is None:
        return str(value)
    if not isinstance(modulo, int) or isinstance(modulo, bool) or modulo < 1:
        raise ValueError(f"scenario group_modulo must be a positive integer, got {modulo!r}")
    # MMBench en's index is a string at card revision ac155b9, an int64 in cn (DATASET_SCHEMAS §5)
    if isinstance(value, numbers.Integral):
        number = int(value)
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        number = int(value)
    else:
        raise ValueError(f"scenario group field {field!r} must hold an integer when group_modulo is set, got {value!r}")
    return str(number % modulo)


def is_original(doc: Mapping[str, Any], recipe: Mapping[str, Any]) -> bool:
    """Whether the row is its group's original question: with ``group_modulo`` (MMBench) the
    row whose group value is below the modulo (``index < 1e6``, ChEF's ``id mod 1e6`` row);
    every row of a scenario without such groups."""
    spec = scenario_spec(recipe)
    if not spec.get("group") or spec.get("group_modulo") is None:
        return True
    return group_value(doc.get(spec["group"]), {**spec, "group_modulo": 10**18}) == group_value(doc.get(spec["group"]), spec)


def normalize(doc: Mapping[str, Any], recipe: Mapping[str, Any]) -> Item:
    """Read question, hint, options and gold index from ``doc`` by the scenario mapping."""
    spec = scenario_spec(recipe)
    if "fixed_options" in spec:
        options = [str(o) for o in spec["fixed_options"]]
    elif isinstance(spec.get("options"), str):
        options = [str(o) for o in doc[spec["options"]]]
    elif isinstance(spec.get("options"), Sequence):
        markers = spec.get("missing_option") or []  # recipe.check names a bad value for the whole recipe
        if isinstance(markers, str):
            raise ValueError(f"scenario missing_option must be a list of strings, got {markers!r}")
        options = [str(doc[c]) for c in spec["options"] if c in doc and not _no_option(doc[c], markers)]
    else:
        raise ValueError("scenario mapping needs 'options' (a list field or a list of columns) or 'fixed_options'")
    if len(options) < 2:
        raise ValueError(f"a ChEF question needs at least two options, doc has {options!r}")
    raw = doc[spec["answer"]]
    kind = spec.get("answer_type", "index")
    if kind == "index":
        gold = int(raw)
    elif kind == "letter":
        gold = LETTERS.index(str(raw).strip().upper())
    elif kind == "text":
        lowered = [o.strip().lower() for o in options]
        gold = lowered.index(str(raw).strip().lower())
    else:
        raise ValueError(f"scenario answer_type must be index, letter or text, got {kind!r}")
    if not 0 <= gold < len(options):
        raise ValueError(f"gold answer {raw!r} is out of range for {len(options)} options")
    hint = doc.get(spec["hint"]) if spec.get("hint") else None
    question = str(doc[spec["question"]]).strip()
    key_field = spec.get("key")
    if key_field and not _missing(doc.get(key_field)):
        key = str(doc[key_field])
    else:  # no id column (ScienceQA): the question and options identify the doc
        key = f"crc{zlib.crc32(json.dumps([question, options]).encode()):08x}"
    group = group_value(doc.get(spec["group"]), spec) if spec.get("group") else None
    return Item(key, question, "" if _missing(hint) else str(hint).strip(), tuple(options), gold, group)


def doc_image(doc: Mapping[str, Any], recipe: Mapping[str, Any]):
    """The document's image (PIL), or None for a text-only question.

    Raises ValueError when the image cannot be found: the scenario's image column
    is not in ``doc`` (lmms-eval 0.7.3 hands ``doc_to_text`` its docs with Image
    columns dropped: only the full doc carries it), or it is empty in a scenario
    with ``image_required``. The chef model counts such a doc as failed.
    """
    spec = scenario_spec(recipe)
    if spec.get("photo"):
        from lmms_genbench.data.photos import load_package_photo

        return load_package_photo(doc[spec["photo"]]).convert("RGB")
    field = spec.get("image", "image")
    if field is None:  # a text-only scenario (image: null)
        return None
    if field not in doc:
        raise ValueError(f"the doc has no image column {field!r} (columns: {sorted(doc)[:12]}); "
                         "set the scenario's image field, or image: null for a text-only scenario")
    value = doc[field]
    if value is None:
        if spec.get("image_required"):
            raise ValueError(f"the doc's image column {field!r} is empty and this scenario needs an image "
                             "(image_required): not scored text-only")
        return None
    if isinstance(value, str):
        from PIL import Image

        with Image.open(value) as im:
            return im.convert("RGB")
    return value.convert("RGB")
