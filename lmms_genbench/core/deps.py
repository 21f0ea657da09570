"""The one place optional dependencies are imported.

Each optional package maps to the pip extra that installs it, so a missing one
raises an error that tells the user exactly what to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# module name -> pip extra of lmms-genbench that provides it
_EXTRAS = {
    "vllm": "vllm",
    "sentence_transformers": "text",
}


class MissingDependencyError(ImportError):
    """An optional dependency is not installed."""


def require(module: str, purpose: str = "") -> ModuleType:
    """Import ``module`` lazily, or raise an error naming the pip extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        extra = _EXTRAS.get(top)
        hint = (
            f'pip install "lmms-genbench[{extra}]"' if extra else f"pip install {top}"
        )
        why = f" (needed for {purpose})" if purpose else ""
        raise MissingDependencyError(
            f"optional dependency {top!r} is not installed{why}; install it with: {hint}"
        ) from exc
