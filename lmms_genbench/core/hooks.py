"""Wrapping a method of an lmms-eval class once: the hooks of :mod:`lmms_genbench.plugin`
and :mod:`lmms_genbench.host_scores`."""

from __future__ import annotations

import functools
from collections.abc import Callable

#: set on each wrapper, so that a second install finds it and changes nothing
MARK = "_lmms_genbench_hook"


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
    setattr(owner, name, wrapper)
    return True
