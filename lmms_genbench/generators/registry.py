"""Build a generator backend by name.

Backends are imported only when built, so ``import lmms_genbench.generators``
pulls in neither torch nor diffusers nor httpx.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from ..core.args import ArgumentError
from .base import Generator

# name -> (module, class); the module is imported on first use.
_BACKENDS: dict[str, tuple[str, str]] = {
    "diffusers": (".diffusers_backend", "DiffusersGenerator"),
    "openai": (".openai_backend", "OpenAIImageGenerator"),
    "smoke": (".smoke", "SmokeGenerator"),
}


def generator_names() -> list[str]:
    """The names :func:`build_generator` accepts, sorted."""
    return sorted(_BACKENDS)


def build_generator(name: str, **kwargs: Any) -> Generator:
    """Build the backend called ``name`` with ``kwargs``.

    Args:
        name: One of :func:`generator_names`.
        **kwargs: The backend's constructor arguments. Values may be the
            strings, ints, floats and bools an lmms-eval command line produces;
            each backend coerces and validates them before doing any heavy
            work.

    Raises:
        ValueError: ``name`` is unknown, an argument is not one the backend
            takes, or a value is unusable; the message names the argument,
            what is allowed and what came in.
    """
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in _BACKENDS:
        raise ArgumentError(
            f"name: expected one of {', '.join(map(repr, generator_names()))}; "
            f"got {name!r}"
        )
    module_name, class_name = _BACKENDS[key]
    cls = getattr(importlib.import_module(module_name, __package__), class_name)

    allowed = _parameter_names(cls)
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ArgumentError(
            f"{key} generator: unknown argument(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(allowed)}"
        )
    try:
        return cls(**kwargs)
    except ArgumentError as exc:
        raise ArgumentError(f"{key} generator: {exc}") from None


def _parameter_names(cls: type) -> list[str]:
    params = inspect.signature(cls.__init__).parameters.values()
    return [
        p.name for p in params if p.name != "self" and p.kind is p.POSITIONAL_OR_KEYWORD
    ]
