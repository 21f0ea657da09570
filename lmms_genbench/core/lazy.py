"""Package re-exports that import their module on first use (PEP 562).

A package ``__init__`` that imported every submodule it re-exports would make
importing any one of its modules (``metrics.functional.intervals``) load them
all, the engine and the networks included. With ``lazy_exports`` the public
names stay where they were (``from lmms_genbench.metrics import MCD``) and
cost nothing until used.
"""

from __future__ import annotations

import sys
from importlib import import_module


def lazy_exports(package: str, table: dict[str, str]):
    """``(__getattr__, __dir__)`` for ``package`` that resolve ``table``'s names lazily.

    ``table`` maps a public name to ``".module"`` (the attribute of the same name)
    or ``".module:attribute"`` (another name there), relative to ``package``.
    """

    def __getattr__(name: str):
        try:
            target = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module, _, attribute = target.partition(":")
        value = getattr(import_module(module, package), attribute or name)
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(table)

    return __getattr__, __dir__
