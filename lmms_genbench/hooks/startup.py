"""The hooks put in place before any run: our model names in ``lmms-eval models``' table,
our task folder in every ``TaskManager``, and the run wrapper of :mod:`.run`, each once the
lmms-eval module it changes has been imported, never earlier.

lmms-eval 0.7.3 loads its ``lmms_eval.models`` entry point (:func:`lmms_genbench.plugin.model_manifests`)
while ``lmms_eval.models`` is imported, before ``lmms_eval.tasks`` or ``lmms_eval.evaluator``
exist, and ``lmms-eval tasks list`` never imports ``lmms_eval.models`` at all. So :func:`watch`
(called by the entry point and by the wheel's ``lmms_genbench.pth`` start-up line) puts one
``sys.meta_path`` finder in front that ignores every module but those two (and
``lmms_eval.__main__``, the ``lmms-eval`` command's module); right after one of them has executed
it installs that module's hook, and once all are done the finder removes itself. Its cost at start-up is importing this module (no third-party import) and a name check
per import. Every hook is idempotent and reduced to a warning when lmms-eval lacks what it
wraps: ``--include_path <TASKS_DIR>`` always works.
"""

from __future__ import annotations

import os
import sys
import warnings

from .scope import TASKS_DIR

__all__ = ["WATCHED", "add_model_names", "install_run_hook", "install_summary_mask", "install_task_path", "watch"]


def install_task_path() -> bool:
    """Make every lmms-eval ``TaskManager`` also index our task folder, after the built-in one
    (built-in names win clashes, as with ``--include_path``). Idempotent; False (nothing
    changed) when the installed lmms-eval lacks ``TaskManager.initialize_tasks``."""
    from lmms_eval.tasks import TaskManager

    from .wrap import wrap_method

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
            _catch_up()
            return original(self, include_path=paths, include_defaults=include_defaults)

        return initialize_tasks

    return wrap_method(TaskManager, "initialize_tasks", hooked)


def install_run_hook() -> bool:
    """:func:`lmms_genbench.hooks.run.install`: the evaluate wrapper; and the ``simple_evaluate``
    wrapper that installs our signal handler and masks keys given in ``--model_args`` (:mod:`.entry`)."""
    from .run import install
    from .entry import install_config_mask

    return install() & install_config_mask()


def install_summary_mask() -> bool:
    """:func:`lmms_genbench.hooks.entry.install_summary_mask`: the ``lmms-eval`` command's
    closing summary line without the keys given in ``--model_args``."""
    from .entry import install_summary_mask as install

    return install()


def add_model_names(paths: dict[str, str]) -> None:
    """Add our model types to ``AVAILABLE_SIMPLE_MODELS``, the static table ``lmms-eval
    models`` prints (it never reads the registry the entry point fills; lmms-eval's own
    ``LMMS_EVAL_PLUGINS`` path writes to it the same way). A built-in name keeps its class."""
    listed = getattr(sys.modules.get("lmms_eval.models"), "AVAILABLE_SIMPLE_MODELS", None)
    if isinstance(listed, dict):
        for name, path in paths.items():
            listed.setdefault(name, path)


#: module -> (its hook, what a failure costs the user)
WATCHED = {
    "lmms_eval.tasks": (install_task_path, f"lmms-eval does not see our tasks; pass --include_path {TASKS_DIR}"),
    "lmms_eval.evaluator": (install_run_hook, ("runs of our models and tasks go without their hooks: no per-doc "
                                               "scores for --baseline, t2i's failed drawings scored as missing images")),
    "lmms_eval.__main__": (install_summary_mask, ("a key given in --model_args shows in lmms-eval's closing summary "
                                                  "line; a signal while results are saved ends without its line")),
}


#: the ``lmms-eval`` command's module: hooked when it is imported before the other two are done
_COMMAND = "lmms_eval.__main__"


def _install(module: str) -> None:
    """The hook of ``module``, any failure a warning: a hook must never break lmms-eval."""
    hook, cost = WATCHED[module]
    try:
        done, why = hook(), "what it wraps is missing"
    except Exception as exc:  # noqa: BLE001 - an unknown lmms-eval version
        done, why = False, f"{type(exc).__name__}: {exc}"
    if not done:
        warnings.warn(f"lmms-genbench could not hook {module} ({why}): {cost}", RuntimeWarning, stacklevel=3)


class _AfterImport:
    """A ``sys.meta_path`` finder for the modules of :data:`WATCHED`: it finds each through the
    finders after it and wraps that module's own loader, so that its hook runs right after
    the module has executed."""

    def __init__(self):
        self.pending = {name for name in WATCHED if name not in sys.modules}

    def find_spec(self, name, path=None, target=None):
        if name not in self.pending:
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
            self.pending.discard(name)
            # the command's module imports the other two: found before they are done, or never
            if not self.pending - {_COMMAND} and self in sys.meta_path:
                sys.meta_path.remove(self)
            _install(name)

        loader.exec_module = exec_module  # this module's loader object only
        return spec


def _loaded(name: str) -> bool:
    """``name`` is imported and has finished executing (the entry point runs while
    ``lmms_eval.evaluator`` is half executed: it imports ``lmms_eval.models``)."""
    module = sys.modules.get(name)
    return module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False)


def _catch_up() -> None:
    """The run hook, if the evaluator was half executed when :func:`watch` ran (no start-up
    line): the first ``TaskManager`` comes after it and before any evaluation."""
    if _loaded("lmms_eval.evaluator"):
        from .wrap import is_wrapped

        if not is_wrapped(sys.modules["lmms_eval.evaluator"], "evaluate"):
            _install("lmms_eval.evaluator")


def watch() -> None:
    """Install each hook of :data:`WATCHED` now if its module is imported, else right after it
    is (or, for a half-executed evaluator, at the first ``TaskManager``). Idempotent; imports
    nothing (the start-up line runs it in every Python process)."""
    for name in WATCHED:
        if _loaded(name):
            _install(name)
    finder = next((f for f in sys.meta_path if isinstance(f, _AfterImport)), None)
    if finder is None:
        finder = _AfterImport()
        if finder.pending:
            sys.meta_path.insert(0, finder)
