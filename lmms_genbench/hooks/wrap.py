"""Wrapping a method of an lmms-eval class, and taking the wrapper off again."""

from __future__ import annotations

import functools
from collections.abc import Callable

__all__ = ["MARK", "is_wrapped", "unwrap_method", "wrap_method"]

#: set on each wrapper, so that a second install finds it and changes nothing
MARK = "_lmms_genbench_hook"
_ABSENT = object()


def wrap_method(owner: type, name: str, hooked: Callable[[Callable], Callable]) -> bool:
    """Replace the method ``owner.name`` by ``hooked(original)`` (given the original's name,
    docstring and ``__wrapped__``), once: idempotent, and False (nothing changed) when
    ``owner`` has no such method, so that another lmms-eval version degrades, not breaks."""
    original = getattr(owner, name, None)
    if original is None:
        return False
    if getattr(original, MARK, False):
        return True
    wrapper = functools.wraps(original)(hooked(original))
    setattr(wrapper, MARK, True)
    # what unwrap_method puts back: the class's own attribute, or nothing (an inherited method)
    wrapper._lmms_genbench_own = owner.__dict__.get(name, _ABSENT)
    setattr(owner, name, wrapper)
    return True


def unwrap_method(owner: type, name: str) -> bool:
    """Undo :func:`wrap_method`; True when a wrapper was taken off."""
    current = owner.__dict__.get(name)
    if not getattr(current, MARK, False):
        return False
    own = current._lmms_genbench_own
    if own is _ABSENT:
        delattr(owner, name)
    else:
        setattr(owner, name, own)
    return True


def is_wrapped(owner: type, name: str) -> bool:
    return bool(getattr(owner.__dict__.get(name), MARK, False))
