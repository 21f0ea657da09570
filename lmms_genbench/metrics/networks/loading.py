"""How a network is named and kept: the spec grammar, "a name, a loaded model or a loader"
resolved once, and the one process-wide cache of loaded networks with its clear function.

A spec (the argument of every ``build_*`` / ``get_*`` factory in this package) is one of:

* a name or path: a hub name, a local folder or file, or a ``"tiny-*"`` name (random
  weights, smoke runs and tests), which each factory resolves itself;
* ``"<family>:<name>"``: that family's class on that model, a bare name picking its family
  by what it contains (:func:`parse_spec`);
* an object that already does the work (an encoder, a feature extractor, a detector), used
  as it is, or a zero-argument loader returning one (:func:`ready_or_loaded`).

A network class takes "a name or a loaded model" through :func:`resolve_model`. The cache
(:func:`cached_network`) loads each network once per identity key (family, spec, device,
dtype, ...); callers hand out views of it per call options (a batch size, CLIP's
``long_text``: :func:`cached_view`); :func:`clear_networks` forgets a family's networks and
their views, or all of them.
Importing this module imports neither torch nor transformers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ...core import state
from .common import ModelCache

__all__ = [
    "cached_network",
    "cached_view",
    "check_model_arg",
    "clear_networks",
    "is_module",
    "is_name",
    "parse_spec",
    "ready_or_loaded",
    "resolve_model",
    "spec_key",
]


# --------------------------------------------------------------------------- the grammar
def is_name(spec: Any) -> bool:
    """Whether ``spec`` is a name or path (to load), not an object."""
    return isinstance(spec, (str, os.PathLike))


def is_module(obj: Any) -> bool:
    """A torch module, told without importing torch: a loaded network, not a loader."""
    return hasattr(obj, "parameters") and hasattr(obj, "forward")


def spec_key(spec: Any) -> Any:
    """``spec`` as a cache key: paths as their string, so ``Path("m")`` and ``"m"`` share one network."""
    return os.fspath(spec) if isinstance(spec, os.PathLike) else spec


def parse_spec(spec: str | os.PathLike, families: Sequence[str], infer: Callable[[str], str]) -> tuple[str, str]:
    """``(family, name)`` of ``"<family>:<name>"``; a bare name's family is ``infer(name)``.

    Raises:
        ValueError: the spec names no model (``"clip:"``, ``""``).
    """
    text = os.fspath(spec)
    family, name = None, text
    for prefix in families:
        if text.startswith(prefix + ":"):
            family, name = prefix, text[len(prefix) + 1 :]
            break
    if not name:
        raise ValueError(f"spec {spec!r} names no model after its prefix")
    return family or infer(name), name


def check_model_arg(model: Any, name: str = "model") -> None:
    """A non-empty name or path, or a loaded (callable) model; else a one-line error."""
    if is_name(model):
        if not str(model):
            raise ValueError(f"{name} must be a non-empty model name or path")
    elif not callable(model):
        raise TypeError(
            f"{name} must be a model name/path or a loaded model instance, got {type(model).__name__}"
        )


def resolve_model(
    model: Any,
    load: Callable[[str], Any],
    *,
    companion: Any = None,
    default_companion: Callable[[], Any] | None = None,
    companion_name: str = "",
    hint: str = "",
) -> tuple[str, Any, Any]:
    """``(name, loaded model, companion)`` from a name/path or a loaded model.

    The companion is what reads the model's inputs (an image processor, a tokenizer):
    ``companion`` when given, else ``default_companion()`` when there is one, else for a
    name the name itself (the caller loads it from there) and for a loaded model an error
    naming ``companion_name`` (no error when ``companion_name`` is empty: the model needs none).

    Args:
        model: a hub name or local path, loaded with ``load(name)``; or a loaded model,
            kept as it is and named by its type.
        hint: appended to the missing-companion error (what to pass instead).
    """
    check_model_arg(model)
    if companion is None and default_companion is not None:
        companion = default_companion()
    if is_name(model):
        name = str(model)
        return name, load(name), name if companion is None else companion
    if companion is None and companion_name:
        raise ValueError(f"{companion_name} is required when model is a loaded instance{hint}")
    return type(model).__name__, model, companion


def ready_or_loaded(
    spec: Any, is_ready: Callable[[Any], bool], what: str, method: str, *, modules: bool = False
) -> Any | None:
    """``spec`` itself when it is ready, or what a zero-argument loader returns (checked);
    None when ``spec`` is a name or path (or, with ``modules``, a loaded torch module) for
    the caller to build a network from.

    Args:
        is_ready: whether an object already does the work (has ``encode``, ``detect``, ...).
        what, method: for the errors: "the image encoder loader returned X, which has no encode()".
        modules: a torch module is a model to wrap, not a loader to call.
    """
    if is_name(spec) or (modules and is_module(spec)):
        return None
    if is_ready(spec):
        return spec
    if callable(spec):
        made = spec()
        if not is_ready(made):
            raise TypeError(f"the {what} loader returned {type(made).__name__}, which has no {method}()")
        return made
    raise TypeError(
        f"spec must be a model name/path, {_article(what)} {what} object or a zero-argument loader, "
        f"got {type(spec).__name__}"
    )


def _article(noun: str) -> str:
    return "an" if noun[:1] in "aeiou" else "a"


# --------------------------------------------------------------------------- the cache
# networks by identity, and the objects handed out (views of them per call options): the
# state module's "networks" and "network_views" slots
def cached_network(key: tuple[Hashable, ...], load: Callable[[], Any]) -> Any:
    """The network of identity ``key``, loaded by ``load()`` at most once per process
    (thread-safe). ``key[0]`` names the family (``"image"``, ``"text"``, ``"fid"``, ...)
    that :func:`clear_networks` can forget on its own."""
    return state.slot("networks", ModelCache).get(key, load)


def cached_view(key: tuple[Hashable, ...], options: tuple[Hashable, ...], make: Callable[[], Any]) -> Any:
    """The view of network ``key`` under call ``options`` (a batch size, ...), made by
    ``make()`` once: callers asking the same get the same object (and its counters)."""
    return state.slot("network_views", ModelCache).get(key + tuple(options), make)


def clear_networks(*families: str) -> None:
    """Forget the cached networks of ``families`` (all of them when none is named); their
    memory is freed once no caller holds them."""
    for name in ("network_views", "networks"):
        cache = state.value(name)
        if cache is not None:
            cache.clear(families)
