"""Preflight: everything a run needs, checked in seconds before any weight loads.

:func:`check_run` takes what ``lmms-eval`` is given (``--model``, ``--model_args``, ``--tasks``,
``--output_path``, ``--limit``) and returns every problem at once: model ids that do not resolve
at their revision, local folders their loaders cannot read (:mod:`.folders`: read by the same
functions the loaders read them with), files a role reads that its repository lacks, a
``--limit`` lmms-eval cannot run (0, negatives other than -1),
the Hub unreachable (one line naming the endpoint and the offline switch), datasets missing
or gated for this token, CUDA asked for and absent, API keys unset, a store that cannot be
written, and ``describer.*``/``generator.*`` settings the classes refuse (their planners, no
weights). ``lmms-genbench check`` prints them; :func:`at_start` ends a run with them (exit 1)
at the start of every ``lmms-eval --model cycle``, ``t2i`` and ``chef`` command, unless
``LMMS_GENBENCH_PREFLIGHT=0``. The run is read once (:func:`lmms_genbench.command.read_command`);
its tasks come from lmms-eval's own parser. A run whose store already holds every hop
(:mod:`.stored`) is told in one line, and its describer and generator are not checked.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..command import RunCommand, lmms_eval_arguments, name_problems, read_command
from .problems import Problem, as_error, format_problems
from .stored import stored_run

__all__ = ["PREFLIGHT_ENV", "Problem", "as_error", "at_start", "check_run", "format_problems", "start_run"]

#: "0" turns the check at the start of a run off (``lmms-genbench check`` always runs it)
PREFLIGHT_ENV = "LMMS_GENBENCH_PREFLIGHT"


def check_run(command: RunCommand | str, model_args: dict[str, Any] | None = None, tasks: Sequence[str] = (),
              output_path: str | None = None, processes: int = 1) -> list[Problem]:
    """Every problem of the run ``command`` (a :class:`~lmms_genbench.command.RunCommand`, or
    ``--model``, ``--model_args``, ``--tasks``, ``--output_path`` to read into one): see the
    module docstring; the Hub's collapsed into one line. Empty when it may start."""
    from .folders import otherwise_of, role_folder_problem
    from .hub import HubProbe, collapse
    from .roles import device_problem, key_problems, setting_problems, weights_needed
    from .task_names import unknown_task_problems
    from .tasks import folder_problem, hub_datasets, limit_note, limit_problem

    if isinstance(command, str):
        command = read_command(command, model_args or {}, tasks, output_path, processes)
    problems = [Problem(p.cause, p.fix) for p in [*command.problems, *name_problems(command)]]
    problems += unknown_task_problems(list(command.tasks), command.include_path)
    limited = limit_problem(command.limit)
    problems += [limited] if limited else []
    note = limit_note(command.limit)
    if note:
        print(f"lmms-genbench: preflight: {note}", file=sys.stderr)
    stored = stored_run(command)
    if stored is not None:
        print(f"lmms-genbench: preflight: {stored}", file=sys.stderr)
    roles = [r for r in command.roles if stored is None or r.kind == "describer" and r.prefix == "judge."]
    cuda = _cuda_devices() if roles else 0
    probes: list[HubProbe] = []  # made at the first Hub id: a run that needs none never asks

    def weights_problem(role) -> Problem | None:
        found = role_folder_problem(role, otherwise_of(command, role))  # its local folders, read by its loader's own reading
        if found is not None:
            return found
        for weights in weights_needed(role):
            found = one_weights_problem(role, *weights)
            if found is not None:
                return found
        return None

    def one_weights_problem(role, what, value, revision, needed) -> Problem | None:
        if _looks_local(value):
            if Path(value).expanduser().is_dir():
                return None  # read above, when its loader reads it as given
            from ..core.errors import load_failure  # the same line as a load that fails on it

            line = load_failure(FileNotFoundError(value), role.kind, role.name, role.args, role.prefix)
            return Problem(line.cause, line.fix)
        probes[:] = probes or [HubProbe()]
        return probes[0].model(what, value, revision, needed)

    for role in roles:
        # a generator's settings are read from its weights' config: only once those are found;
        # a describer's class defaults (which weights, which device) come from its settings check
        found = weights_problem(role) if role.kind != "describer" else None
        problems += [found] if found else setting_problems(role, cuda > 0)
        if role.kind == "describer":
            found = weights_problem(role)
            problems += [found] if found else []
    device = device_problem(roles, cuda, command.processes)
    problems += [device] if device else []
    problems += key_problems(roles)
    for dataset in hub_datasets(list(command.tasks)):
        probes[:] = probes or [HubProbe()]
        found = probes[0].dataset(dataset.task, dataset.path, dataset.config, dataset.revision)
        problems += [found] if found else []
    folder = folder_problem(list(command.tasks))
    problems += [folder] if folder else []
    problems += _store_problems(command.model, command.top, command.output_path)
    return collapse(problems, probes[0] if probes else None, smoke=bool(command.top.get("preset")))


