"""Every task name ``--tasks`` accepts (tasks, groups, tags of lmms-eval's task folders and
ours), read from the YAML files' ``task:``, ``group:`` and ``tag:`` lines without parsing them:
lmms-eval's TaskManager indexes the same files in tens of seconds, and logs as it goes."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from ..command.names import did_you_mean
from ..core import state
from .problems import Problem

__all__ = ["task_names", "unknown_task_problems"]

_ENTRY = re.compile(r"""^["']?(task|group|tag)["']?\s*:[ \t]*(.*)$""")
_ITEM = re.compile(r"^\s*-\s*(\S+)\s*$")
#: a --tasks entry that is a path or pattern, not a name: lmms-eval's to resolve
_NOT_A_NAME = re.compile(r"[/*?\[\]]|\.ya?ml$")


def task_names(include_path: Sequence[str] = ()) -> frozenset[str]:
    """The names (those of ``--include_path``'s folders too), each folder read once per process."""
    names = state.remember("task names", lambda: _read_task_names(_folders()))
    return names | frozenset().union(*(state.remember(("task names", p), lambda p=p: _read_task_names([Path(p)]))
                                       for p in include_path))


def _folders() -> list[Path]:
    import lmms_eval

    return [Path(lmms_eval.__file__).resolve().parent / "tasks", Path(__file__).resolve().parent.parent / "tasks"]


def _read_task_names(folders: Sequence[Path]) -> frozenset[str]:
    names: set[str] = set()
    for root in folders:
        for directory, _dirs, files in os.walk(root):
            for name in files:
                if name.endswith(("yaml", ".yml")):
                    names |= _names_in(Path(directory) / name)
    return frozenset(names)


def _names_in(path: Path) -> set[str]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return set()
    found = set()
    for i, line in enumerate(lines):
        entry = _ENTRY.match(line)
        if not entry:
            continue
        value = entry[2].split("#")[0].strip().strip("\"'")
        if value.startswith("["):
            found |= {v.strip().strip("\"'") for v in value.strip("[]").split(",")}
        elif value:
            found.add(value)
        elif entry[1] == "tag":  # a list of tags on the lines below
            for item in lines[i + 1:]:
                listed = _ITEM.match(item)
                if not listed:
                    break
                found.add(listed[1].strip("\"'"))
    return found - {""}


def unknown_task_problems(tasks: list[str], include_path: Sequence[str] = ()) -> list[Problem]:
    """One problem per ``--tasks`` name no task folder defines, with the nearest that does."""
    names = task_names(include_path)
    unknown = [t for t in tasks if t not in names and not _NOT_A_NAME.search(t)]
    return [Problem(f"no task {t}{did_you_mean(t, sorted(names))}",
                    "give task names that `lmms-eval --tasks list` shows (ours: lmms-genbench's README)")
            for t in unknown]
