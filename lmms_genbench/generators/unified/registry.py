"""Build a unified model by name; its module is imported only when built."""

from __future__ import annotations

import importlib
from typing import Any

from ...core.args import ArgumentError
from ..registry import _parameter_names
from .base import UnifiedModel

# name -> (module, class), imported on first use so listing names costs nothing.
UNIFIED_MODELS: dict[str, tuple[str, str]] = {
    "janus": (".janus", "JanusUnified"),
}


def unified_names() -> list[str]:
    """The names :func:`build_unified` accepts, sorted."""
    return sorted(UNIFIED_MODELS)


def build_unified(name: str, **kwargs: Any) -> UnifiedModel:
    """Build the unified model called ``name`` with its keyword arguments.

    Raises:
        ValueError: unknown name or argument, or an unusable value; the message
            names the argument, what is allowed and what came in.
        GeneratorConfigError: the model cannot be loaded at all.
    """
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in UNIFIED_MODELS:
        raise ArgumentError(f"unified: expected one of {', '.join(map(repr, unified_names()))}; got {name!r}")
    module_name, class_name = UNIFIED_MODELS[key]
    cls = getattr(importlib.import_module(module_name, __package__), class_name)
    allowed = _parameter_names(cls)
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ArgumentError(
            f"unified={key}: unknown argument(s) {', '.join('unified.' + u for u in unknown)}; "
            f"allowed: {', '.join('unified.' + a for a in allowed)}"
        )
    try:
        return cls(**kwargs)
    except ArgumentError as exc:
        raise ArgumentError(f"unified={key}: unified.{exc}") from None
