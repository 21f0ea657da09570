"""ChEF recipes: Scenario × Instruction × Inferencer × Metric, read from task YAML.

A recipe is the ``lmms_eval_specific_kwargs.default`` mapping of a ``chef_*``
task. :func:`render` turns one document and the recipe into a *request
payload*: the JSON context that the ``chef`` model type
(:mod:`lmms_genbench.models.chef`) reads, and :func:`visuals` gives the images
in the order the payload's variants index them. Both are pure functions of the
document, the recipe and its seed. lmms-eval renders the context from a doc
without its Image columns, so the model gets the images by applying the request's
``doc_to_visual`` to the full doc: ``render`` reads no image.

Recipe keys (all optional except ``scenario``)::

    scenario:     {preset: mmbench | scienceqa | pope}  or a field mapping:
                  {question: q, hint: h, options: choices | [A, B, C, D],
                   answer: answer, answer_type: index | letter | text,
                   image: image | null (text-only) | photo: <package photo id field>,
                   image_required: true (an empty image fails the doc), key: id,
                   group: index, group_modulo: 1000000}
    instruction:  {query: "{hint}{question}\\nOptions: {options}",
                   answer_prompt: "Answer:", answer_template: "({label}) {text}"}
    inferencer:   direct | ppl | cot | multiturn
    desideratum:  accuracy (default) | calibration | in_context_learning |
                  instruction_following | robustness | hallucination |
                  language_performance — picks the metric family (chef/results.py)
    seed:         int (corruptions, shuffling, random in-context examples)
    variants:     list of {name, image: {corruption, severity}, text: {level, severity},
                  shuffle: true, verbalizer: <setting>, ice: {retriever, shots}};
                  default [{name: base}]
    judge_samples: int (language performance: judge calls per doc; 0 = none)

Each variant is one inference on the same document, so a desideratum's
relative metric (RRM, RIAM, match ratio) is computed inside one task run.

``group`` names the field whose value ties rows that are copies of one
question (MMBench's CircularEval copies: the same question with its options
rotated, ``index + k * 1_000_000``); with ``group_modulo`` the group is the
field's integer value modulo it, as lmms-eval's ``mmbench_evals.py`` groups
them. In-context retrieval never returns a row of the question's own group,
and ``acc_circular`` (chef/results.py) scores a group 1 only when all its copies
are right. Scenarios without ``group`` (ScienceQA, POPE, smoke) keep one group
per row.
"""

from __future__ import annotations

import json
import math
import numbers
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .corruptions import corrupt_image, corrupt_text, doc_rng, shuffle_options
from ..core import state
from ..core.registry import lookup

__all__ = [
    "INFERENCERS",
    "PRESETS",
    "VERBALIZERS",
    "Item",
    "normalize",
    "render",
    "visuals",
]

INFERENCERS = ("direct", "ppl", "cot", "multiturn")
LETTERS = "ABCDEFGHIJ"

PRESETS: dict[str, dict[str, Any]] = {
    # lmms-lab-encoder/MMBench (what lmms-eval's mmbench_en_* load): options in columns A..E;
    # dev holds CircularEval copies at index + k * 1_000_000 (lmms-eval mmbench_evals.py
    # groups them by index % 1e6; shared DATASET_SCHEMAS.md §5)
    "mmbench": {"question": "question", "hint": "hint", "options": ["A", "B", "C", "D", "E"],
                "answer": "answer", "answer_type": "letter", "image": "image", "key": "index",
                "group": "index", "group_modulo": 1_000_000, "image_required": True},
    # lmms-lab-encoder/ScienceQA, ScienceQA-IMG: options a list, answer an index; FULL has
    # text-only questions (image None), so an image is required only where a YAML says so (IMG)
    "scienceqa": {"question": "question", "hint": "hint", "options": "choices",
                  "answer": "answer", "answer_type": "index", "image": "image"},
    # lmms-lab-encoder/POPE: yes/no questions about COCO images
    "pope": {"question": "question", "fixed_options": ["Yes", "No"], "answer": "answer",
             "answer_type": "text", "image": "image", "key": "question_id", "image_required": True},
}

# Instruction-following verbalizers (ChEF after Li et al. 2023c): label per option index.
# natural: numbers, roman numerals, ordinals; neutral: surnames, unrelated words;
# unnatural: letters rotated by one (option A must be answered "B", ...).
VERBALIZERS: dict[str, Sequence[str] | None] = {
    "natural_numbers": ["1", "2", "3", "4", "5", "6", "7", "8"],
    "natural_roman": ["I", "II", "III", "IV", "V", "VI", "VII"],
    "natural_ordinals": ["first", "second", "third", "fourth", "fifth", "sixth"],
    "neutral_surnames": ["Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia"],
    "neutral_words": ["apple", "river", "pencil", "cloud", "garden", "violin"],
    "unnatural_rotated": None,  # built from the letters per question
}

