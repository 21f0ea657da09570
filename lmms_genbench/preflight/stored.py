"""A run whose store already holds every hop it needs (a finished store rescored on a laptop):
found from what the store wrote down, so the preflight asks no weights, GPU or Hub for the
describer and the generator, which will not load.

The describer's folder is found by its name (it needs no weights); the generator's or unified
model's by the arguments its ``identity.json`` records as given (store/identity.py): naming it
again would read the weights (a folder's digest) or the Hub (a pipeline's class). A task counts as held when its namespace's last ``runs.jsonl`` record
of the task failed nothing and had as many chains as the namespace holds complete. Stores
written before identity files, or any doubt, leave the full check in place."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..command import RunCommand
from ..core.errors import ActionableError
from ..core.keys import recorded_name
from ..core.model_args import public_args

__all__ = ["stored_run"]


def stored_run(command: RunCommand) -> str | None:
    """One line saying the store holds every hop ``command`` needs, or None."""
    args = command.cycle
    if command.model != "cycle" or args is None or not command.tasks or command.problems:
        return None
    if args.stop_after_hop is not None or args.shard is not None:
        return None
    from ..store import default_root
    from ..store.identity import changed_parts, check_identity, checkpoints_now

    root = Path(str(command.top.get("artifacts") or default_root())).expanduser()
    if args.unified:
        wanted = [("unified", args.unified, args.unified_args)] * 2
    else:
        wanted = [("describer", args.describer, args.describer_args), ("generator", args.generator, args.generator_args)]
    folder = root
    if not args.unified:  # a describer's name needs its weights' digest only (cached): its folder is found by it
        from ..host import model_record
        from ..store.identity import same_run_elsewhere

        record = {**model_record(args.describer, args.describer_args), "given": public_args(args.describer_args)}  # type: ignore[arg-type]
        folder = root / recorded_name(record)  # type: ignore[operator]
        if not folder.is_dir():
            _say_stale("describer", args.describer, same_run_elsewhere(root, record, folder.name), command.tasks)
            return None
        wanted = wanted[1:]
    for role, name, given in wanted:
        current, stale = [], []
        for child in _children(folder):
            try:
                record = check_identity(child)
            except ActionableError:  # one that does not name its folder (a legacy name, adopted): the run's
                continue
            if record and record.get("model") == name and record.get("given") == _as_written(public_args(given)):
                # the same arguments: the same weights too (each checkpoint's digest or commit as it is now)?
                changed = changed_parts(record, checkpoints_now(record))
                (stale if changed else current).append((child, changed))
        if len(current) != 1:
            if not current:
                _say_stale(role, name, stale, command.tasks)
            return None
        folder = current[0][0]
    held = [task for task in command.tasks if _holds(folder, task)]
    if len(held) != len(command.tasks):
        return None
    for role in command.roles:  # the run names its roles as the store does, planning nothing
        role.stored = folder.parent.name if role.kind == "describer" else folder.name
    return (f"the store {folder} holds every hop of {', '.join(held)}, made by the same weights (each checkpoint's "
            "digest or Hub commit checked); devices and the Hub are not asked (the models load only if a hop "
            "turns out missing)")


def _say_stale(role: str, name: str, stale: list[tuple[Path, list[str]]], tasks) -> None:
    """One line per store folder that holds every hop of ``tasks`` for the same model and
    arguments but was made by other weights (changed in place, another revision): not reused."""
    for other, changed in stale:
        if all(_holds(other, task) or any(_holds(c, task) for c in _children(other)) for task in tasks):
            print(f"lmms-genbench: preflight: the store {other} holds every hop of {', '.join(tasks)} for the {role} "
                  f"{name} with these arguments, but its weights differ ({'; '.join(changed)}): nothing of it is "
                  "reused, the run computes a new namespace", file=sys.stderr)


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []


def _as_written(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _holds(generator_folder: Path, task: str) -> bool:
    """Whether a namespace of ``task`` under ``generator_folder`` holds every chain's every hop."""
    for namespace in _children(generator_folder):
        try:
            protocol = json.loads((namespace / "protocol.json").read_text(encoding="utf-8"))
            lines = (namespace / "runs.jsonl").read_text(encoding="utf-8").splitlines()
        except (OSError, ValueError):
            continue
        if protocol.get("task") != task:
            continue
        records = [json.loads(line) for line in lines if line.strip()]
        last = next((r for r in reversed(records) if isinstance(r, dict) and r.get("task") == task), None)
        if last is None or last.get("failed") or last.get("outside_shard") or last.get("shard"):
            continue
        chains = int(last.get("chains") or 0)
        hops = int(protocol.get("hops") or 0)
        complete = sum(1 for chain in _children(namespace) if _last_hop(chain) >= hops)
        if chains and complete >= chains:
            return True
    return False


def _last_hop(chain: Path) -> int:
    """The highest hop file a chain folder holds (-1 for none)."""
    numbers = [int(p.name[:3]) for p in chain.iterdir() if p.name[:3].isdigit() and p.suffix in (".png", ".txt")]
    return max(numbers, default=-1)
