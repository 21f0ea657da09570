"""AutoBench-V scoring: ``[[X]]`` answer extraction and accuracy breakdowns.

:func:`extract_choice` reads the letter of the paper's answer template
(Figure 26) and the usual variants; an answer it cannot read is wrong and
counted. :class:`AccuracyStats` keeps only counts, so it streams and merges.

The authors' code (``process/pipeline.py`` ``extract_choice``) takes the *first* ``[[...]]``
of the reply and scores it right only when its content equals the gold letter:
:func:`authors_choice` is that rule and ``acc_strict`` its accuracy, overall and per level
(``[[A]] or [[D]]`` reads A; ``[[ANSWER]] [[A]]``, ``[[b]] i.e. [[B]]`` and ``[[[C]]]`` are
wrong). ``acc`` reads answers a describer formats otherwise too, so every record says which
rule read it (:data:`EXTRACTION_RULES`, first to last) and :class:`AccuracyStats` counts them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from .intervals import bootstrap_interval

LETTERS = "ABCD"

# [[B]], [[ b ]], [[B. text]], [B] - the template and its near misses
_BRACKETED = re.compile(r"\[\[\s*([A-Da-d])\s*(?:[.:)][^\]]*)?\]\]")
_SINGLE = re.compile(r"(?<!\[)\[\s*([A-Da-d])\s*\](?!\])")
_BARE = re.compile(r"^\W*([A-Da-d])\W*$")
_LEADING = re.compile(r"^\s*\(?([A-D])[.):]\s")
_ANSWER_IS = re.compile(r"\b(?i:answer)\s*(?:is|:)\s*\(?([A-D])\b(?![a-z])")
# the paper's template exactly: an upper-case letter between double brackets, nothing else
_STRICT = re.compile(r"\[\[([A-D])\]\]")
# the authors' extract_choice: the first double-bracketed span, lazily, on one line
_AUTHORS = re.compile(r"\[\[(.*?)\]\]")

#: the rules that read a letter, in the order they are tried (see :func:`extract_choice_by_rule`)
EXTRACTION_RULES = ("strict", "bracket_variant", "single_bracket", "bare_letter", "option_label", "answer_is")


def extract_choice_by_rule(text: str | None) -> tuple[str | None, str | None]:
    """``(letter, rule)``: the chosen letter A-D and the name of the rule in
    :data:`EXTRACTION_RULES` that read it, or ``(None, None)`` when the response names
    none unambiguously.

    Rules, first to last: ``strict``, the paper's ``[[B]]`` exactly; ``bracket_variant``,
    double brackets otherwise (any case, inner spaces, ``[[B. text]]``); ``single_bracket``,
    ``[B]``; ``bare_letter``, a letter as the only content (``B``, ``(b)``, ``B.``);
    ``option_label``, a leading ``B.``/``B)``; ``answer_is``, "answer is B" / "Answer: B".
    Two different bracketed letters are ambiguous -> ``(None, None)``.
    """
    if not text:
        return None, None
    t = str(text).strip()
    found, rule = _BRACKETED.findall(t), "bracket_variant"
    if not found:
        found, rule = _SINGLE.findall(t), "single_bracket"
    if found:
        letters = {x.upper() for x in found}
        if len(letters) != 1:
            return None, None
        letter = letters.pop()
        # strict: the authors' exact match reads the same letter (one [[B]] suffices)
        return letter, "strict" if letter in _STRICT.findall(t) else rule
    for rule, rx in (("bare_letter", _BARE), ("option_label", _LEADING), ("answer_is", _ANSWER_IS)):
        m = rx.search(t)
        if m:
            return m.group(1).upper(), rule
    return None, None


def authors_choice(text: str | None) -> str | None:
    """The content of the reply's first ``[[...]]`` as the authors' ``extract_choice`` reads it
    (not upper-cased, not stripped), or None when there is none. ``acc_strict`` counts a reply
    right only when this equals the gold letter."""
    m = _AUTHORS.search(str(text)) if text else None
    return m.group(1) if m else None


def extract_choice(text: str | None) -> str | None:
    """The chosen letter A-D, or None when the response names none unambiguously
    (the rules of :func:`extract_choice_by_rule`)."""
    return extract_choice_by_rule(text)[0]


def score_record(response: str | None, answer: str, level: str, aspect: str, capability: str) -> dict:
    """The small per-doc record the task keeps (everything aggregation needs)."""
    pred, rule = extract_choice_by_rule(response)
    return {"correct": int(pred == answer), "parsed": int(pred is not None), "pred": pred or "",
            "rule": rule or "", "correct_strict": int(authors_choice(response) == answer),
            "answer": answer, "level": level, "aspect": aspect, "capability": capability}


class AccuracyStats:
    """Counts of correct / total per key, and of answers per extraction rule; mergeable.

    ``by_rule[rule]`` counts the answers each rule of :data:`EXTRACTION_RULES` read and
    ``correct_strict`` (also per key, ``by_strict``) the replies right by the authors' rule
    (:func:`authors_choice`), so :meth:`acc_strict` is the authors' accuracy.
    """

    def __init__(self) -> None:
        self.n = 0
        self.correct = 0
        self.unparsed = 0
        self.correct_strict = 0
        self.by: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.by_strict: dict[str, int] = defaultdict(int)
        self.pred_letters: dict[str, int] = {x: 0 for x in LETTERS}
        self.by_rule: dict[str, int] = {r: 0 for r in EXTRACTION_RULES}

    def add(self, rec: Mapping) -> None:
        c = int(rec["correct"])
        self.n += 1
        self.correct += c
        self.unparsed += 1 - int(rec["parsed"])
        if rec.get("pred"):
            self.pred_letters[rec["pred"]] += 1
        rule = rec.get("rule")
        if rule:
            if rule not in self.by_rule:
                raise ValueError(f"record rule must be one of {EXTRACTION_RULES} or empty, got {rule!r}")
            self.by_rule[rule] += 1
        # records written before the authors' rule was kept have no correct_strict: 0
        strict = int(rec.get("correct_strict", 0))
        self.correct_strict += strict
        for key in (f"level:{rec['level']}", f"aspect:{rec['aspect']}", f"capability:{rec['capability']}"):
            self.by[key][0] += c
            self.by[key][1] += 1
            self.by_strict[key] += strict

    def merge(self, other: AccuracyStats) -> AccuracyStats:
        self.n += other.n
        self.correct += other.correct
        self.unparsed += other.unparsed
        self.correct_strict += other.correct_strict
        for rule, n in other.by_rule.items():
            self.by_rule[rule] += n
        for k, (c, n) in other.by.items():
            self.by[k][0] += c
            self.by[k][1] += n
        for k, c in other.by_strict.items():
            self.by_strict[k] += c
        for x, n in other.pred_letters.items():
            self.pred_letters[x] += n
        return self

    @classmethod
    def of(cls, records: Iterable[Mapping]) -> AccuracyStats:
        s = cls()
        for r in records:
            s.add(r)
        return s

    def acc(self, key: str | None = None) -> float:
        """Accuracy overall or for ``level:easy`` / ``aspect:<name>`` / ``capability:<name>``;
        NaN when no doc has that key."""
        if key is None:
            return self.correct / self.n if self.n else float("nan")
        c, n = self.by.get(key, (0, 0))
        return c / n if n else float("nan")

    def acc_strict(self, key: str | None = None) -> float:
        """The authors' accuracy (first ``[[...]]`` equals the gold letter), overall or for a
        key as :meth:`acc`; NaN when no doc has that key."""
        if key is None:
            return self.correct_strict / self.n if self.n else float("nan")
        n = self.by.get(key, (0, 0))[1]
        return self.by_strict.get(key, 0) / n if n else float("nan")

    def breakdown(self) -> dict[str, float | int]:
        """``{"acc_<kind>:<name>": acc, "n_<kind>:<name>": n}`` for every key seen."""
        out: dict[str, float | int] = {}
        for key in sorted(self.by):
            c, n = self.by[key]
            out[f"acc_{key}"] = c / n
            out[f"n_{key}"] = n
        return out


def accuracy_interval(records: Sequence[Mapping], level: str | None = None, n_resamples: int = 1000,
                      seed: int = 0) -> dict:
    """Percentile bootstrap interval over docs (:mod:`.intervals`) of the accuracy of
    ``records``, or of those of one ``level`` (``"easy"``...: the level's docs resampled on
    their own, as its accuracy is their mean); ``stderr`` is lmms-eval's ``acc*_stderr``."""
    columns = {"correct": [float(r["correct"]) for r in records], "level": [str(r["level"]) for r in records]}
    spec = ({"kind": "mean", "column": "correct"} if level is None
            else {"kind": "macro", "column": "correct", "by": "level", "members": [level]})
    if not records:
        return {"low": None, "high": None, "stderr": None, "reason": "no doc"}
    return bootstrap_interval(columns, spec, n_resamples, seed=seed)


def deviation_rate(score_x: float, score_uniform: float) -> float:
    """§4.6: R = (S_X - S_U) / S_U for answers all at X vs evenly spread."""
    return (score_x - score_uniform) / score_uniform if score_uniform else float("nan")
