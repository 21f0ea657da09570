"""Secrets never reach a log line, a report or the store: :func:`scrub` masks them in text."""

from __future__ import annotations

import os
import re

__all__ = ["scrub"]

MASK = "***"
# variables whose values are credentials (OPENAI_API_KEY, HF_TOKEN, ...)
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
# credentials by shape, for keys that never were in this process's environment
_SECRET_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|hf_[A-Za-z0-9]{8,}|(?<=Bearer )[A-Za-z0-9_.\-=]{8,}"
    r"|(?<=api[_-]key=)[^&\s'\"]{8,}|(?<=key=)[A-Za-z0-9_\-]{16,})",
    re.IGNORECASE,
)


def scrub(text: str) -> str:
    """``text`` with every credential masked: the values of environment variables named like
    keys or tokens (at least 8 characters), and strings shaped like API keys."""
    for name, value in os.environ.items():
        if len(value) >= 8 and _SECRET_NAME.search(name) and value in text:
            text = text.replace(value, MASK)
    return _SECRET_SHAPES.sub(MASK, text)
