"""Parse and validate examiner outputs; every failure is a typed reason.

Each ``parse_*`` returns the parsed value or raises :class:`ParseError` whose
``reason`` is one of :data:`REASONS`, so the build can retry, then drop the
item and count it under that reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

LETTERS = ("A", "B", "C", "D")

REASONS = (
    "no_json",            # no JSON object in the text
    "broken_json",        # an object was started but does not parse
    "missing_field",      # a required field is absent or empty
    "wrong_option_count", # not exactly four options A-D
    "duplicate_options",  # two options say the same
    "answer_not_in_options",
    "too_few_aspects",
    "no_description",
    "no_guidance",
    "no_questions",
    "unclear_yes_no",
)


class ParseError(ValueError):
    def __init__(self, reason: str, detail: str = "") -> None:
        assert reason in REASONS, reason
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def _strip_fences(text: str) -> str:
    return re.sub(r"```(?:json)?", "", text)


def extract_json(text: str) -> dict:
    """The first JSON object in ``text`` (code fences and prose around it allowed)."""
    s = _strip_fences(text or "")
    start = s.find("{")
    if start < 0:
        raise ParseError("no_json")
    decoder = json.JSONDecoder()
    for i in range(start, len(s)):
        if s[i] != "{":
            continue
        try:
            obj, _ = decoder.raw_decode(s, i)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    raise ParseError("broken_json", s[start:start + 80])


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split()).rstrip(".")


@dataclass(frozen=True)
class Question:
    question: str
    options: tuple[str, str, str, str]
    answer: str  # "A".."D"


def parse_qa(text: str) -> Question:
    """Figure 25's JSON: question, options A-D, reference_answer."""
    obj = extract_json(text)
    q = str(obj.get("question") or "").strip()
    if not q:
        raise ParseError("missing_field", "question")
    opts = obj.get("options")
    if isinstance(opts, list):
        opts = {LETTERS[i]: v for i, v in enumerate(opts[:5])} if len(opts) <= 4 else {"E": 1}
    if not isinstance(opts, dict) or not opts:
        raise ParseError("missing_field", "options")
    opts = {str(k).strip().strip(".").upper(): v for k, v in opts.items()}
    if sorted(opts) != list(LETTERS):
        raise ParseError("wrong_option_count", ",".join(sorted(opts)))
    values = tuple(str(opts[x] or "").strip() for x in LETTERS)
    if not all(values):
        raise ParseError("missing_field", "empty option")
    if len({_norm(v) for v in values}) < 4:
        raise ParseError("duplicate_options")
    raw = str(obj.get("reference_answer") or obj.get("answer") or "").strip()
    if not raw:
        raise ParseError("missing_field", "reference_answer")
    answer = _answer_letter(raw, values)
    if answer is None:
        raise ParseError("answer_not_in_options", raw[:40])
    return Question(q, values, answer)  # type: ignore[arg-type]


# a second option letter offered as an alternative: "A or B", "A/B", "[[A]] or [[D]]", "A, B"
_ALTERNATIVE = re.compile(r"(?:\bor\b|\band\b|/|,|;)\s*[\[\(]*\s*[A-D]\b")


def _answer_letter(raw: str, values: tuple[str, ...]) -> str | None:
    """The reference answer's letter, or None (retried) when it names none or offers several
    ("A or B", the template's own placeholder "A or B or C or D")."""
    m = re.fullmatch(r"[\[\(]*\s*([A-Da-d])\s*[\]\)]*[.:)]?(?:\s.*)?", raw, flags=re.DOTALL)
    if m:
        return None if _ALTERNATIVE.search(raw[m.end(1):]) else m.group(1).upper()
    for letter, v in zip(LETTERS, values):
        if _norm(raw) == _norm(v):
            return letter
    return None


@dataclass(frozen=True)
class Aspect:
    general: str
    name: str
    introduction: str


_LABEL = re.compile(
    r"^\W*(general aspect|fine[d]?[- ]grained aspect|introduction)\W*:\s*(.*)$", re.IGNORECASE
)


def parse_aspects(text: str, n_general: int, m_fine: int) -> list[Aspect]:
    """Figure 22's line format; keeps the first ``n × m`` aspects in order.

    Raises ``too_few_aspects`` unless ``n`` general aspects with ``m``
    fine-grained aspects each (with introductions) are present.
    """
    general = None
    groups: dict[str, list[Aspect]] = {}
    pending: str | None = None
    for line in (text or "").splitlines():
        m = _LABEL.match(line.strip().replace("*", ""))
        if not m:
            continue
        label, value = m.group(1).lower(), m.group(2).strip()
        if label.startswith("general"):
            general = value or None
            if general:
                groups.setdefault(general, [])
        elif label.startswith("fine"):
            pending = value or None
        elif pending and general:
            if value:
                groups[general].append(Aspect(general, pending, value))
            pending = None
    full = [g for g, fine in groups.items() if len({a.name.lower() for a in fine}) >= m_fine]
    if len(full) < n_general:
        found = sum(len(v) for v in groups.values())
        raise ParseError("too_few_aspects", f"{len(full)} complete general aspects, {found} fine-grained")
    out: list[Aspect] = []
    for g in full[:n_general]:
        seen: set[str] = set()
        for a in groups[g]:
            if a.name.lower() not in seen and len(seen) < m_fine:
                seen.add(a.name.lower())
                out.append(a)
    return out


