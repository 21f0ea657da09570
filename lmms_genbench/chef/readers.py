"""Reading a free-text answer (Direct and CoT inferencers) as one of a question's options.

A recipe names its reader with ``answer_reader`` (:data:`READERS`):

* ``chef`` (default): as ChEF's own metric code reads answers (OpenGVLab/LAMM ea571363,
  ``src/ChEF/metric``): multiple choice as ``Answer_Extractor.fetch_answer`` (``vqa.py``), the
  verbalizer labels of instruction following as ``Answer_Extractor_map`` and POPE's yes/no as
  ``POPE_Metric`` (``desiderata.py``). Re-implemented here from their behaviour, held to their
  verdicts on a recorded corpus (tests/support/data/parity/readers/).
* ``lenient``: the package's reader: exactly one option named, by its label anywhere in the reply
  ("(B)", "**B**", "答案：B。", "I pick B") or, when no label is named, by its text.
* ``strict``: the whole reply is one label or one option's text, give or take emphasis, brackets,
  a closing full stop and an "Answer:" / "The answer is" prefix.

The package's readers never take a letter from a negation ("Not C, it's A."), an article
("A two is shown, so D." reads D) or the first of several ("B and C", "both A and B"): such a reply
is unreadable, with its reason (:data:`REASONS`), and the results count it per reason.
Each reader returns ``(index, reason)``: the option's index and None, or -1 and why not.
ChEF's extractor may name a letter past the question's options (an "E" on a four-option
question); its index is returned as ChEF scores it: matched, and wrong.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["READERS", "REASONS", "chef_choice", "chef_label", "chef_pope", "lenient", "read_answer", "strict"]

READERS = ("chef", "lenient", "strict")
#: why a reply names no option: ChEF's extractor returned None; the reply names none; it negates
#: the label it names; it names several; (strict) it names one among other words
REASONS = ("chef_none", "no_option", "negation", "several_options", "not_alone")

# ---------------------------------------------------------------- ChEF (their order of rules)

_CHEF_LETTERS = "ABCDEFG"
#: (prefix, suffix) pairs ChEF's infer_option tries, in its order
_CHEF_AFFIXES = (("(", ")"), ("(", ")."), ("", "."), ("", ","), ("", ":"), ("", ")"), ("", ")."),
                 (":", ""), (":", ","), (":", "."), (":", ")"), (":", ")."))


def _chef_patterns(text: str) -> str | None:
    """ChEF's two patterns: the first "X." becomes "(X)", else the first "(X" becomes "(X)"."""
    m = re.search(r"[A-Z]\.", text)
    if m:
        return f"({m.group()[0]})"
    m = re.search(r"\([A-Z]", text)
    return m.group() + ")" if m else None


def _chef_preprocess(text: str) -> str:
    text = text.split("###")[0].split("Assistant:")[-1].strip()
    return _chef_patterns(text) or text


def _chef_option(text: str) -> str | None:
    tokens = [x.strip() for x in text.split()]
    bare = [c for c in _CHEF_LETTERS if c in tokens]
    # ChEF distrusts a lone "A" among three or more words (it may be the article)
    if len(bare) == 1 and ("A" not in tokens or len(tokens) < 3):
        return bare[0]
    for prefix, suffix in _CHEF_AFFIXES:
        found = [c for c in _CHEF_LETTERS if prefix + c + suffix in tokens]
        if len(found) == 1:
            return found[0]
    return None


def chef_choice(text: str, option_texts: Sequence[str]) -> tuple[int, str | None]:
    """ChEF's ``Answer_Extractor(content_only=False).fetch_answer``: a letter found by its
    patterns and token rules, else the reply equal to an option's text, else the only option
    whose text (lower-cased) the reply contains."""
    text = _chef_preprocess(text)
    letter = _chef_option(text)
    if letter is None and text in option_texts:
        letter = _CHEF_LETTERS[list(option_texts).index(text)]
    if letter is None:
        lowered = text.lower()
        found = [_CHEF_LETTERS[i] for i, o in enumerate(option_texts[: len(_CHEF_LETTERS)]) if str(o).lower() in lowered]
        letter = found[0] if len(found) == 1 else None
    return (-1, "chef_none") if letter is None else (_CHEF_LETTERS.index(letter), None)


def chef_label(text: str, labels: Sequence[str]) -> tuple[int, str | None]:
    """ChEF's ``Answer_Extractor_map.fetch_answer`` (instruction following): the verbalizer label
    the reply names as a token, bare (a bare "A" not trusted) or with ChEF's affixes; a label
    found twice or two labels with one affix name none."""
    cleaned = text.split("###")[0].split("Assistant:")[-1].strip()
    # ChEF strips these as character sets ("1s" loses its "s"), so do we
    cleaned = cleaned.strip("<>/s").strip("<>/Igm").strip()
    text = _chef_patterns(cleaned) or text  # ChEF goes on with the raw reply when no pattern fits
    tokens = [x.strip() for x in text.split()]

    def unique(prefix: str, suffix: str) -> str | None:
        hit = None
        for label in labels:
            if prefix + label + suffix in tokens:
                if hit is not None:
                    return None
                hit = label
        return hit

    bare = unique("", "")
    if bare is not None and bare != "A":
        return list(labels).index(bare), None
    for prefix, suffix in _CHEF_AFFIXES:
        hit = unique(prefix, suffix)
        if hit is not None:
            return list(labels).index(hit), None
    return -1, "chef_none"


