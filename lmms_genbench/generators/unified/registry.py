"""Build a unified model by name; its module is imported only when built."""

from __future__ import annotations

import importlib
from typing import Any

from ...core.registry import Registry
from ..lazy import GeneratorPlan, plan_registered
from .base import UnifiedModel

# imported on first use, so listing names costs nothing; arguments are spelled unified.<arg>
UNIFIED_MODELS = Registry(
    {"janus": ".janus:JanusUnified", "showo": ".showo:ShowoUnified", "vila_u": ".vila_u:VilaUUnified",
     "blip3o": ".blip3o:Blip3oUnified", "bagel": ".bagel:BagelUnified"},
    package=__package__,
    what="unified",
    context="unified={}",
    prefix="unified.",
)


def unified_names() -> list[str]:
    """The names :func:`build_unified` accepts, sorted."""
    return UNIFIED_MODELS.names()


#: ``unified=lmms:<model type>``: one lmms-eval model type in both roles (:mod:`.lmms`)
LMMS_PREFIX = "lmms:"


def _lmms_type(name: Any) -> str | None:
    if isinstance(name, str) and name.strip().lower().startswith(LMMS_PREFIX):
        return name.strip()[len(LMMS_PREFIX):]
    return None


def build_unified(name: str, **kwargs: Any) -> UnifiedModel:
    """Build the unified model called ``name`` with its keyword arguments.

    Raises:
        ValueError: unknown name or argument, or an unusable value; the message
            names the argument, what is allowed and what came in.
        GeneratorConfigError: the model cannot be loaded at all (a local folder it reads lacks a
            file or does not read: :func:`.folders.read_unified_folders`, before any weight loads).
    """
    model = _lmms_type(name)
    if model is not None:  # imported by name, as the registry imports: only when built
        return importlib.import_module(".lmms", __package__).LmmsUnified(model=model, **kwargs)
    from .folders import read_unified_folders

    if isinstance(name, str) and name.strip().lower() in UNIFIED_MODELS:
        plan_registered(UNIFIED_MODELS, name, kwargs)  # its arguments first, as its constructor checks them
        read_unified_folders(UNIFIED_MODELS.canonical(name), kwargs)  # then a local folder it cannot load, as
        # `lmms-genbench check` says it
    return UNIFIED_MODELS.build(name, **kwargs)


def plan_unified(name: str, kwargs: dict[str, Any]) -> GeneratorPlan | None:
    """The plan of unified model ``name`` with ``kwargs`` (every argument checked, no weights
    loaded), or None where it must be built to be known (an unknown name, a class without
    ``plan``: building says why or builds it).

    Raises:
        ArgumentError: an argument is unknown or unusable, as building would say.
    """
    if _lmms_type(name) is not None:
        return None  # an lmms-eval class names itself once built
    return plan_registered(UNIFIED_MODELS, name, kwargs)


def unified_concurrency(name: str) -> bool:
    """Whether unified model ``name`` may describe and draw on two threads at once (its
    class's ``concurrent``), read without building it."""
    if _lmms_type(name) is not None:
        return False
    return bool(getattr(UNIFIED_MODELS.load(UNIFIED_MODELS.canonical(name)), "concurrent", False))


def unified_weights(name: str, kwargs: dict[str, Any]) -> list[tuple[str, str, str]] | None:
    """``(argument, hub id or folder, a file it must hold)`` for every repository unified model
    ``name`` reads with ``kwargs``, from its class's ``weights`` classmethod (no weights loaded);
    None for a class without one (its ``pretrained`` is then the one to check)."""
    if _lmms_type(name) is not None or not isinstance(name, str) or name.strip().lower() not in unified_names():
        return None  # an unknown name is the settings check's to report
    listed = getattr(UNIFIED_MODELS.load(UNIFIED_MODELS.canonical(name)), "weights", None)
    return None if listed is None else listed(**kwargs)
