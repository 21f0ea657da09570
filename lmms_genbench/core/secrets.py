"""Secrets never reach a log line, a report or the store: :func:`scrub` masks them in text.

Besides the environment's keys, a key given in ``--model_args`` (``describer.api_key=sk-...``,
``token=...``: a key whose last part names a secret, :func:`secret_args`) is masked: by value
once :func:`remember` has it, and by name in a ``--model_args`` string (:func:`mask_model_args`)."""

from __future__ import annotations

import os
import re

from . import state

__all__ = ["MASK", "mask_model_args", "remember", "scrub", "secret_args"]

MASK = "***"
# variables whose values are credentials (OPENAI_API_KEY, HF_TOKEN, ...)
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
# credentials by shape, for keys that never were in this process's environment
_SECRET_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|hf_[A-Za-z0-9]{8,}|(?<=Bearer )[A-Za-z0-9_.\-=]{8,}"
    r"|(?<=api[_-]key=)[^&\s'\"]{8,}|(?<=key=)[A-Za-z0-9_\-]{16,})",
    re.IGNORECASE,
)


# a --model_args key whose value is a secret: its last part (after a dot) is, or ends in _, one of these
_SECRET_ARG = re.compile(r"(?:^|[._])(?:api_?key|key|token|secret|password|passwd|credentials?)$", re.IGNORECASE)
# one key=value of a --model_args string (lmms-eval splits it on commas)
_ARG = re.compile(r"(^|,)(\s*)([^=,]+?)(\s*)=([^,]*)")


def secret_args(model_args: str) -> dict[str, str]:
    """The ``key: value`` pairs of a ``--model_args`` string whose key names a secret
    (``api_key``, ``describer.api_key``, ``token``, ``hf_token``; not ``max_new_tokens``)."""
    return {m.group(3): m.group(5) for m in _ARG.finditer(model_args or "")
            if _SECRET_ARG.search(m.group(3)) and m.group(5).strip()}


def mask_model_args(model_args: str) -> str:
    """``model_args`` with the value of every secret key (:func:`secret_args`) masked."""
    def one(m: re.Match) -> str:
        if not (_SECRET_ARG.search(m.group(3)) and m.group(5).strip()):
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}{m.group(3)}{m.group(4)}={MASK}"

    return _ARG.sub(one, model_args) if isinstance(model_args, str) else model_args


def remember(values) -> None:
    """Mask ``values`` (keys given on the command line) by value from now on, in this process."""
    known = state.slot("secrets", set)
    known.update(v for v in values if isinstance(v, str) and len(v.strip()) >= 8)


def scrub(text: str) -> str:
    """``text`` with every credential masked: the values of environment variables named like
    keys or tokens (at least 8 characters), keys given in ``--model_args`` (:func:`remember`),
    and strings shaped like API keys."""
    for name, value in os.environ.items():
        if len(value) >= 8 and _SECRET_NAME.search(name) and value in text:
            text = text.replace(value, MASK)
    for value in sorted(state.value("secrets") or (), key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    return _SECRET_SHAPES.sub(MASK, text)
