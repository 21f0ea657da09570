"""What a checkpoint holds, named without loading it: every role's weights key the store by this.

A local folder is identified by the SHA-256 of every byte of its configs and weight files (with
their relative names and sizes), so a moved or copied folder keeps its identity and any edit
of any tensor gives a new one. Hashing a weight file is paid once per change of it: the
digests are cached by (path, size, mtime, inode) in ``weight_hashes.json`` under
``$LMMS_GENBENCH_CACHE`` (default ``~/.cache/lmms_genbench``), so a rerun costs one ``stat``
per file, not a read of the checkpoint.

A Hub id is identified by the commit its revision resolves to in the local Hugging Face cache
(``refs/<revision>``: what ``from_pretrained`` loads offline), so a new revision of the same id
is another checkpoint. :func:`checkpoint_identity` is the one entry point for both.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .keys import atomic_write

__all__ = ["checkpoint_files", "checkpoint_identity", "checkpoint_keys", "folder_identity", "hash_cache_path",
           "hub_commit", "is_config", "is_local_folder", "recorded_checkpoints", "sha256_path"]

logger = logging.getLogger(__name__)

#: configs and tokenizer files: hashed whole (they are small)
CONFIG_SUFFIXES = (".json", ".txt", ".model", ".yaml", ".yml", ".tiktoken", ".py")
#: tensor files: hashed whole, through the cache
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".msgpack", ".onnx", ".h5")
#: a config larger than this is identified like a weight file
MAX_CONFIG_BYTES = 16 * 1024 * 1024
#: read size while hashing, and weight files hashed at once (a checkpoint's shards)
CHUNK = 8 * 1024 * 1024
HASH_THREADS = min(4, os.cpu_count() or 1)

_CACHE_LOCK = threading.Lock()


def is_local_folder(pretrained: str) -> bool:
    return os.path.isdir(os.path.expanduser(pretrained))


def hash_cache_path() -> Path:
    root = os.environ.get("LMMS_GENBENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "lmms_genbench")
    return Path(root).expanduser() / "weight_hashes.json"


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def sha256_path(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


class _HashCache:
    """``{real path: [size, mtime_ns, inode, sha256]}`` in one JSON file; a file whose stamp
    changed is hashed again. An unreadable or unwritable cache only costs rehashing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.entries = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(self.entries, dict):
                self.entries = {}
        except (OSError, ValueError):
            self.entries = {}
        self.changed = False

    def cached(self, path: Path) -> str | None:
        entry = self.entries.get(str(path.resolve()))
        if isinstance(entry, list) and len(entry) == 4 and entry[:3] == _stamp(path):
            return entry[3]
        return None

    def digest(self, path: Path) -> str:
        """``path``'s SHA-256, from the cache or read (thread-safe: hashlib frees the GIL while
        it hashes, so several files hash at once)."""
        found = self.cached(path)
        if found is not None:
            return found
        stamp = _stamp(path)
        digest = sha256_path(path)
        if _stamp(path) == stamp:  # written to while hashed: not cached
            self.entries[str(path.resolve())] = [*stamp, digest]
            self.changed = True
        return digest

    def save(self) -> None:
        if not self.changed:
            return
        try:
            fresh = json.loads(self.path.read_text(encoding="utf-8"))  # another process's entries stay
            merged = {**(fresh if isinstance(fresh, dict) else {}), **self.entries}
        except (OSError, ValueError):
            merged = self.entries
        blob = json.dumps(merged, sort_keys=True).encode("utf-8")
        try:
            atomic_write(self.path, lambda fh: fh.write(blob))
        except OSError as exc:
            logger.debug("weight hash cache %s not written: %s", self.path, exc)


def checkpoint_files(root: Path) -> list[Path]:
    """Configs and weight files under ``root``, hidden ones (caches, ``.git``) left out."""
    out = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(directory) / name
            if not name.startswith(".") and path.suffix in CONFIG_SUFFIXES + WEIGHT_SUFFIXES:
                out.append(path)
    return out


