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

__all__ = ["failure_marker"]

# each marker opens the answer; the text after it is the endpoint's reason
_MARKERS = re.compile(
    r"^\s*\[(LMMS_EVAL_REQUEST_FAILED[^\]]*|LMMS_EVAL_BUDGET_EXCEEDED|GENERATION_FAILED|SAFETY_BLOCKED:[^\]]*)\]"
)


def failure_marker(text: str) -> str | None:
    """The failure marker ``text`` opens with (``LMMS_EVAL_REQUEST_FAILED after 5 retries``), or None."""
    match = _MARKERS.match(text) if isinstance(text, str) else None
    return match.group(1) if match else None
