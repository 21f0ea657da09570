"""How lmms-eval finds this package: model types and task folders.

lmms-eval 0.7.3 loads the ``lmms_eval.models`` entry point while it imports
``lmms_eval.models``, which both the CLI and ``simple_evaluate`` do before any
``TaskManager`` exists. It has no entry point for tasks, so the same callable
also adds our task folder to every ``TaskManager``'s search path. Built-in
tasks are indexed first and keep their names on a clash, exactly as with
``--include_path``.
"""

from __future__ import annotations

import functools
from pathlib import Path

from .core.registry import Registry

TASKS_DIR = str(Path(__file__).resolve().parent / "tasks")

# lmms-eval imports each class itself, when the model type is used
MODELS = Registry(
    {
        "cycle": ".models.cycle:CycleModel",
        "t2i": ".models.t2i:TextToImageModel",
        "chef": ".models.chef:ChefModel",
    },
    package=__package__,
)


def model_manifests():
    """Entry-point payload: our model types, plus the task-path hook."""
    from lmms_eval.models.registry_v2 import ModelManifest

    install_task_path()
    return [
        ModelManifest(model_id=name, simple_class_path=MODELS.dotted(name))
        for name in MODELS.names()
    ]


def install_task_path() -> bool:
    """Make every lmms-eval ``TaskManager`` also index our task folder.

    Idempotent. Returns False (and changes nothing) when the installed
    lmms-eval does not have the method this hook wraps, so a future lmms-eval
    degrades to needing ``--include_path`` instead of breaking.
    """
    from lmms_eval.tasks import TaskManager

    original = getattr(TaskManager, "initialize_tasks", None)
    if original is None:
        return False
    if getattr(original, "_lmms_genbench_hook", False):
        return True

    @functools.wraps(original)
    def initialize_tasks(self, include_path=None, include_defaults=True):
        if include_path is None:
            paths = []
        elif isinstance(include_path, (str, Path)):
            paths = [str(include_path)]
        else:
            paths = list(include_path)
        if TASKS_DIR not in paths:
            paths.append(TASKS_DIR)
        return original(self, include_path=paths, include_defaults=include_defaults)

    initialize_tasks._lmms_genbench_hook = True
    TaskManager.initialize_tasks = initialize_tasks
    return True