def is_config(path: Path, size: int) -> bool:
    return path.suffix in CONFIG_SUFFIXES and size <= MAX_CONFIG_BYTES


def folder_identity(folder: str) -> str:
    """16 hex digits naming every byte a local checkpoint folder holds (see the module docstring)."""
    root = Path(os.path.expanduser(folder)).resolve()
    entries = {}
    with _CACHE_LOCK:
        cache = _HashCache(hash_cache_path())
        files = [(path, path.stat().st_size) for path in checkpoint_files(root)]
        workers = max(1, min(HASH_THREADS, sum(1 for p, n in files if not is_config(p, n))))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="genbench-hash") as pool:
            digests = pool.map(lambda item: sha256_path(item[0]) if is_config(*item) else cache.digest(item[0]), files)
            for (path, size), digest in zip(files, digests):
                entries[path.relative_to(root).as_posix()] = {"size": size, "sha256": digest}
        cache.save()
    blob = json.dumps(entries, sort_keys=True).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


#: a Hub repository id (``org/name`` or ``name``), and a full commit hash
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def hub_commit(repo_id: str, revision: str | None = None) -> str | None:
    """The commit ``revision`` (default ``main``) of model ``repo_id`` resolves to in the local
    Hugging Face cache (``HF_HUB_CACHE``: its ``refs/`` file, what an offline ``from_pretrained``
    loads); a full commit hash is its own answer. None: not in the cache (not downloaded yet)."""
    if revision and _COMMIT.match(revision):
        return revision
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id):
        return None
    from huggingface_hub import constants  # lmms-eval's own dependency: imported only when asked

    refs = Path(constants.HF_HUB_CACHE) / ("models--" + repo_id.replace("/", "--")) / "refs" / (revision or "main")
    try:
        commit = refs.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return commit if _COMMIT.match(commit) else None


def checkpoint_identity(source: str, revision: str | None = None) -> dict[str, str] | None:
    """What checkpoint ``source`` holds: ``{"folder": digest}`` for a local folder (:func:`folder_identity`),
    ``{"commit": sha}`` for a Hub id found in the local cache (:func:`hub_commit`); None for anything
    else (a Hub id not downloaded yet, an API model name): then only its name keys it."""
    if not isinstance(source, str) or not source:
        return None
    if is_local_folder(source):
        return {"folder": folder_identity(source)}
    commit = hub_commit(source, revision)
    return None if commit is None else {"commit": commit}


def checkpoint_keys(sources: dict[str, object], revision: str | None = None) -> dict[str, dict[str, str]]:
    """``{argument: checkpoint_identity(value)}`` for each argument whose value names a checkpoint
    (a local folder, or a Hub id in the local cache): the part of a store name that says which
    weights made its files. ``revision`` applies to every Hub id (a model's one ``revision=``)."""
    keys = {}
    for arg, value in sorted(sources.items()):
        found = checkpoint_identity(value, revision) if isinstance(value, str) else None
        if found is not None:
            keys[arg] = found
    return keys


def recorded_checkpoints(sources: dict[str, Any], keys: dict[str, dict[str, str]],
                         revision: str | None = None) -> dict[str, dict[str, str]]:
    """What a store's ``identity.json`` records of each checkpoint in ``keys`` (:func:`checkpoint_keys`
    of ``sources``): its ``source`` (a folder's absolute path, or the Hub id with its ``revision``)
    and its digest or commit, so a rerun can read each again (``store.identity.checkpoints_now``)."""
    out = {}
    for arg, found in keys.items():
        source = str(sources[arg])
        local = is_local_folder(source)
        out[arg] = {"source": os.path.abspath(os.path.expanduser(source)) if local else source,
                    **({"revision": revision} if revision and not local else {}), **found}
    return out