def chef_pope(text: str, option_texts: Sequence[str]) -> tuple[int, str | None]:
    """ChEF's ``POPE_Metric``: the first sentence's space-separated words, commas dropped; "No",
    "no" or "not" among them reads no, anything else (an empty reply, "NO.") yes."""
    if "." in text:
        text = text.split(".")[0]
    words = text.replace(",", "").split(" ")
    said_no = "No" in words or "not" in words or "no" in words
    lowered = [o.strip().lower() for o in option_texts]
    return lowered.index("no" if said_no else "yes"), None


def is_yes_no(option_texts: Sequence[str]) -> bool:
    return sorted(o.strip().lower() for o in option_texts) == ["no", "yes"]


# ---------------------------------------------------------------- the package's readers

#: a negation up to two words before a mention, in the same clause ("not C", "isn't the C", "not **C**")
_NEGATION = re.compile(r"(?:\bnot|\bno|n't|\bnever|\bexcept|\brather than|\binstead of)\s+(?:[\w'’]+\s+){0,2}[*_(\[\s]*$",
                       re.IGNORECASE)
#: words after a capital "A" that make it option A, not the article ("A is right", "A because ...")
_A_AS_LABEL = frozenset(["is", "was", "would", "will", "should", "seems", "appears", "looks", "fits", "matches", "best",
                         "correctly", "because", "since", "as", "and", "or", "but", "nor", "then", "so", "not", "being",
                         "describes", "shows", "answers", "it"])


def _mentions(text: str, needle: str, case: bool) -> list[int]:
    flags = 0 if case else re.IGNORECASE
    # an ASCII label or text is a word of its own beside Chinese characters too ("答案是C")
    edge = r"[A-Za-z0-9_]" if needle.isascii() else r"\w"
    return [m.start() for m in re.finditer(rf"(?<!{edge}){re.escape(needle)}(?!{edge})", text, flags)]


def _is_article(text: str, at: int) -> bool:
    """A capital "A" followed by a lower-case word or a number it does not govern as a label:
    "A two is shown", "A 2 is shown"."""
    if at > 0 and text[at - 1] in "([{*'\"":
        return False
    m = re.match(r"A[ \t]+([a-z]+|[0-9])", text[at:])
    return bool(m) and m.group(1) not in _A_AS_LABEL


def _named(text: str, needles: Sequence[str], case_of) -> tuple[set[int], set[int]]:
    """The indices ``text`` names (not as an article) and those it names only after a negation."""
    named, negated = set(), set()
    spans = []
    for i, needle in enumerate(needles):
        if not needle.strip():
            continue
        for at in _mentions(text, needle.strip(), case_of(needle)):
            spans.append((at, at + len(needle.strip()), i))
    for at, end, i in spans:
        # an option text inside a longer one's mention ("red" in "dark red") is not named
        if any(a <= at and end <= e and (e - a) > (end - at) for a, e, _ in spans):
            continue
        if needles[i].strip() == "A" and _is_article(text, at):
            continue
        (negated if _NEGATION.search(text[:at]) else named).add(i)
    return named, negated


def _single_letter_case(label: str) -> bool:
    return len(label) == 1  # "B" is case-sensitive, "Smith" and "first" are not


def lenient(text: str, labels: Sequence[str], option_texts: Sequence[str]) -> tuple[int, str | None]:
    """The one option the reply names: by label if it names any, else by option text."""
    text = (text or "").strip()
    for needles, case_of in ((labels, _single_letter_case), (option_texts, lambda _: False)):
        named, negated = _named(text, needles, case_of)
        if negated:
            return -1, "negation"
        if len(named) > 1:
            return -1, "several_options"
        if named:
            return named.pop(), None
    return -1, "no_option"


_PREFIX = re.compile(r"^(?:(?:the\s+)?(?:correct\s+)?answer(?:\s+is)?\s*[:：]?|option)\s*", re.IGNORECASE)


def strict(text: str, labels: Sequence[str], option_texts: Sequence[str]) -> tuple[int, str | None]:
    """The reply is one label or one option text and nothing else (emphasis, brackets, a closing
    full stop and an answer prefix aside)."""
    core = re.sub(r"[*_`]", "", (text or "").strip())
    core = _PREFIX.sub("", core).strip()
    core = core.rstrip(".。:：").strip()
    while len(core) > 1 and core[0] + core[-1] in ("()", "[]", "{}", '""', "''"):
        core = core[1:-1].strip()
    for i, label in enumerate(labels):
        if core in (label, label + ")"):
            return i, None
    for i, option in enumerate(option_texts):
        if option.strip() and core.lower() == option.strip().lower():
            return i, None
    pred, reason = lenient(text, labels, option_texts)
    return -1, reason if pred < 0 else "not_alone"


def read_answer(text: str, labels: Sequence[str], option_texts: Sequence[str], reader: str = "chef",
                pope: bool = False) -> tuple[int, str | None]:
    """Read ``text`` with ``reader``; ``pope``: a yes/no hallucination question (ChEF's
    ``POPE_Metric`` under ``chef``). Letters ``labels`` are ChEF's A, B, ...; any other labels
    are a verbalizer's (ChEF's ``Answer_Extractor_map``)."""
    text = "" if text is None else str(text)
    if reader == "chef":
        if pope and is_yes_no(option_texts):
            return chef_pope(text, option_texts)
        if list(labels) != list(_CHEF_LETTERS[: len(labels)]):
            return chef_label(text, labels)
        return chef_choice(text, option_texts)
    if reader == "lenient":
        return lenient(text, labels, option_texts)
    if reader == "strict":
        return strict(text, labels, option_texts)
    raise ValueError(f"answer_reader must be one of {READERS}, got {reader!r}")