def _cuda_devices() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _looks_local(value: str) -> bool:
    """A folder rather than a Hub id: it exists, or it is written as a path (a Hub id is org/name)."""
    return (os.path.exists(os.path.expanduser(value)) or value.startswith(("/", ".", "~"))
            or value.count("/") != 1 or os.sep != "/" and os.sep in value)


def _store_problems(model: str, top: dict[str, Any], output_path: str | None) -> list[Problem]:
    """Folders the run writes: the artifact store (cycle), the image folder (t2i), --output_path."""
    folders = []
    if model == "cycle":
        from ..store import default_root

        folders.append(("the artifact store", Path(str(top.get("artifacts") or default_root())).expanduser(),
                        "pass --model_args artifacts=<a writable folder> (or set LMMS_GENBENCH_ARTIFACTS)"))
    if model == "t2i" and top.get("output_dir"):
        folders.append(("--model t2i's output_dir", Path(str(top["output_dir"])).expanduser(),
                        "pass --model_args output_dir=<a writable folder>"))
    if output_path:
        folders.append(("--output_path", Path(output_path).expanduser(), "give --output_path <a writable folder>"))
    problems = []
    for what, folder, fix in folders:
        if what == "the artifact store" and folder.is_dir():
            continue  # a finished store on a read-only disk still scores: the run's first write tells
        reason = _unwritable(folder)
        if reason:
            problems.append(Problem(f"{what} {folder} cannot be written ({reason})", fix))
    return problems


def _unwritable(folder: Path) -> str | None:
    """Why nothing can be written in ``folder`` (its nearest existing parent when it is not there
    yet: the run creates it), or None. Writes and removes one small file."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a folder"
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".lmms-genbench-check-"):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def at_start(command: RunCommand) -> None:
    """The preflight of a run starting now (called by the model types' constructors with what
    they read): every problem at once, then exit 1 (:func:`as_error`). The tasks and the output
    path come from lmms-eval's own reading of the command line; a model built from Python (no
    such command) is not checked: ``lmms-genbench check`` checks its arguments."""
    if os.environ.get(PREFLIGHT_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return
    found = lmms_eval_arguments()
    if found is None:
        return
    tasks, output_path, include_path, limit = found
    problems = check_run(dataclasses.replace(command, tasks=tuple(tasks), output_path=output_path,
                                             include_path=tuple(include_path), limit=limit))
    if problems:
        raise as_error(problems)


def start_run(model: str, model_args: dict[str, Any]) -> RunCommand:
    """A model type's start: ``--model_args`` read once (:func:`read_command`), then :func:`at_start`;
    a problem of the arguments themselves stops a model built from Python, or with the preflight
    turned off, in the same one line per problem."""
    command = read_command(model, model_args)
    at_start(command)
    if command.problems:
        raise as_error([Problem(p.cause, p.fix) for p in command.problems])
    return command
