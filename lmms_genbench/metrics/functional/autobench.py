"""AutoBench-V scoring: ``[[X]]`` answer extraction and accuracy breakdowns.

:func:`extract_choice` reads the letter of the paper's answer template
(Figure 26) and the usual variants; an answer it cannot read is wrong and
counted. :class:`AccuracyStats` keeps only counts, so it streams and merges.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping

LETTERS = "ABCD"

# [[B]], [[ b ]], [[B. text]], [B] - the template and its near misses
_BRACKETED = re.compile(r"\[\[\s*([A-Da-d])\s*(?:[.:)][^\]]*)?\]\]")
_SINGLE = re.compile(r"(?<!\[)\[\s*([A-Da-d])\s*\](?!\])")
_BARE = re.compile(r"^\W*([A-Da-d])\W*$")
_LEADING = re.compile(r"^\s*\(?([A-D])[.):]\s")
_ANSWER_IS = re.compile(r"\b(?i:answer)\s*(?:is|:)\s*\(?([A-D])\b(?![a-z])")


def extract_choice(text: str | None) -> str | None:
    """The chosen letter A-D, or None when the response names none unambiguously.

    Accepted: ``[[B]]`` anywhere (any case, inner spaces, ``[[B]].`` in prose,
    ``[[B. text]]``); ``[B]``; a bare letter as the only content (``B``,
    ``(b)``, ``B.``); a leading ``B.``/``B)`` option label; "answer is B".
    Two different bracketed letters are ambiguous -> None.
    """
    if not text:
        return None
    t = str(text).strip()
    found = _BRACKETED.findall(t)
    if not found:
        found = _SINGLE.findall(t)
    if found:
        letters = {x.upper() for x in found}
        return letters.pop() if len(letters) == 1 else None
    for rx in (_BARE, _LEADING, _ANSWER_IS):
        m = rx.search(t)
        if m:
            return m.group(1).upper()
    return None


def score_record(response: str | None, answer: str, level: str, aspect: str, capability: str) -> dict:
    """The small per-doc record the task keeps (everything aggregation needs)."""
    pred = extract_choice(response)
    return {"correct": int(pred == answer), "parsed": int(pred is not None), "pred": pred or "",
            "answer": answer, "level": level, "aspect": aspect, "capability": capability}


class AccuracyStats:
    """Counts of correct / total per key; mergeable."""

    def __init__(self) -> None:
        self.n = 0
        self.correct = 0
        self.unparsed = 0
        self.by: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.pred_letters: dict[str, int] = {x: 0 for x in LETTERS}

    def add(self, rec: Mapping) -> None:
        c = int(rec["correct"])
        self.n += 1
        self.correct += c
        self.unparsed += 1 - int(rec["parsed"])
        if rec.get("pred"):
            self.pred_letters[rec["pred"]] += 1
        for key in (f"level:{rec['level']}", f"aspect:{rec['aspect']}", f"capability:{rec['capability']}"):
            self.by[key][0] += c
            self.by[key][1] += 1

    def merge(self, other: AccuracyStats) -> AccuracyStats:
        self.n += other.n
        self.correct += other.correct
        self.unparsed += other.unparsed
        for k, (c, n) in other.by.items():
            self.by[k][0] += c
            self.by[k][1] += n
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

    def breakdown(self) -> dict[str, float | int]:
        """``{"acc_<kind>:<name>": acc, "n_<kind>:<name>": n}`` for every key seen."""
        out: dict[str, float | int] = {}
        for key in sorted(self.by):
            c, n = self.by[key]
            out[f"acc_{key}"] = c / n
            out[f"n_{key}"] = n
        return out


def deviation_rate(score_x: float, score_uniform: float) -> float:
    """§4.6: R = (S_X - S_U) / S_U for answers all at X vs evenly spread."""
    return (score_x - score_uniform) / score_uniform if score_uniform else float("nan")
