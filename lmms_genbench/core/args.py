"""Argument coercion shared by the generator backends.

Arguments may come from Python or from an lmms-eval command line, where
``"4"`` arrives as ``4``, ``"0.5"`` as ``0.5`` and ``"true"`` as ``True``.
Each helper accepts those forms, returns the canonical Python value, and
otherwise raises :class:`ArgumentError` naming the argument, what is allowed
and what came in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

# Strings a command line uses to mean "no value" for an optional argument.
_NONE_STRINGS = frozenset({"", "none", "null"})


class ArgumentError(ValueError):
    """A generator argument has a value the backend cannot use."""


def _fail(arg: str, allowed: str, value: Any) -> ArgumentError:
    return ArgumentError(f"{arg}: expected {allowed}; got {value!r}")


def is_unset(value: Any) -> bool:
    """True for ``None`` and for the strings a CLI uses to mean "no value"."""
    return value is None or (
        isinstance(value, str) and value.strip().lower() in _NONE_STRINGS
    )


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float if it is a finite real number, else None: "N/A", NaN,
    infinities, bools (``True`` is not a score) and non-numbers all read as "no value"."""
    if not is_number(value):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def is_number(value: Any) -> bool:
    """True for a real number that is not a bool (``True`` is neither a count nor a score)."""
    return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))


def is_whole(value: Any) -> bool:
    """True for an int (numpy's included) that is not a bool."""
    return not isinstance(value, bool) and isinstance(value, (int, np.integer))


def check_int(name: str, value: Any, *, minimum: int | None = None, what: str = "") -> int:
    """``value`` itself if it is an int of at least ``minimum``, else ValueError naming ``name``.

    Strict where :func:`as_int` coerces: a Python caller passing ``"4"`` or ``2.0`` made a
    mistake. ``what`` overrides the description ("a positive integer (pixels)")."""
    if is_whole(value) and (minimum is None or value >= minimum):
        return int(value)
    allowed = what or ("an integer" + (f" >= {minimum}" if minimum is not None else ""))
    raise ValueError(f"{name} must be {allowed}, got {value!r}")


def as_int(
    arg: str, value: Any, *, minimum: int | None = None, optional: bool = False
) -> int | None:
    """Coerce ``value`` to an int (``4``, ``"4"`` and ``4.0`` all work)."""
    allowed = "an integer" + (f" >= {minimum}" if minimum is not None else "")
    return _coerce(arg, value, _to_int, allowed, minimum, optional)


def as_float(
    arg: str, value: Any, *, minimum: float | None = None, optional: bool = False
) -> float | None:
    """Coerce ``value`` to a finite float (``1``, ``"7.5"`` and ``7.5`` work)."""
    allowed = "a finite number" + (f" >= {minimum:g}" if minimum is not None else "")
    return _coerce(arg, value, _to_float, allowed, minimum, optional)


def _coerce(arg: str, value: Any, convert, allowed: str, minimum, optional: bool):
    """``convert(value)`` (None: not convertible) checked against ``minimum``; with
    ``optional``, None for an unset value."""
    if optional:
        allowed += " or none"
        if is_unset(value):
            return None
    # bool is an int subclass; True is neither a count nor a number here
    result = None if isinstance(value, bool) else convert(value)
    if result is None or (minimum is not None and result < minimum):
        raise _fail(arg, allowed, value)
    return result


def _to_int(value: Any) -> int | None:
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    if isinstance(value, int) or isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _to_float(value: Any) -> float | None:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, (int, float)):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def as_str(arg: str, value: Any, *, optional: bool = False) -> str | None:
    """Coerce ``value`` to a non-empty string.

    Numbers are turned back into text because a CLI may have parsed a name
    such as ``1.5`` into a float; booleans are refused as surely a mistake.
    """
    allowed = "a non-empty string" + (" or none" if optional else "")
    if optional and is_unset(value):
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _fail(arg, allowed, value)
    text = str(value).strip()
    if not text:
        raise _fail(arg, allowed, value)
    return text


def as_choice(arg: str, value: Any, choices: Iterable[str]) -> str:
    """Coerce ``value`` to one of ``choices`` (case-insensitive)."""
    options = list(choices)
    allowed = "one of " + ", ".join(repr(c) for c in options)
    if isinstance(value, str) and value.strip().lower() in options:
        return value.strip().lower()
    raise _fail(arg, allowed, value)