DEFAULT_INSTRUCTION = {
    "query": "{hint}{question}\nOptions: {options}",
    "answer_prompt": "Answer:",
    "answer_template": "({label}) {text}",
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


def _scenario(recipe: Mapping[str, Any]) -> dict[str, Any]:
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


def _group_value(value: Any, spec: Mapping[str, Any]) -> str:
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


def normalize(doc: Mapping[str, Any], recipe: Mapping[str, Any]) -> Item:
    """Read question, hint, options and gold index from ``doc`` by the scenario mapping."""
    spec = _scenario(recipe)
    if "fixed_options" in spec:
        options = [str(o) for o in spec["fixed_options"]]
    elif isinstance(spec.get("options"), str):
        options = [str(o) for o in doc[spec["options"]]]
    elif isinstance(spec.get("options"), Sequence):
        options = [str(doc[c]) for c in spec["options"] if c in doc and not _missing(doc[c])]
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
    group = _group_value(doc.get(spec["group"]), spec) if spec.get("group") else None
    return Item(key, question, "" if _missing(hint) else str(hint).strip(), tuple(options), gold, group)


def doc_image(doc: Mapping[str, Any], recipe: Mapping[str, Any]):
    """The document's image (PIL), or None for a text-only question.

    Raises ValueError when the image cannot be found: the scenario's image column
    is not in ``doc`` (lmms-eval 0.7.3 hands ``doc_to_text`` its docs with Image
    columns dropped: only the full doc carries it), or it is empty in a scenario
    with ``image_required``. The chef model counts such a doc as failed.
    """
    spec = _scenario(recipe)
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


# ---------------------------------------------------------------- in-context examples

class _Pool:
    """The documents in-context examples are drawn from (the task's own split)."""

    def __init__(self, docs: Sequence[Mapping[str, Any]]):
        self.docs = docs
        self._text = None
        self._image = None
        self._groups = None

    def text_features(self, recipe) -> np.ndarray:
        if self._text is None:
            self._text = _bow([_item_text(normalize(d, recipe)) for d in self.docs])
        return self._text

    def groups(self, recipe) -> list[str] | None:
        """Each row's circular group, or None when the scenario names no ``group``."""
        spec = _scenario(recipe)
        if not spec.get("group"):
            return None
        if self._groups is None:
            field = spec["group"]
            # a column read decodes no image (HF datasets); plain lists of dicts work too
            values = self.docs[field] if hasattr(self.docs, "column_names") else [d.get(field) for d in self.docs]
            self._groups = [_group_value(v, spec) for v in values]
        return self._groups

    def image_features(self, recipe) -> np.ndarray:
        if self._image is None:
            self._image = np.stack([_thumb(_pool_image(d, recipe)) for d in self.docs])
        return self._image


def _pool_image(doc, recipe):
    # one pool row without its image ranks last (zero thumbnail) instead of failing every
    # query's top-k; the row fails itself when it is queried or shown as an example
    try:
        return doc_image(doc, recipe)
    except ValueError:
        return None


def _pools() -> dict[str, _Pool]:
    """The pools registered in this process (the state module's ``chef_pools`` slot): lmms-eval
    calls ``doc_to_text`` with only the doc, which names its pool."""
    return state.slot("chef_pools", dict)


def register_pool(dataset) -> str:
    """Remember ``dataset`` as an in-context pool; returns its id (used by ``process_docs``)."""
    pools = _pools()
    pool_id = f"pool{len(pools)}-{getattr(dataset, '_fingerprint', id(dataset))}"
    pools[pool_id] = _Pool(dataset)
    return pool_id


def _item_text(item: Item) -> str:
    return f"{item.hint} {item.question} {' '.join(item.options)}"


def _bow(texts: Sequence[str]) -> np.ndarray:
    # TF-IDF on lower-cased word tokens, L2-normalised (ChEF uses a text encoder)
    tokens = [re.findall(r"[a-z0-9]+", t.lower()) for t in texts]
    vocab = {w: i for i, w in enumerate(sorted({w for ts in tokens for w in ts}))}
    m = np.zeros((len(texts), max(1, len(vocab))))
    for r, ts in enumerate(tokens):
        for w in ts:
            m[r, vocab[w]] += 1
    idf = np.log((1 + len(texts)) / (1 + (m > 0).sum(0))) + 1
    m *= idf
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def _thumb(image) -> np.ndarray:
    # 16x16 colour thumbnail, mean-centred, L2-normalised (ChEF uses CLIP image features)
    if image is None:
        return np.zeros(16 * 16 * 3)
    x = np.asarray(image.convert("RGB").resize((16, 16)), dtype=np.float64).ravel()
    x -= x.mean()
    return x / max(np.linalg.norm(x), 1e-12)


RETRIEVERS = ("random", "fixed", "topk_text", "topk_image")


def retrieve(doc: Mapping[str, Any], recipe: Mapping[str, Any], retriever: str, shots: int, seed: int) -> list[int]:
    """Row indices of ``shots`` in-context examples for ``doc`` from its pool.

    Never the doc itself, nor (when the scenario names a ``group``) any row of its
    circular group: a rotated copy of the question would hand the model its answer.
    """
    if retriever not in RETRIEVERS:
        raise ValueError(f"ice retriever must be one of {RETRIEVERS}, got {retriever!r}")
    if not 1 <= int(shots) <= 8:
        raise ValueError(f"ice shots must be between 1 and 8, got {shots!r}")
    pool_id, row = doc.get("chef_pool"), doc.get("chef_row")
    pools = _pools()
    if pool_id not in pools:
        raise ValueError("in-context examples need the task's process_docs: utils.process_docs (it registers the pool)")
    pool = pools[pool_id]
    groups = pool.groups(recipe)
    if groups is None:
        others = [i for i in range(len(pool.docs)) if i != row]
    else:
        own = normalize(doc, recipe).group
        others = [i for i in range(len(pool.docs)) if i != row and groups[i] != own]
    if len(others) < shots:
        where = "other documents" if groups is None else "documents outside the question's own group"
        raise ValueError(f"the pool has {len(others)} {where}, fewer than {shots} shots")
    if retriever == "fixed":
        return others[:shots]
    if retriever == "random":
        rng = doc_rng(seed, normalize(doc, recipe).key, "ice")
        return [others[i] for i in rng.choice(len(others), size=shots, replace=False)]
    feats = pool.text_features(recipe) if retriever == "topk_text" else pool.image_features(recipe)
    sims = feats[others] @ feats[row]
    order = np.argsort(-sims, kind="stable")[:shots]
    return [others[i] for i in order]


# ---------------------------------------------------------------- rendering

def _options_text(labels: Sequence[str], options: Sequence[str]) -> str:
    return " ".join(f"({lab}) {opt}" for lab, opt in zip(labels, options))


def _query(item: Item, options: Sequence[str], question: str, instruction: Mapping[str, Any]) -> str:
    labels = LETTERS[: len(options)]
    hint = f"{item.hint}\n" if item.hint else ""
    return instruction["query"].format(hint=hint, question=question, options=_options_text(labels, options))


def _verbalizer(name: str, n: int) -> list[str]:
    lookup(VERBALIZERS, name, "verbalizer")
    if name == "unnatural_rotated":
        return [LETTERS[(i + 1) % n] for i in range(n)]
    labels = list(VERBALIZERS[name])
    if n > len(labels):
        raise ValueError(f"verbalizer {name} has {len(labels)} labels, question has {n} options")
    return labels[:n]


def _instruction(recipe: Mapping[str, Any]) -> dict[str, Any]:
    instr = {**DEFAULT_INSTRUCTION, **(recipe.get("instruction") or {})}
    for key in ("query", "answer_prompt", "answer_template"):
        if not isinstance(instr[key], str):
            raise TypeError(f"recipe instruction.{key} must be a string, got {instr[key]!r}")
    return instr


def _variants(recipe: Mapping[str, Any]) -> list[dict[str, Any]]:
    variants = recipe.get("variants") or [{"name": "base"}]
    names = [v.get("name") for v in variants]
    if any(not n for n in names) or len(set(names)) != len(names):
        raise ValueError(f"recipe variants need unique non-empty names, got {names}")
    allowed = {"name", "image", "text", "shuffle", "verbalizer", "ice"}
    for v in variants:
        extra = set(v) - allowed
        if extra:
            raise ValueError(f"variant {v['name']!r} has unknown keys {sorted(extra)}; allowed {sorted(allowed)}")
    return [dict(v) for v in variants]


def check(recipe: Mapping[str, Any]) -> None:
    """Raise on what is wrong with ``recipe`` itself, whatever the doc: such an error is the
    same for every doc and stops the task, while :func:`render`'s other errors belong to one doc."""
    inferencer = recipe.get("inferencer", "multiturn")
    if inferencer not in INFERENCERS:
        raise ValueError(f"recipe inferencer must be one of {INFERENCERS}, got {inferencer!r}")
    from .results import FAMILIES

    lookup(FAMILIES, recipe.get("desideratum", "accuracy"), "recipe desideratum")
    spec = _scenario(recipe)
    if "fixed_options" not in spec and not isinstance(spec.get("options"), (str, Sequence)):
        raise ValueError("scenario mapping needs 'options' (a list field or a list of columns) or 'fixed_options'")
    if spec.get("answer_type", "index") not in ("index", "letter", "text"):
        raise ValueError(f"scenario answer_type must be index, letter or text, got {spec['answer_type']!r}")
    modulo = spec.get("group_modulo")
    if spec.get("group") and modulo is not None and (not isinstance(modulo, int) or isinstance(modulo, bool) or modulo < 1):
        raise ValueError(f"scenario group_modulo must be a positive integer, got {modulo!r}")
    _instruction(recipe)
    _variants(recipe)


def render(doc: Mapping[str, Any], recipe: Mapping[str, Any]) -> dict[str, Any]:
    """The request payload for one document: the shared fields and one entry per variant.

    Visual indices refer to :func:`visuals`' list: 0 is the clean image; each
    image-corrupted variant and each in-context example adds its own slot.
    ``render`` never reads an image: lmms-eval calls ``doc_to_text`` on docs whose
    Image columns are dropped, so the slots are laid out whatever the doc holds
    and :func:`visuals` (given the full doc) fills them, None where there is no image.
    """
    check(recipe)
    inferencer = recipe.get("inferencer", "multiturn")
    desideratum = recipe.get("desideratum", "accuracy")
    seed = int(recipe.get("seed", 0))
    instr = _instruction(recipe)
    item = normalize(doc, recipe)
    next_visual = 1
    out = []
    for v in _variants(recipe):
        options, gold, question = list(item.options), item.gold, item.question
        if v.get("shuffle"):
            options, gold, _ = shuffle_options(options, gold, seed, item.key)
        if v.get("text"):
            t = v["text"]
            question = corrupt_text(question, t["level"], int(t.get("severity", 3)), seed, item.key)
        prompt = _query(item, options, question, instr)
        labels = list(LETTERS[: len(options)])
        template = instr["answer_template"]
        if v.get("verbalizer"):
            labels = _verbalizer(v["verbalizer"], len(options))
            prompt += "".join(f'\nIf the answer is "{LETTERS[i]}", you need to output "{lab}".' for i, lab in enumerate(labels))
            template = "{label}"
        vis: list[int] = []
        if v.get("ice"):
            ice = v["ice"]
            shots = int(ice.get("shots", 1))
            examples = []
            for row in retrieve(doc, recipe, ice.get("retriever", "random"), shots, seed):
                ex_doc = _pools()[doc["chef_pool"]].docs[row]
                ex = normalize(ex_doc, recipe)
                ex_prompt = _query(ex, ex.options, ex.question, instr)
                examples.append(f"{ex_prompt}\n{instr['answer_prompt']} ({LETTERS[ex.gold]}) {ex.options[ex.gold]}")
                vis.append(next_visual)
                next_visual += 1
            prompt = "\n\n".join([*examples, prompt])
        if v.get("image"):
            vis.append(next_visual)
            next_visual += 1
        else:
            vis.append(0)
        continuations = [template.format(label=lab, text=opt) for lab, opt in zip(labels, options)]
        out.append({
            "name": v["name"], "prompt": prompt, "options": continuations, "labels": labels,
            "option_texts": options, "gold": gold, "visuals": vis,
        })
    # the chef model echoes "key" and "group" into its response for process_results
    return {
        "chef": 1, "key": item.key, "group": item.group, "inferencer": inferencer, "desideratum": desideratum,
        "answer_prompt": instr["answer_prompt"], "judge_samples": int(recipe.get("judge_samples", 0)),
        "question": item.question, "gold_text": item.options[item.gold], "n_visuals": next_visual, "variants": out,
    }


def visuals(doc: Mapping[str, Any], recipe: Mapping[str, Any]) -> list:
    """The payload's visual slots for the *full* doc (the model's ``task_dict`` row).

    Clean image, then per variant its ICE images and corrupted image, as
    :func:`render` numbers them (``n_visuals`` entries); None in a slot whose doc has
    no image (a text-only question or example). Raises ValueError where an image
    cannot be found (:func:`doc_image`).
    """
    image = doc_image(doc, recipe)
    seed = int(recipe.get("seed", 0))
    key = normalize(doc, recipe).key
    out = [image]
    for v in _variants(recipe):
        if v.get("ice"):
            ice = v["ice"]
            for row in retrieve(doc, recipe, ice.get("retriever", "random"), int(ice.get("shots", 1)), seed):
                try:
                    out.append(doc_image(_pools()[doc["chef_pool"]].docs[row], recipe))
                except ValueError as exc:
                    raise ValueError(f"in-context example (row {row}) of variant {v['name']!r}: {exc}") from exc
        if v.get("image"):
            c = v["image"]
            out.append(None if image is None else corrupt_image(image, c["corruption"], int(c.get("severity", 3)), seed, key))
    return out
