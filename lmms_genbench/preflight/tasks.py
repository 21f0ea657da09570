"""What the named tasks read before their first doc: the Hub datasets of our task YAMLs
(``dataset_path`` and ``dataset_name``, plus the sources a task joins in), and the image folder
of ``mmeception_folder``. Tasks that are not ours are lmms-eval's to load: not checked here."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..core import state
from .problems import Problem

__all__ = ["HubDataset", "folder_problem", "hub_datasets", "limit_note", "limit_problem", "unknown_tasks"]

TASKS = Path(__file__).resolve().parent.parent / "tasks"
#: image-folder variable of the folder task (tasks/mmeception/utils.py reads it)
FOLDER_ENV = "MMECEPTION_IMAGE_DIR"


@dataclass(frozen=True)
class HubDataset:
    task: str
    path: str
    config: str | None
    revision: str | None


def _configs() -> dict[str, dict]:
    """Our tasks' YAMLs by task name, ``include:`` resolved; loaded as text (no ``!function``);
    read once per process."""
    return state.remember("task configs", _read_configs)


def _read_configs() -> dict[str, dict]:
    from lmms_eval.utils import load_yaml_config

    found = {}
    for path in sorted(TASKS.glob("*/*.yaml")):
        if path.name.startswith("_"):
            continue
        try:
            config = load_yaml_config(str(path), mode="simple")
        except Exception:  # noqa: BLE001, S112 - a YAML that does not read is lmms-eval's to report
            continue
        if isinstance(config.get("task"), str):
            found[config["task"]] = config
    return found


def _joined(task: str) -> list[tuple[str, str | None, str | None]]:
    """Sources a task's ``process_docs`` joins in (the Semantic Drift pairs' images and captions)."""
    if task != "sdp_nocaps":
        return []
    from ..data.sdp import SOURCES

    return [(source.table.copies[0].path, None, source.table.copies[0].revision) for source in SOURCES.values()]


def hub_datasets(tasks: list[str]) -> list[HubDataset]:
    """The Hub datasets ``tasks`` read, each once."""
    seen, found = set(), []
    for task in tasks:
        config = _configs().get(task)
        if config is None:
            continue
        path = config.get("dataset_path")
        kwargs = config.get("dataset_kwargs") or {}
        entries = []
        if isinstance(path, str) and path.count("/") == 1 and not (TASKS / path).exists():
            entries.append((path, config.get("dataset_name"), kwargs.get("revision")))
        for entry in [*entries, *_joined(task)]:
            if entry[:2] not in seen:
                seen.add(entry[:2])
                found.append(HubDataset(task, *entry))
    return found


def unknown_tasks(tasks: list[str]) -> list[str]:
    """The names among ``tasks`` that are not ours (lmms-eval's own tasks, groups)."""
    return [t for t in tasks if t not in _configs()]


def folder_problem(tasks: list[str]) -> Problem | None:
    """The folder task without a folder of images."""
    if "mmeception_folder" not in tasks:
        return None
    from ..data.photos import folder_records

    root = os.environ.get(FOLDER_ENV)
    if not root:
        return Problem(f"task mmeception_folder reads the folder that {FOLDER_ENV} names, and it is not set",
                       f"set {FOLDER_ENV}=<a folder of images> (sub-folders become categories)")
    try:
        folder_records(root)
    except (OSError, ValueError) as exc:
        return Problem(f"task mmeception_folder: {exc}",
                       f"set {FOLDER_ENV} to a folder that holds .jpg/.png images (sub-folders become categories)")
    return None


#: what --limit takes, as lmms-eval 0.7.3's own help says it
LIMIT_FIX = ("give --limit N (N >= 1 docs per task), a fraction 0 < f < 1 of each task's docs, or -1 (or no "
             "--limit) for every doc")


def limit_problem(limit: float | None) -> Problem | None:
    """A ``--limit`` lmms-eval 0.7.3 cannot run. ``--limit 0`` builds each doc's prompt (the
    builder reads ``int(limit) if limit else None``), then keeps ``instances[:0]`` and stops with
    "task.build_requests() did not find any docs!", a traceback and exit status 0, writing no
    results (api/task.py ``build_all_requests``; seen on mmeception_smoke 2026-11-29); any other
    negative than -1 stops it with a ValueError (evaluator_utils.get_sample_size, __main__.py)."""
    if limit is None or limit == -1 or limit > 0:
        return None
    if limit == 0:
        return Problem("--limit 0 gives lmms-eval 0.7.3 no doc to run: it stops with \"task.build_requests() did not "
                       "find any docs!\" (a traceback, exit status 0, no results file)", LIMIT_FIX)
    return Problem(f"--limit {limit:g} is refused by lmms-eval 0.7.3 (it takes -1 or a limit >= 0), with a "
                   "traceback", LIMIT_FIX)


def limit_note(limit: float | None) -> str | None:
    """How lmms-eval 0.7.3 reads a ``--limit`` that is not a whole count of docs: below 1 a
    fraction of each task's docs, rounded up (evaluator_utils.get_sample_size); above 1 with a
    fraction, cut to its whole part."""
    if limit is None or limit <= 0 or limit == int(limit):
        return None
    if limit < 1:
        return (f"--limit {limit:g} is a fraction: lmms-eval runs {limit:.0%} of each task's docs, rounded up "
                "(a limit below 1 is a share, from 1 on a count)")
    return f"--limit {limit:g} is read as {int(limit)} docs per task (lmms-eval cuts it to its whole part)"
