"""Whether the models a command names exist, told with the nearest known name: read from the
registries' name lists, never by importing a class (lmms-eval's ``get_model`` logs every model
name it knows on an unknown one: noise in a list of problems)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

__all__ = ["did_you_mean", "generator_problem", "lmms_model_names", "lmms_model_problem", "unified_problem"]

#: ``generator=lmms:<model type>`` / ``unified=lmms:<model type>``: an lmms-eval model type
LMMS_PREFIX = "lmms:"


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """`` (did you mean x?)`` for the nearest of ``known``, or ``""``."""
    close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def lmms_model_names() -> list[str]:
    """The model names lmms-eval's registry knows (its own and plugins'), without importing any."""
    from lmms_eval.models import MODEL_REGISTRY_V2

    return sorted(MODEL_REGISTRY_V2.list_model_names())


def lmms_model_problem(name: str | None, role: str) -> tuple[str, str] | None:
    """(cause, fix) when ``name`` is not a registered lmms-eval model, else None."""
    if not name:
        return None
    known = lmms_model_names()
    if name in known:
        return None
    return (f"no lmms-eval model {name} for the {role}{did_you_mean(name, known)}",
            "name one that `lmms-eval models` lists (e.g. llava_hf, qwen2_5_vl, openai)")


def generator_problem(name: str | None) -> tuple[str, str] | None:
    """(cause, fix) when ``name`` is no generator backend (``lmms:<type>``: no lmms-eval model)."""
    from ..generators.registry import generator_names

    return _registered_problem(name, "generator", "generator", generator_names,
                               "lmms:<an lmms-eval image model type>")


def unified_problem(name: str | None) -> tuple[str, str] | None:
    """(cause, fix) when ``name`` is no unified model."""
    from ..generators.unified.registry import unified_names

    return _registered_problem(name, "unified", "unified model", unified_names, "lmms:<an lmms-eval model type>")


def _registered_problem(name, arg: str, what: str, names, lmms: str) -> tuple[str, str] | None:
    """(cause, fix) when ``name`` is neither one of ``names()`` nor ``lmms:<a registered lmms-eval model>``."""
    if not name:
        return None
    if str(name).strip().lower().startswith(LMMS_PREFIX):
        return lmms_model_problem(str(name).strip()[len(LMMS_PREFIX):], f"{arg}=lmms:<model type>")
    known = names()
    if str(name).strip().lower() in known:
        return None
    return (f"no {what} {name}{did_you_mean(name, known)}", f"give {arg}=<one of {', '.join(known)}>, or {lmms}")