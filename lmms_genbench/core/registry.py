"""Name tables whose entries are imported only when used.

A :class:`Registry` maps names to ``"module:attribute"`` strings, so listing or
checking names costs no import; :meth:`Registry.build` imports the class on
first use and checks keyword arguments against its constructor before calling
it, with messages that name the argument, what is allowed and what came in.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Mapping
from typing import Any

from .args import ArgumentError

__all__ = ["Registry", "lookup", "parameter_names", "takes_more"]


def lookup(table: Mapping[str, Any], name: Any, what: str) -> Any:
    """``table[name]``, or a ValueError naming ``what``, the allowed names and what came in.

    The one check behind every small name table (presets, corruptions, verbalizers)."""
    try:
        return table[name]
    except (KeyError, TypeError):
        raise ValueError(f"{what} must be one of {sorted(table)}, got {name!r}") from None


def parameter_names(cls: type) -> list[str]:
    """The constructor's positional-or-keyword parameters, in order (``self`` left out)."""
    params = inspect.signature(cls.__init__).parameters.values()
    return [p.name for p in params if p.name != "self" and p.kind is p.POSITIONAL_OR_KEYWORD]


def takes_more(cls: type) -> bool:
    """Whether the constructor takes ``**kwargs`` (and so checks names beyond its parameters)."""
    params = inspect.signature(cls.__init__).parameters.values()
    return any(p.kind is p.VAR_KEYWORD for p in params)


class Registry:
    """``name -> "module:attribute"``; the module is imported on first use.

    Args:
        entries: name -> ``"module:attribute"``; a module starting with ``.`` is
            relative to ``package``. :attr:`entries` stays a plain dict, so tests
            may add to it.
        package: anchor of relative module names.
        what: how an unknown name is reported: ``"<what>: expected one of ...; got ..."``.
        context: ``str.format`` template taking the name, put in front of
            argument errors: ``"<context>: unknown argument(s) ..."``.
        prefix: how arguments are spelled on the command line (``"unified."``);
            with one, argument names are shown with it, without one, unknown
            names are quoted.
    """

    def __init__(
        self,
        entries: Mapping[str, str],
        *,
        package: str | None = None,
        what: str = "name",
        context: str = "{}",
        prefix: str = "",
    ) -> None:
        self.entries = dict(entries)
        self.package = package
        self.what = what
        self.context = context
        self.prefix = prefix

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self.entries)

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def canonical(self, name: Any) -> str:
        """``name`` stripped and lower-cased; an error listing the names if it is unknown."""
        key = name.strip().lower() if isinstance(name, str) else name
        if key not in self.entries:
            raise ArgumentError(
                f"{self.what}: expected one of {', '.join(map(repr, self.names()))}; got {name!r}"
            )
        return key

    def _target(self, name: str) -> tuple[str, str]:
        module, _, attribute = self.entries[self.canonical(name)].partition(":")
        if module.startswith("."):
            module = importlib.util.resolve_name(module, self.package)
        return module, attribute

    def dotted(self, name: str) -> str:
        """``"package.module.attribute"`` of ``name``, without importing it."""
        return ".".join(self._target(name))

    def load(self, name: str) -> Any:
        """The attribute registered as ``name``, importing its module."""
        module, attribute = self._target(name)
        return getattr(importlib.import_module(module), attribute)

    def build(self, name: str, **kwargs: Any) -> Any:
        """Construct ``name`` with ``kwargs``, checked against its constructor first.

        Raises:
            ArgumentError: ``name`` is unknown, an argument is not one the class
                takes, or the class rejects a value (its message gets
                ``context`` and ``prefix`` in front).
        """
        return self.call(name, lambda cls, **checked: cls(**checked), **kwargs)

    def call(self, name: str, fn: Any, **kwargs: Any) -> Any:
        """``fn(cls, **kwargs)`` for the class registered as ``name``, with ``kwargs`` checked
        against its constructor first (what :meth:`build` does with ``fn`` the constructor;
        a planner that checks without building passes its own).

        Raises:
            ArgumentError: ``name`` is unknown, an argument is not one the class
                takes, or the class rejects a value (its message gets
                ``context`` and ``prefix`` in front).
        """
        key = self.canonical(name)
        cls = self.load(key)
        allowed = parameter_names(cls)
        unknown = sorted(set(kwargs) - set(allowed))
        context = self.context.format(key)
        if unknown and not takes_more(cls):  # a class with **kwargs checks those names itself
            shown = (self.prefix + u if self.prefix else repr(u) for u in unknown)
            raise ArgumentError(
                f"{context}: unknown argument(s) {', '.join(shown)}; "
                f"allowed: {', '.join(self.prefix + a for a in allowed)}"
            )
        try:
            return fn(cls, **kwargs)
        except ArgumentError as exc:
            raise ArgumentError(f"{context}: {self.prefix}{exc}") from None
