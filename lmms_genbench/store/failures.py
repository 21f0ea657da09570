"""Answers that are failures dressed as text.

lmms-eval 0.7.3's API model classes answer a failed request with a marker text instead of
raising (read in its sources: ``models/chat/openai.py``, ``models/simple/openai.py``,
``models/chat/async_openai.py``, ``models/{chat,simple}/gemini.py``,
``models/simple/generation_api.py`` and the diffusers world-model classes). Such a text must
never be stored, drawn or scored as a description: the engine fails the hop with the marker's
reason, stores nothing, and a rerun asks again.
"""

from __future__ import annotations

import re

__all__ = ["failure_marker", "failure_reason"]

# each marker opens the answer; the text after it is the endpoint's reason
_MARKERS = re.compile(
    r"^\s*\[(LMMS_EVAL_REQUEST_FAILED[^\]]*|LMMS_EVAL_BUDGET_EXCEEDED|GENERATION_FAILED|SAFETY_BLOCKED:[^\]]*)\]"
)
# what each marker says, in words (the marker itself is never repeated into reports)
_WORDS = (("LMMS_EVAL_REQUEST_FAILED", "the request failed"), ("LMMS_EVAL_BUDGET_EXCEEDED", "the API budget is spent"),
          ("GENERATION_FAILED", "generation failed"), ("SAFETY_BLOCKED:", "blocked by a safety filter:"))


def failure_marker(text: str) -> str | None:
    """The failure marker ``text`` opens with (``LMMS_EVAL_REQUEST_FAILED after 5 retries``), or None."""
    match = _MARKERS.match(text) if isinstance(text, str) else None
    return match.group(1) if match else None


def failure_reason(text: str) -> str | None:
    """The failure ``text`` reports, in words and with the endpoint's own reason
    (``the request failed after 5 retries: Error code: 500 - ...``), or None if it is none."""
    match = _MARKERS.match(text) if isinstance(text, str) else None
    if not match:
        return None
    marker, rest = match.group(1), " ".join(text[match.end():].split())
    words = next(f"{w} {marker[len(m):].strip()}".strip() for m, w in _WORDS if marker.startswith(m))
    return f"{words}: {rest[:300]}" if rest else words
