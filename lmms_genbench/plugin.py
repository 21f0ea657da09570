"""How lmms-eval finds this package: model types and task folders.

lmms-eval 0.7.3 has one plugin hook, the ``lmms_eval.models`` entry point, which it
loads while ``lmms_eval.models`` is imported (the evaluation command,
``simple_evaluate`` and ``lmms-eval models`` all import it). Its listings do not all
read what that hook registers, and it has no hook for tasks, so three small pieces:

1. :func:`model_manifests` (the entry point) returns our model types for lmms-eval's
   model registry, and also adds them to ``AVAILABLE_SIMPLE_MODELS``, the static table
   that ``lmms-eval models`` prints (it never reads the registry; lmms-eval's own
   ``LMMS_EVAL_PLUGINS`` path writes to that table the same way).
2. :func:`install_task_path` makes every ``TaskManager`` also index our ``tasks/``
   folder. Built-in tasks are indexed first and keep their names on a clash, exactly
   as with ``--include_path``. The entry point calls it, which covers evaluation runs.
3. ``lmms-eval tasks list`` imports ``lmms_eval.tasks`` but never ``lmms_eval.models``,
   so the entry point never runs there. The wheel therefore ships one startup file,
   ``lmms_genbench.pth`` (written by ``setup.py``), whose line calls
   :func:`watch_task_imports` when Python starts. That puts a finder in front of
   ``sys.meta_path`` which ignores every module but ``lmms_eval.tasks`` and, once that
   module has executed, calls :func:`install_task_path` and removes itself. Its cost
   at start-up is importing this module (no third-party import) and a name check per
   import. Editable installs (``pip install -e``) get no startup file: there
   ``lmms-eval tasks list`` needs ``--include-path``, evaluation runs need nothing.

The entry point also installs :mod:`lmms_genbench.host_scores` (each cycle task's per-doc
score in lmms-eval's logged samples, for ``--baseline``).

Each piece is idempotent and degrades to doing nothing, with a warning, when the
installed lmms-eval lacks what it touches; ``--include_path <TASKS_DIR>`` always works.
"""

from __future__ import annotations

import os
import sys
import warnings

TASKS_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "tasks")
TASKS_MODULE = "lmms_eval.tasks"

# lmms-eval imports each class itself, when the model type is used
MODEL_TYPES = {
    "cycle": ".models.cycle:CycleModel",
    "t2i": ".models.t2i:TextToImageModel",
    "chef": ".models.chef:ChefModel",
}


def model_manifests():
    """Entry-point payload: our model types, plus the task-path hook."""
    import importlib

    from lmms_eval.models.registry_v2 import ModelManifest

    from .core.registry import Registry

    models = Registry(MODEL_TYPES, package=__package__)
    _install_quietly()
    _install_host_scores_quietly()
    # Called while lmms_eval.models is being imported: the module is partly built, but
    # its static tables are defined above the registry that loads entry points.
    listed = getattr(importlib.import_module("lmms_eval.models"), "AVAILABLE_SIMPLE_MODELS", None)
    if isinstance(listed, dict):
        for name in models.names():
            listed.setdefault(name, models.dotted(name))  # a built-in name keeps its class
    return [ModelManifest(model_id=name, simple_class_path=models.dotted(name)) for name in models.names()]


def install_task_path() -> bool:
    """Make every lmms-eval ``TaskManager`` also index our task folder.

    Idempotent. Returns False (and changes nothing) when the installed
    lmms-eval does not have the method this hook wraps, so a future lmms-eval
    degrades to needing ``--include_path`` instead of breaking.
    """
    from lmms_eval.tasks import TaskManager

    from .core.hooks import wrap_method

    def hooked(original):
        def initialize_tasks(self, include_path=None, include_defaults=True):
            if include_path is None:
                paths = []
            elif isinstance(include_path, (str, os.PathLike)):
                paths = [str(include_path)]
            else:
                paths = list(include_path)
            if TASKS_DIR not in paths:
                paths.append(TASKS_DIR)
            return original(self, include_path=paths, include_defaults=include_defaults)

        return initialize_tasks

    return wrap_method(TaskManager, "initialize_tasks", hooked)


def _install_quietly() -> None:
    """:func:`install_task_path`, turning any failure into a warning: a hook must
    never break lmms-eval's own import."""
    try:
        done = install_task_path()
    except Exception as exc:  # noqa: BLE001 - an unknown lmms-eval version
        done, why = False, f"{type(exc).__name__}: {exc}"
    else:
        why = "TaskManager.initialize_tasks is missing"
    if not done:
        warnings.warn(
            f"lmms-genbench could not add its tasks to lmms-eval ({why}); "
            f"pass --include_path {TASKS_DIR}",
            RuntimeWarning,
            stacklevel=2,
        )


def _install_host_scores_quietly() -> None:
    """:func:`lmms_genbench.host_scores.install` (per-doc scores for ``--baseline``) and
    :func:`lmms_genbench.host_failures.install` (a doc ``t2i`` could not draw is N/A), any
    failure a warning: without them our tasks' samples carry no ``score`` and a task scores
    ``t2i``'s failed docs as it scores a missing image; nothing else breaks."""
    try:
        from . import host_failures, host_scores

        done, why = host_scores.install(), "TaskOutput.calculate_aggregate_metric is missing"
        if done:
            done, why = host_failures.install(), "ConfigurableTask.process_results is missing"
    except Exception as exc:  # noqa: BLE001 - an unknown lmms-eval version
        done, why = False, f"{type(exc).__name__}: {exc}"
    if not done:
        warnings.warn(
            f"lmms-genbench could not hook lmms-eval's scoring ({why}); --baseline skips its "
            "cycle tasks, and a task scores a doc --model t2i could not draw as a missing image",
            RuntimeWarning,
            stacklevel=2,
        )


class _AfterTasksImport:
    """A ``sys.meta_path`` finder for one module: it finds ``lmms_eval.tasks`` through
    the finders after it and wraps that module's own loader, so that
    :func:`install_task_path` runs right after the module has executed."""

    def find_spec(self, name, path=None, target=None):
        if name != TASKS_MODULE:
            return None
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is not self and find is not None:
                spec = find(name, path, target)
                if spec is not None:
                    break
        loader = getattr(spec, "loader", None)
        execute = getattr(loader, "exec_module", None)
        if execute is None:
            return spec

        def exec_module(module):
            execute(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            _install_quietly()

        loader.exec_module = exec_module  # this module's loader object only
        return spec


def watch_task_imports() -> None:
    """Run :func:`install_task_path` as soon as ``lmms_eval.tasks`` is imported.

    Called by the ``lmms_genbench.pth`` startup line; idempotent. Imports nothing:
    it runs in every Python process of the environment."""
    if TASKS_MODULE in sys.modules:
        _install_quietly()
    elif not any(isinstance(f, _AfterTasksImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterTasksImport())
