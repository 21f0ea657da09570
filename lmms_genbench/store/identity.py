"""What made a store's namespace, written readably beside its hashed folder name.

A describer's folder (``root/<describer>/``), a generator's (``root/<describer>/<generator>/``)
and a unified model's hold ``identity.json``: the model, its arguments as given (credentials
left out), and the parts the folder's name is hashed from (``recipe``: ``core.keys``'s
``generator_name`` or ``model_name``, with the label and the settings: ids, revisions, the
folder and its weights' digest, dtype, every setting in the key). Opening a namespace whose
file does not hash to the folder's name is refused, naming the file: its drawings were not
made by what the file says.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..core.errors import ActionableError
from ..core.keys import atomic_write, recorded_name

__all__ = ["IDENTITY_FILE", "check_identity", "identity_folders", "read_identity", "write_identity"]

IDENTITY_FILE = "identity.json"


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
