"""What made a store's namespace, written readably beside its hashed folder name.

A describer's folder (``root/<describer>/``), a generator's (``root/<describer>/<generator>/``)
and a unified model's hold ``identity.json``: the model, its arguments as given (credentials
left out), and the parts the folder's name is hashed from (``recipe``: ``core.keys``'s
``generator_name`` or ``model_name``, with the label and the settings: ids, revisions, dtype,
every setting in the key, and each checkpoint's digest or Hub commit) and ``checkpoints``: where
each checkpoint was read from and what it held (``core.checkpoints``), so a rerun reads them
again and says which differs (:func:`checkpoints_now`, :func:`changed_parts`,
:func:`same_run_elsewhere`). Opening a namespace whose file does not hash to the folder's name is
refused, naming the file: its drawings were not made by what the file says. A folder named the
way earlier versions named it is adopted (:func:`adopt_folder`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.checkpoints import checkpoint_identity
from ..core.errors import ActionableError
from ..core.keys import atomic_write, recorded_name

__all__ = ["IDENTITY_FILE", "adopt_folder", "changed_parts", "check_identity", "checkpoints_now", "identity_folders", "read_identity",
           "same_run_elsewhere", "write_identity"]

logger = logging.getLogger(__name__)

IDENTITY_FILE = "identity.json"
#: where an adopted folder's identity file, which names its old name, is kept
BEFORE_FILE = "identity.before.json"


def read_identity(folder: Path) -> dict[str, Any] | None:
    """``folder``'s identity as written, or None when it has none (a store written before)."""
    path = Path(folder) / IDENTITY_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ActionableError(f"the store's identity file {path} does not read ({exc})",
                              f"restore it from a copy of the store, or move {path} away (it is written again "
                              "at the next run)") from exc
    if not isinstance(record, dict):
        raise ActionableError(f"the store's identity file {path} holds no identity",
                              f"move {path} away (it is written again at the next run)")
    return record


def check_identity(folder: Path) -> dict[str, Any] | None:
    """``folder``'s identity, checked against its name: its parts hash to the folder's name
    (a record without a recipe: its ``name`` is the folder's). None when it has none.

    Raises:
        ActionableError: the file names another drawing than the folder holds (the file named).
    """
    folder = Path(folder)
    record = read_identity(folder)
    if record is None:
        return None
    try:
        name = recorded_name(record) or record.get("name")
    except (KeyError, TypeError) as exc:  # a recipe whose parts are missing
        name = f"(its parts do not hash: {exc!r} missing)"
    if name != folder.name:
        path = folder / IDENTITY_FILE
        raise ActionableError(
            f"the store's identity file {path} does not describe its folder: what it records hashes to {name}, "
            f"not {folder.name} (edited by hand, or copied from another namespace)",
            f"restore {path} from a copy of the store, or move the folder {folder} away and rerun (it is recomputed)")
    return record


def write_identity(folder: Path, record: Mapping[str, Any]) -> Path:
    """Write ``record`` (with ``name``: the folder's) as ``folder``'s identity, once: a folder
    that has one keeps it, after :func:`check_identity` (it refuses a file that does not
    match). Returns the file."""
    folder = Path(folder)
    path = folder / IDENTITY_FILE
    if path.exists():
        check_identity(folder)
        return path
    payload = {"name": folder.name, **{k: v for k, v in record.items() if k != "name"}}
    blob = json.dumps(payload, indent=2, sort_keys=True, default=str).encode("utf-8")
    atomic_write(path, lambda fh: fh.write(blob))
    check_identity(folder)  # what was written hashes back to the name (a writer's bug otherwise)
    return path


def identity_folders(root: Path) -> Iterator[Path]:
    """Every folder under ``root`` (itself included) that holds an identity file, outermost first."""
    root = Path(root)
    if (root / IDENTITY_FILE).is_file():
        yield root
    for path in sorted(root.rglob(IDENTITY_FILE), key=lambda p: (len(p.parts), p)):
        if path.parent != root and not any(part.startswith(".") for part in path.relative_to(root).parts):
            yield path.parent


def adopt_folder(parent: Path, name: str, legacy_names: Sequence[str]) -> Path | None:
    """Rename a store folder named the legacy way (``parent/<legacy>``: before whole-file weight
    hashing, or before a role's weights were part of its name) to its current name, when only
    the legacy one exists, so its hops are reused, not redrawn. The folder is taken to hold the
    work of the weights present now (the legacy name could not tell); its identity file, which
    names the old name, is kept as ``identity.before.json``. Returns the folder adopted, or None."""
    current = Path(parent) / name
    if current.exists():
        return None
    for legacy in legacy_names:
        old = Path(parent) / legacy
        if legacy != name and old.is_dir():
            try:
                os.rename(old, current)
            except OSError as exc:  # another process adopted it first, or a read-only store
                logger.debug("store folder %s not adopted: %s", old, exc)
                return None
            record = current / IDENTITY_FILE
            if record.is_file() and (read_identity(current) or {}).get("name") != name:
                os.replace(record, current / BEFORE_FILE)  # the next write_identity names the new name
            logger.warning("lmms-genbench: the store folder %s (named before its weights' digest or revision was "
                           "part of the name) is now %s; its stored hops are reused", old, current.name)
            return current
    return None


def changed_parts(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two identity records' checkpoints (``checkpoints``: argument ->
    ``{source, folder|commit}``), one phrase each (``pretrained=/ckpt: folder 1a2b.. -> 3c4d..``)."""
    before, after = dict(old.get("checkpoints") or {}), dict(new.get("checkpoints") or {})
    out = []
    for arg in sorted(set(before) | set(after)):
        a, b = dict(before.get(arg) or {}), dict(after.get(arg) or {})
        if {k: v for k, v in a.items() if k != "source"} != {k: v for k, v in b.items() if k != "source"}:
            source = b.get("source") or a.get("source")
            show = lambda d: ", ".join(f"{k} {v}" for k, v in sorted(d.items()) if k != "source") or "unknown"  # noqa: E731
            out.append(f"{arg}={source}: {show(a)} -> {show(b)}")
    return out


def same_run_elsewhere(parent: Path, record: Mapping[str, Any], name: str) -> list[tuple[Path, list[str]]]:
    """The folders beside ``parent/name`` whose identity names the same model with the same
    arguments as ``record`` but other weights (:func:`changed_parts`): the work of the checkpoint
    as it was before it changed in place, or of another revision. Empty when there is none."""
    out = []
    try:
        siblings = sorted(p for p in Path(parent).iterdir() if p.is_dir() and p.name != name)
    except OSError:
        return []
    for sibling in siblings:
        try:
            other = read_identity(sibling)
        except ActionableError:
            continue
        if not other or other.get("model") != record.get("model") or other.get("given") != _as_written(record.get("given")):
            continue
        changed = changed_parts(other, record)
        if changed:
            out.append((sibling, changed))
    return out


def _as_written(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def checkpoints_now(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record``'s checkpoints as they are now (each source's digest or commit read again, through
    the hash cache: a stat per file), in the shape :func:`changed_parts` compares."""
    now = {}
    for arg, entry in dict(record.get("checkpoints") or {}).items():
        entry = dict(entry or {})
        found = checkpoint_identity(str(entry.get("source")), entry.get("revision"))
        now[arg] = {k: v for k, v in entry.items() if k in ("source", "revision")} | (found or {})
    return {"checkpoints": now}
