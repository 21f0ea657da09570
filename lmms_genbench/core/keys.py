"""Stable hashes, slugs, atomic writes and strict JSON: the strings that key stores on disk.

Artifact folders, autobench call caches and generator names are all built from
these helpers, and existing stores on users' disks are found again only if the
same input gives the same string forever. So the variants the call sites need
are parameters with pinned defaults (``tests/unit/core/test_keys.py``), never changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

__all__ = [
    "atomic_write", "generator_name", "json_nulls", "model_name", "name_record", "recorded_name", "settings_hash", "slug",
    "slug_key", "stable_hash", "strict_json",
]


def stable_hash(obj: Any, length: int = 10, *, ensure_ascii: bool = False) -> str:
    """Hex sha256 prefix of ``obj`` as JSON (keys sorted, unknown types as ``str``).

    Stable across runs and hosts. ``ensure_ascii`` only changes non-ASCII text:
    escaped (``True``) or hashed as UTF-8 (``False``, the default).
    """
    blob = json.dumps(obj, sort_keys=True, default=str, ensure_ascii=ensure_ascii)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


def slug(
    text: str,
    *,
    max_len: int = 40,
    keep: str = "a-z0-9.",
    sep: str = "-",
    lower: bool = True,
    strip: str = "-.",
    strip_cut: bool = True,
    fallback: str = "x",
) -> str:
    """A filesystem-safe name: runs of characters outside ``[keep]`` become ``sep``.

    Args:
        text: anything; ``str(text)`` is slugged.
        max_len: longest result.
        keep: regex character class (without brackets) of the characters kept.
        sep: what replaces each run of other characters.
        lower: lower-case ``text`` first.
        strip: characters trimmed from both ends before cutting to ``max_len``.
        strip_cut: trim ``strip`` again from the end after cutting.
        fallback: the result when nothing is left.

    The defaults give short lower-case names such as ``stabilityai-sdxl-turbo``.
    """
    text = str(text)
    if lower:
        text = text.lower()
    cleaned = re.sub(f"[^{keep}]+", sep, text).strip(strip)[:max_len]
    if strip_cut:
        cleaned = cleaned.rstrip(strip)
    return cleaned or fallback


def slug_key(text: str, max_len: int = 48) -> str:
    """A readable, filesystem-safe, collision-free folder name for ``text``.

    The readable part keeps case, ``.``, ``_`` and ``-``; the hash of the whole
    text tells apart texts whose readable parts agree.
    """
    readable = slug(
        text, max_len=max_len, keep="A-Za-z0-9._-", sep="_", lower=False, strip="._", strip_cut=False
    )
    return f"{readable}-{stable_hash(str(text), 8)}"


def settings_hash(settings: Mapping[str, Any]) -> str:
    """8 hex digits over ``settings`` (keys sorted, non-ASCII escaped).

    Sorting keys makes the hash independent of argument order, so the same
    settings always give the same name across runs and machines.
    """
    return stable_hash(dict(settings), 8, ensure_ascii=True)


def generator_name(prefix: str, label: str, settings: Mapping[str, Any]) -> str:
    """``<prefix>-<slug of label>-<hash of settings>``: changes whenever the output can."""
    return f"{prefix}-{slug(label)}-{settings_hash(settings)}"


def model_name(model: str, label: str, args: Mapping[str, Any], weights: Mapping[str, Any] | None = None) -> str:
    """``<model>-<slug_key of label>-<hash of args>``: an lmms-eval model's name in the store
    (``host.model_identity`` picks the label and the args that decide its output). ``weights``
    (its checkpoints' digests or commits, ``core.checkpoints``) joins the hash when given; the
    names made without it stay as they were."""
    hashed = {**dict(args), "@weights": dict(weights)} if weights else dict(args)
    return f"{model}-{slug_key(label, 32)}-{stable_hash(hashed, 8)}"


#: how a name was made from the parts a store's identity file records (:func:`recorded_name`)
RECIPES: dict[str, Callable[..., str]] = {
    "generator_name": lambda r: generator_name(r["prefix"], r["label"], r["settings"]),
    "model_name": lambda r: model_name(r["model"], r["label"], r["args"], r.get("weights")),
}


def name_record(prefix: str, label: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of :func:`generator_name`, as a store writes them beside the folder they name."""
    return {"recipe": "generator_name", "prefix": prefix, "label": label, "settings": dict(settings)}


def recorded_name(record: Mapping[str, Any]) -> str | None:
    """The name ``record``'s parts hash to (its ``recipe``); None when it names no recipe."""
    recipe = RECIPES.get(str(record.get("recipe")))
    return recipe(record) if recipe is not None else None


def atomic_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Write ``path`` through ``write(binary file)`` into a temporary sibling, then rename.

    A file that exists is complete: a crash leaves at most a hidden ``.tmp`` file. It gets
    the mode ``open()`` would give it (0666 less the umask), not mkstemp's private 0600.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            try:
                os.fchmod(fh.fileno(), 0o666 & ~_umask())
            except OSError:  # a filesystem without modes (some network mounts): keep mkstemp's
                pass
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    """The process's umask, read without changing it where Linux shows it (setting and
    restoring it would race with threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def json_nulls(obj: Any, pointer: str = "") -> tuple[Any, list[str]]:
    """``obj`` with every float that is not a number (NaN, inf) replaced by None, and the
    JSON pointers (RFC 6901: ``/summary/fid@1_x``) of those values, so a writer can say why
    each one is null. Mappings, lists and tuples are walked; other values are kept."""
    if isinstance(obj, float):
        return (obj, []) if obj == obj and obj not in (float("inf"), float("-inf")) else (None, [pointer])
    if isinstance(obj, Mapping):
        out, nulls = {}, []
        for key, value in obj.items():
            out[key], found = json_nulls(value, f"{pointer}/{_escape(str(key))}")
            nulls += found
        return out, nulls
    if isinstance(obj, (list, tuple)):
        items = [json_nulls(v, f"{pointer}/{i}") for i, v in enumerate(obj)]
        return [v for v, _ in items], [p for _, found in items for p in found]
    return obj, []


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def strict_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that refuses NaN and infinities (``allow_nan=False``): results files
    are plain JSON for every reader; replace such values first (:func:`json_nulls`)."""
    return json.dumps(obj, allow_nan=False, **kwargs)
