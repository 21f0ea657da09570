"""What changes while one of our runs is evaluated, and only then.

``lmms_eval.evaluator.evaluate`` is wrapped once lmms-eval's evaluator is imported
(:mod:`.startup`). For a run whose model is not ours and whose tasks are not ours, the wrapper
calls lmms-eval's ``evaluate`` and does nothing else. Otherwise, for that call only,
:func:`scope` puts in place what the run needs and takes all of it off afterwards:

* ``ConfigurableTask.process_results`` (``--model t2i`` only): a doc the model could not draw
  becomes :class:`~lmms_genbench.hooks.host_failures.FailedDoc` values, N/A in the numbers;
* ``TaskOutput.calculate_aggregate_metric``: those docs set aside and counted (``t2i``; a task
  whose own aggregation fails without them, as MME's pair check does, gets them back as it
  scored them), and our tasks' per-doc scores written into the logged samples
  (:mod:`lmms_genbench.hooks.host_scores`);
* a log record factory that makes our own ``logging`` records printable (file names, dataset
  fields and answers in them: control characters and bidi overrides as escapes);
* a loguru patcher that masks the environment's secrets in every record, lmms-eval's own lines
  included, and escapes control characters, terminal escape sequences and bidi overrides
  (:func:`~lmms_genbench.core.errors.printable`; our model types only);
* one torch thread for a model built by a smoke preset (tiny networks: extra threads only
  contend), unless ``OMP_NUM_THREADS`` is set;
* (no signal handler of its own: the one SIGTERM/SIGINT handler (:mod:`.signals`) is in place from
  our model's construction on; an :class:`~lmms_genbench.core.errors.Interrupted` leaving
  ``evaluate`` ends the process in the run's one line, before lmms-eval's ``simple_evaluate``
  would hide it). ``$LMMS_GENBENCH_INTERRUPT_AT=score`` (tests only) makes the run send itself
  SIGTERM when our task's scoring starts (:func:`lmms_genbench.core.signals.interrupt_at`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..core import state
from .scope import is_our_task, model_type, our_tasks
from .wrap import unwrap_method, wrap_method

__all__ = ["Run", "current", "install", "scope"]


@dataclass(frozen=True)
class Run:
    """Whose run is being evaluated: our model type (or None) and our tasks in it."""

    model: str | None = None
    tasks: tuple[str, ...] = ()
    one_thread: bool = False
    changed: list[str] = field(default_factory=list, compare=False)  # the TABLE targets in place


def current() -> Run | None:
    """The run being evaluated, when it is one of ours (the state module's ``run`` slot:
    process state, not a context variable, as lmms-eval calls process_results from worker threads)."""
    return state.value("run")


def install() -> bool:
    """Wrap ``lmms_eval.evaluator.evaluate``; idempotent, False when it is missing."""
    from lmms_eval import evaluator

    def hooked(original):
        def evaluate(*args, **kwargs):
            lm = kwargs["lm"] if "lm" in kwargs else (args[0] if args else None)
            tasks = kwargs["task_dict"] if "task_dict" in kwargs else (args[1] if len(args) > 1 else None)
            run = Run(model_type(lm), tuple(our_tasks(tasks)), _wants_one_thread(lm))
            if run.model is None and not run.tasks:
                return original(*args, **kwargs)  # not ours: lmms-eval's own evaluate, untouched
            try:
                with scope(run):
                    return original(*args, **kwargs)
            except KeyboardInterrupt as exc:
                if run.model is None:
                    raise
                from .signals import exit_interrupted

                exit_interrupted(exc)

        return evaluate

    return wrap_method(evaluator, "evaluate", hooked)


def _wants_one_thread(lm: Any) -> bool:
    return getattr(lm, "scorer_preset", None) == "smoke" and "OMP_NUM_THREADS" not in os.environ


@contextlib.contextmanager
def scope(run: Run) -> Iterator[Run]:
    """Everything :data:`~lmms_genbench.hooks.TABLE` lists for the duration of a run, taken
    off after it, whatever happens inside."""
    outer = current()
    if outer is not None:  # an evaluate inside one of our runs: the outer run's hooks hold
        yield outer
        return
    undo = []
    try:
        state.put("run", run)
        if run.model == "t2i":
            undo.append(_wrap_process_results(run))
        undo.append(_wrap_aggregation(run))
        undo.append(_printable_records(run))
        if run.model is not None:
            undo.append(_mask_secrets(run))
        if run.one_thread:
            undo.append(_one_thread(run))
        yield run
    finally:
        for step in reversed([u for u in undo if u is not None]):
            step()
        run.changed.clear()
        state.put("run", None)


def _wrap_process_results(run: Run):
    from lmms_eval.api.task import ConfigurableTask

    from . import host_failures

    def hooked(original):
        def process_results(self, doc, results, *args, **kwargs):
            metrics = original(self, doc, results, *args, **kwargs)
            now = current()
            if now is None or now.model != "t2i":
                return metrics
            failed = host_failures.failed_answer(results)
            return metrics if failed is None else host_failures.mark(metrics, failed)

        return process_results

    if not wrap_method(ConfigurableTask, "process_results", hooked):
        _warn("lmms-eval lacks ConfigurableTask.process_results: docs t2i could not draw are scored as missing images")
        return None
    run.changed.append("lmms_eval.api.task.ConfigurableTask.process_results")
    return lambda: unwrap_method(ConfigurableTask, "process_results")


def _wrap_aggregation(run: Run):
    from lmms_eval.evaluator_utils import TaskOutput

    from . import host_failures, host_scores

    def hooked(original):
        def calculate_aggregate_metric(self, *args, **kwargs):
            now = current()
            if now is not None and is_our_task(getattr(self, "task", None)):
                from ..core.signals import interrupt_at

                interrupt_at("score")
            t2i = now is not None and now.model == "t2i"
            held = host_failures.set_aside(self) if t2i else None
            try:
                out = original(self, *args, **kwargs)
            except Exception as exc:
                if held is None or not held.before:
                    raise
                host_failures.put_back(held)  # the task's own numbers, as without us
                _warn(f"{getattr(self, 'task_name', 'a task')} cannot leave out the docs t2i could not draw "
                      f"({type(exc).__name__}: {exc}); they are scored as the task scores them")
                out = original(self, *args, **kwargs)
            if held is not None:
                host_failures.report(self, held)
            if now is not None and is_our_task(getattr(self, "task", None)):
                host_scores.fill(self)
            return out

        return calculate_aggregate_metric

    if not wrap_method(TaskOutput, "calculate_aggregate_metric", hooked):
        _warn("lmms-eval lacks TaskOutput.calculate_aggregate_metric: no per-doc scores for --baseline, "
              "and docs t2i could not draw are scored as missing images")
        return None
    run.changed.append("lmms_eval.evaluator_utils.TaskOutput.calculate_aggregate_metric")
    return lambda: unwrap_method(TaskOutput, "calculate_aggregate_metric")


def _warn(line: str) -> None:
    from loguru import logger

    logger.warning(f"lmms-genbench: {line}")


def _mask_secrets(run: Run):
    """A loguru patcher (before any configured one) masking secrets in each record's message.
    loguru 0.7 cannot reset its patcher through ``configure``; its core's ``patcher`` attribute
    is set and put back directly, and without it nothing is changed."""
    from loguru import logger

    from ..core.errors import printable
    from ..core.secrets import scrub

    core = getattr(logger, "_core", None)
    if core is None or not hasattr(core, "patcher"):
        return None
    before = core.patcher

    def mask(record):
        record["message"] = printable(scrub(record["message"]))
        if before is not None:
            before(record)

    mask.lmms_genbench = True
    core.patcher = mask
    run.changed.append("loguru.logger patcher")

    def undo():
        if core.patcher is mask:
            core.patcher = before

    return undo


def _printable_records(run: Run):
    """Our own ``logging`` records (loggers ``lmms_genbench.*``) made printable: a file name, a
    dataset field or a model's answer in a log line shows control characters and bidi overrides
    as escapes (issue 43), as lmms-eval's loguru lines do under :func:`_mask_secrets`."""
    import logging

    from ..core.errors import printable

    before = logging.getLogRecordFactory()

    def factory(*args, **kwargs):
        record = before(*args, **kwargs)
        if record.name.startswith("lmms_genbench"):
            try:
                record.msg, record.args = printable(record.getMessage()), ()
            except Exception:  # a record whose arguments do not format: logging reports it as before
                pass
        return record

    factory.lmms_genbench = True
    logging.setLogRecordFactory(factory)
    run.changed.append("logging.setLogRecordFactory")

    def undo():
        if logging.getLogRecordFactory() is factory:
            logging.setLogRecordFactory(before)

    return undo


def _one_thread(run: Run):
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    run.changed.append("torch.set_num_threads")
    return lambda: torch.set_num_threads(before)