def _unemphasize(text: str) -> str:
    """``text`` without markdown emphasis markers (``**Topic word:** park`` -> ``Topic word: park``)."""
    return re.sub(r"(\*{1,3}|_{2,3})", "", text or "")


def _after_label(text: str, label: str, one_line: bool = False) -> str | None:
    """What follows ``label:`` up to the next label (or, ``one_line``, to the end of its line,
    as the authors read the topic and key words)."""
    m = re.search(rf"^\W*{label}\W*:[ \t]*(.*?)(?=^\W*[A-Z][A-Za-z -]{{1,20}}:|\Z)", _unemphasize(text), re.IGNORECASE | re.MULTILINE | re.DOTALL)
    if not m:
        return None
    value = m.group(1).strip().split("\n", 1)[0] if one_line else m.group(1)
    return " ".join(value.split())


def parse_guideline(text: str) -> str:
    g = _after_label(text, "guidance")
    if not g:
        raise ParseError("no_guidance")
    return g


@dataclass(frozen=True)
class Description:
    prompt: str
    topic: str
    keywords: tuple[str, ...]


def parse_description(text: str) -> Description:
    """Figure 24's ``Prompt:`` / ``Topic word:`` / ``Key word:`` lines (markdown emphasis
    such as ``**Topic word:** park`` is dropped: the topic is ``park``)."""
    prompt = _after_label(text, "prompt")
    if not prompt or prompt.startswith("["):
        raise ParseError("no_description")
    topic = _after_label(text, "topic words?", one_line=True) or ""
    kws = _after_label(text, "key ?words?", one_line=True) or ""
    keywords = tuple(k.strip(" .[]\"'") for k in re.split(r"[,;]", kws) if k.strip(" .[]\"'"))
    if not topic.strip(" .[]") or not keywords:
        raise ParseError("missing_field", "topic word or key words")
    return Description(prompt, topic.strip(" .[]\"'"), keywords)


def parse_validation_questions(text: str, limit: int) -> list[str]:
    obj = extract_json(text)
    qs = obj.get("questions")
    if not isinstance(qs, list):
        raise ParseError("missing_field", "questions")
    out = list(dict.fromkeys(str(q).strip() for q in qs if str(q).strip()))
    if not out:
        raise ParseError("no_questions")
    return out[:limit]


#: how a self-validation answer is read (BuildConfig.yes_no_reader)
YES_NO_READERS = ("package", "authors")
# "yes" and "no" offered together ("yes or no", "Yes and no", "yes/no", "Yes. No.")
_BOTH = re.compile(r"\b(yes|no)\b[\s,;/.]*(?:(?:or|and)\b[\s,;/.]*)?\b(?!\1\b)(yes|no)\b")
# a negation in the same clause, up to two words before: "not yes", "cannot say yes"
_NEGATED = re.compile(r"(?:\bnot|n't|\bcannot|\bnever)\s+(?:[a-z']+\s+){0,2}(?:yes|no)\b")


def parse_yes_no(text: str, reader: str = "package") -> bool:
    """Yes or no.

    ``package``: the answer's first word when it is one, else the only one of the two the
    answer uses; "yes" and "no" offered together ("yes or no", "Yes and no", "yes/no") or a
    negated one ("Not yes", "I cannot say yes") raise ``unclear_yes_no``, as does "maybe".
    ``authors``: AutoBench-V's ``tools/tifa.py``: the reply, stripped and without a leading
    ``"answer: "``, must be exactly the answer ("yes"/"no"); anything else ("Yes", "yes.")
    raises ``unclear_yes_no`` (their code counts it as a failed check).
    """
    if reader == "authors":
        said = (text or "").strip()
        said = said[len("answer: "):].strip() if said.startswith("answer: ") else said
        if said not in ("yes", "no"):
            raise ParseError("unclear_yes_no", (text or "")[:40])
        return said == "yes"
    if reader != "package":
        raise ValueError(f"yes/no reader must be one of {YES_NO_READERS}, got {reader!r}")
    lowered = (text or "").lower()
    if _BOTH.search(lowered) or _NEGATED.search(lowered):
        raise ParseError("unclear_yes_no", (text or "")[:40])
    words = re.findall(r"[a-z]+", lowered)
    if words and words[0] in ("yes", "no"):
        return words[0] == "yes"
    said = {w for w in words if w in ("yes", "no")}
    if len(said) != 1:
        raise ParseError("unclear_yes_no", (text or "")[:40])
    return said.pop() == "yes"
