"""The hooks put in place before any run: our model names in ``lmms-eval models``' table,
our task folder in every ``TaskManager``, and the run wrapper of :mod:`.run`, each once the
lmms-eval module it changes has been imported, never earlier.

lmms-eval 0.7.3 loads its ``lmms_eval.models`` entry point (:func:`lmms_genbench.plugin.model_manifests`)
while ``lmms_eval.models`` is imported, before ``lmms_eval.tasks`` or ``lmms_eval.evaluator``
exist, and ``lmms-eval tasks list`` never imports ``lmms_eval.models`` at all. So :func:`watch`
(called by the entry point, and by the ``lmms_genbench.pth`` start-up line that wheel and editable
installs ship) puts one ``sys.meta_path`` finder in front that ignores every module but those two;
right after one of them has executed it installs that module's hook, and once both are done the
finder removes itself. Its cost at start-up is importing this module (no third-party import) and
a name check per import. Every hook is idempotent and reduced to a warning when lmms-eval lacks
what it wraps: ``--include_path <TASKS_DIR>`` always works.

A run needs nothing from the start-up line (issue 52): the entry point comes before any task is
loaded, under every launcher. The line adds one thing: ``lmms-eval tasks list`` (which loads no
entry point) shows our tasks. Everything a run of ours gets at start-up (the signal handler, the
masks) comes from the entry point and the ``simple_evaluate`` wrapper: :mod:`.entry`.
"""

from __future__ import annotations

import os
import sys
import warnings

from .scope import MODEL_TYPES, TASKS_DIR

__all__ = ["WATCHED", "add_model_names", "command_model", "command_start", "install_run_hook", "install_task_path",
           "watch"]


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
            from ..core.signals import interrupt_at

            interrupt_at("tasks")  # tests only: a signal while the tasks are indexed
            return original(self, include_path=paths, include_defaults=include_defaults)

        return initialize_tasks

    return wrap_method(TaskManager, "initialize_tasks", hooked)


def install_run_hook() -> bool:
    """:func:`lmms_genbench.hooks.run.install`: the evaluate wrapper; and the ``simple_evaluate``
    wrapper that installs our signal handler and masks keys given in ``--model_args`` (:mod:`.entry`)."""
    from .run import install
    from .entry import install_config_mask

    return install() & install_config_mask()


def add_model_names(paths: dict[str, str]) -> None:
    """Add our model types to ``AVAILABLE_SIMPLE_MODELS``, the static table ``lmms-eval
    models`` prints (it never reads the registry the entry point fills; lmms-eval's own
    ``LMMS_EVAL_PLUGINS`` path writes to it the same way). A built-in name keeps its class."""
    listed = getattr(sys.modules.get("lmms_eval.models"), "AVAILABLE_SIMPLE_MODELS", None)
    if isinstance(listed, dict):
        for name, path in paths.items():
            listed.setdefault(name, path)


def command_model(argv: list[str]) -> str | None:
    """The ``--model`` value of an lmms-eval command line (``--model X`` or ``--model=X``), if any."""
    for i, token in enumerate(argv):
        if token == "--model" and i + 1 < len(argv):
            return argv[i + 1]
        if token.startswith("--model="):
            return token.partition("=")[2]
    return None


def command_start() -> bool:
    """Under the lmms-eval command (its dispatcher imported: ``lmms-eval``, ``python -m lmms_eval``,
    ``accelerate launch -m lmms_eval``) with ``--model`` one of ours on the command line: our signal
    handler now, kept to the process's end. False otherwise (nothing changed: a run of
    lmms-eval's own models, a listing, a ``--config`` file naming the model, which gets it from
    ``simple_evaluate`` on)."""
    import threading

    if "lmms_eval.cli.dispatch" not in sys.modules or threading.current_thread() is not threading.main_thread():
        return False
    if command_model(sys.argv[1:]) not in MODEL_TYPES:
        return False
    from ..core.signals import interrupt_at
    from .signals import keep

    keep()
    interrupt_at("startup")
    return True


#: module -> (its hook, what a failure costs the user)
WATCHED = {
    "lmms_eval.tasks": (install_task_path, f"lmms-eval does not see our tasks; pass --include_path {TASKS_DIR}"),
    "lmms_eval.evaluator": (install_run_hook, ("runs of our models and tasks go without their hooks: no per-doc "
                                               "scores for --baseline, t2i's failed drawings scored as missing images, "
                                               "keys given in --model_args unmasked")),
}


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
            if not self.pending and self in sys.meta_path:
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
