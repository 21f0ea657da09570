"""Whose run is it: our model types and our tasks, known by identity, never by an answer's shape.

A model is ours when its class (or a base class) is one of :data:`MODEL_TYPES`: decided from
the model object lmms-eval runs. A task is ours when the functions its YAML names (its
``process_results``, ``doc_to_text``, ``doc_to_visual``) or its task class are defined in this
package: every task folder under ``lmms_genbench/tasks`` points there, and so does a copy of
one that imports our ``utils`` (tests/support/smoke_run.py's variant). lmms-eval's built-in tasks
never do. Imports nothing: the start-up line and the entry point read this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["MODEL_CLASSES", "MODEL_TYPES", "PACKAGE", "TASKS_DIR", "is_our_task", "model_type", "our_tasks"]

PACKAGE = "lmms_genbench"
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
TASKS_DIR = os.path.join(PACKAGE_DIR, "tasks")

# lmms-eval imports each class itself, when the model type is used
MODEL_TYPES = {
    "cycle": ".models.cycle:CycleModel",
    "t2i": ".models.t2i:TextToImageModel",
    "chef": ".models.chef:ChefModel",
}
#: name -> the class's dotted path, as lmms-eval's manifests and AVAILABLE_SIMPLE_MODELS name it
MODEL_CLASSES = {name: PACKAGE + path.replace(":", ".") for name, path in MODEL_TYPES.items()}
_BY_CLASS = {f"{PACKAGE}{path}": name for name, path in MODEL_TYPES.items()}
_TASK_FUNCTIONS = ("process_results", "doc_to_text", "doc_to_visual", "doc_to_target")


def model_type(lm: object) -> str | None:
    """``"cycle"``, ``"t2i"`` or ``"chef"`` when ``lm`` is (a subclass of) one of ours, else None."""
    for cls in type(lm).__mro__:
        name = _BY_CLASS.get(f"{cls.__module__}:{cls.__qualname__}")
        if name:
            return name
    return None


def _defined_here(obj: object) -> bool:
    code = getattr(obj, "__code__", None) or getattr(getattr(obj, "__func__", None), "__code__", None)
    if code is None:
        return False
    from ..core import state  # here: at start-up this module imports nothing

    where = code.co_filename
    ours = state.slot("ours_by_file", dict)  # asked on every wrapped call: realpath once per file
    if where not in ours:
        ours[where] = os.path.realpath(where).startswith(PACKAGE_DIR + os.sep)
    return ours[where]


def is_our_task(task: object) -> bool:
    """True when ``task`` (an lmms-eval task object) comes from one of our task folders."""
    if type(task).__module__.startswith(PACKAGE + "."):
        return True
    config = getattr(task, "config", None)
    return any(_defined_here(getattr(config, name, None)) for name in _TASK_FUNCTIONS)


def our_tasks(task_dict: object) -> list[str]:
    """The names of our tasks in lmms-eval's (nested) task dictionary."""
    found = []
    for name, value in (task_dict.items() if isinstance(task_dict, Mapping) else ()):
        if isinstance(value, Mapping):
            found += our_tasks(value)
        elif is_our_task(value):
            found.append(str(getattr(getattr(value, "config", None), "task", None) or name))
    return found
