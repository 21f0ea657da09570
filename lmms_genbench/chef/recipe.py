"""ChEF recipes: Scenario × Instruction × Inferencer × Metric, read from task YAML.

A recipe is the ``lmms_eval_specific_kwargs.default`` mapping of a ``chef_*``
task. :func:`render` turns one document and the recipe into a *request
payload*: the JSON context that the ``chef`` model type
(:mod:`lmms_genbench.models.chef`) reads, and :func:`visuals` gives the images
in the order the payload's variants index them. Both are pure functions of the
document, the recipe and its seed. lmms-eval renders the context from a doc
without its Image columns, so the model gets the images by applying the request's
``doc_to_visual`` to the full doc: ``render`` reads no image. Scenarios are read by
:mod:`.scenario`, in-context examples drawn by :mod:`.retrieval`.

Recipe keys (all optional except ``scenario``)::

    scenario:     {preset: mmbench | scienceqa | pope}  or a field mapping:
                  {question: q, hint: h, options: choices | [A, B, C, D],
                   answer: answer, answer_type: index | letter | text,
                   image: image | null (text-only) | photo: <package photo id field>,
                   image_required: true (an empty image fails the doc), key: id,
                   group: index, group_modulo: 1000000, chance: 0.25,
                   missing_option: ["nan"] (strings that mean "no option" in an option
                   column, beside a null or blank cell; default none: "None" is an option)}
    instruction:  {query: "{hint}{question}\\nOptions: {options}", answer_prompt: "Answer:",
                   answer_template: "The answer is {option}"}
    inferencer:   direct | ppl | cot | multiturn
    answer_reader: chef (default) | lenient | strict — how Direct/CoT free text is read as an
                  option (:mod:`.readers`: ChEF's Answer_Extractor, or POPE_Metric for the
                  hallucination desideratum's yes/no; the package's own readers by name)
    desideratum:  accuracy (default) | calibration | in_context_learning |
                  instruction_following | robustness | hallucination |
                  language_performance — picks the metric family (chef/results.py)
    seed:         int (corruptions, shuffling, random in-context examples)
    variants:     list of {name, image: {corruption, severity}, text: {level, severity},
                  shuffle: true, verbalizer: <setting>, ice: {retriever, shots}};
                  default [{name: base}]
    judge_samples: int (language performance: judge calls per doc; 0 = none)
    scoring:      {copies: original | pooled, chance: preset | mean_options | <number>}

Each variant is one inference on the same document, so a desideratum's
relative metric (RRM, RIAM, match ratio) is computed inside one task run.

Continuations (what PPL scores, ChEF's desiderata recipes): ``answer_template``
with ``{option}`` = ``(A`` (ChEF's ``vqa_dataset.py``/``MMBench_dataset.py`` PPL
options, no closing parenthesis) or the verbalizer's label; ``{label}`` (A) and
``{text}`` (the option's text) are also available. An in-context example's answer is
the template with ``(A)``, as ChEF's ``gt_answers``.

``group`` names the field whose value ties rows that are copies of one
question (MMBench's CircularEval copies: the same question with its options
rotated, ``index + k * 1_000_000``); with ``group_modulo`` the group is the
field's integer value modulo it, as lmms-eval's ``mmbench_evals.py`` groups
them. In-context retrieval never returns a row of the question's own group,
and ``acc_circular`` (chef/results.py) scores a group 1 only when all its copies
are right. ``scoring.copies: original`` (the default, ChEF's) scores the relative
metrics on each group's original question (``id mod 1e6``: its smallest key),
``pooled`` on every copy (the payload's ``scoring.original`` says whether the row is
one). ``scoring.chance`` is the chance accuracy of RRM and
RIAM: the scenario's ``chance`` (ChEF's constants for its MMBench and ScienceQA),
else the mean of 1/#options over the scored documents.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.registry import lookup
from .corruptions import corrupt_image, corrupt_text, shuffle_options
from .readers import READERS
from .retrieval import RETRIEVERS, pool_doc, register_pool, retrieve
from .scenario import (
    LETTERS,
    PRESETS,
    Item,
    doc_image,
    is_original,
    normalize,
    scenario_spec,
)

__all__ = [
    "INFERENCERS",
    "PRESETS",
    "RETRIEVERS",
    "VERBALIZERS",
    "Item",
    "check",
    "normalize",
    "register_pool",
    "render",
    "retrieve",
    "visuals",
]

INFERENCERS = ("direct", "ppl", "cot", "multiturn")

# Instruction-following verbalizers: ChEF's OPTION_MAP settings that its eval_insfollow.py runs
# (natural 0-2, neutral 0-1, unnatural 0), label per option index. unnatural_rotated: option A
# must be answered "(B", B "(C", ... (ChEF rotates its "(A"-style PPL options by one).
VERBALIZERS: dict[str, Sequence[str] | None] = {
    "natural_numbers": ["1", "2", "3", "4", "5", "6", "7", "8"],
    "natural_roman": ["I", "II", "III", "IV", "V", "VI", "VII"],
    "natural_ordinals": ["first", "second", "third", "fourth", "fifth", "sixth"],
    "neutral_surnames": ["Smith", "Johnson", "Williams", "Jones", "Brown", "Davis", "Miller", "Wilson"],
    "neutral_words": ["foo", "dog", "hip", "oh", "cat", "lake", "river", "joy"],
    "unnatural_rotated": None,  # built from the letters per question
}
#: ChEF's verbalizer sentence, once per option, appended to the question
VERBALIZER_SENTENCE = 'If the answer is "({letter})", you need to output "{label}". '

DEFAULT_INSTRUCTION = {
    "query": "{hint}{question}\nOptions: {options}",
    "answer_prompt": "Answer:",
    # ChEF's VQA answer template 0 with its PPL option "(A" (instruction/template.py)
    "answer_template": "The answer is {option}",
}
COPIES = ("original", "pooled")
CHANCE_RULES = ("preset", "mean_options")


def _options_text(labels: Sequence[str], options: Sequence[str]) -> str:
    return " ".join(f"({lab}) {opt}" for lab, opt in zip(labels, options))


def _query(item: Item, options: Sequence[str], question: str, instruction: Mapping[str, Any]) -> str:
    labels = LETTERS[: len(options)]
    hint = f"{item.hint}\n" if item.hint else ""
    return instruction["query"].format(hint=hint, question=question, options=_options_text(labels, options))


def _verbalizer(name: str, n: int) -> list[str]:
    lookup(VERBALIZERS, name, "verbalizer")
    if name == "unnatural_rotated":
        return [f"({LETTERS[(i + 1) % n]}" for i in range(n)]
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


def _continuation(template: str, option: str, label: str, text: str) -> str:
    return template.format(option=option, label=label, text=text)


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


def scoring(recipe: Mapping[str, Any]) -> dict[str, Any]:
    """The recipe's scoring rules as the payload carries them: ``copies`` and ``chance``
    (a number, or None for the mean of 1/#options over the scored documents)."""
    rules = dict(recipe.get("scoring") or {})
    extra = set(rules) - {"copies", "chance"}
    if extra:
        raise ValueError(f"recipe scoring has unknown keys {sorted(extra)}; allowed ['chance', 'copies']")
    copies = rules.get("copies", "original")
    if copies not in COPIES:
        raise ValueError(f"recipe scoring.copies must be one of {COPIES}, got {copies!r}")
    chance = rules.get("chance", "preset")
    if chance == "preset":
        chance = scenario_spec(recipe).get("chance")
    elif chance == "mean_options":
        chance = None
    if chance is not None and (isinstance(chance, bool) or not isinstance(chance, numbers.Real) or not 0 <= chance < 1):
        raise ValueError(f"recipe scoring.chance must be {' or '.join(CHANCE_RULES)} or a number in [0, 1), "
                         f"got {chance!r}")
    return {"copies": copies, "chance": None if chance is None else float(chance)}


def check(recipe: Mapping[str, Any]) -> None:
    """Raise on what is wrong with ``recipe`` itself, whatever the doc: such an error is the
    same for every doc and stops the task, while :func:`render`'s other errors belong to one doc."""
    inferencer = recipe.get("inferencer", "multiturn")
    if inferencer not in INFERENCERS:
        raise ValueError(f"recipe inferencer must be one of {INFERENCERS}, got {inferencer!r}")
    from .results import FAMILIES

    lookup(FAMILIES, recipe.get("desideratum", "accuracy"), "recipe desideratum")
    if recipe.get("answer_reader", "chef") not in READERS:
        raise ValueError(f"recipe answer_reader must be one of {READERS}, got {recipe.get('answer_reader')!r}")
    spec = scenario_spec(recipe)
    if "fixed_options" not in spec and not isinstance(spec.get("options"), (str, Sequence)):
        raise ValueError("scenario mapping needs 'options' (a list field or a list of columns) or 'fixed_options'")
    if spec.get("answer_type", "index") not in ("index", "letter", "text"):
        raise ValueError(f"scenario answer_type must be index, letter or text, got {spec['answer_type']!r}")
    markers = spec.get("missing_option") or []
    if isinstance(markers, str) or not all(isinstance(m, str) for m in markers):
        raise ValueError(f"scenario missing_option must be a list of strings, got {markers!r}")
    modulo = spec.get("group_modulo")
    if spec.get("group") and modulo is not None and (not isinstance(modulo, int) or isinstance(modulo, bool) or modulo < 1):
        raise ValueError(f"scenario group_modulo must be a positive integer, got {modulo!r}")
    _instruction(recipe)
    _variants(recipe)
    scoring(recipe)


def _ice_prompt(doc, recipe, ice, seed, instr) -> tuple[list[str], int]:
    """The in-context examples of one variant (ChEF: each example's question, then the answer
    template with its ``(A)``) and how many images they add."""
    examples = []
    rows = retrieve(doc, recipe, ice.get("retriever", "random"), int(ice.get("shots", 1)), seed)
    for row in rows:
        ex = normalize(pool_doc(doc, row), recipe)
        letter = LETTERS[ex.gold]
        answer = _continuation(instr["answer_template"], f"({letter})", letter, ex.options[ex.gold])
        examples.append(f"{_query(ex, ex.options, ex.question, instr)}\n{answer}")
    return examples, len(rows)


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
        letters = list(LETTERS[: len(options)])
        labels, said = letters, [f"({x}" for x in letters]  # ChEF's PPL options "(A", "(B", ...
        if v.get("verbalizer"):
            labels = said = _verbalizer(v["verbalizer"], len(options))
            prompt += "\n" + "".join(VERBALIZER_SENTENCE.format(letter=x, label=lab) for x, lab in zip(letters, labels))
        vis: list[int] = []
        if v.get("ice"):
            examples, n_images = _ice_prompt(doc, recipe, v["ice"], seed, instr)
            vis += list(range(next_visual, next_visual + n_images))
            next_visual += n_images
            prompt = "\n\n".join([*examples, prompt])
        if v.get("image"):
            vis.append(next_visual)
            next_visual += 1
        else:
            vis.append(0)
        continuations = [_continuation(instr["answer_template"], s, lab, opt)
                         for s, lab, opt in zip(said, letters, options)]
        out.append({
            "name": v["name"], "prompt": prompt, "options": continuations, "labels": labels,
            "option_texts": options, "gold": gold, "visuals": vis,
        })
    # the chef model echoes "key", "group" and "scoring" into its response for process_results
    return {
        "chef": 1, "key": item.key, "group": item.group, "inferencer": inferencer, "desideratum": desideratum,
        # how the chef model reads a Direct/CoT answer; POPE's yes/no under the hallucination desideratum
        "answer_reader": recipe.get("answer_reader", "chef"), "pope": desideratum == "hallucination",
        "scoring": {**scoring(recipe), "original": is_original(doc, recipe)},
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
                    out.append(doc_image(pool_doc(doc, row), recipe))
                except ValueError as exc:
                    raise ValueError(f"in-context example (row {row}) of variant {v['name']!r}: {exc}") from exc
        if v.get("image"):
            c = v["image"]
            out.append(None if image is None else corrupt_image(image, c["corruption"], int(c.get("severity", 3)), seed, key))
    return out
