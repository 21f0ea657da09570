"""The identity of a local checkpoint folder: what its images depend on, not where it lies.

A folder is identified by the SHA-256 of every byte of its configs and weight files (with
their relative names and sizes), so a moved or copied folder keeps its identity and any edit
of any tensor gives a new one. Hashing a weight file is paid once per change of it: the
digests are cached by (path, size, mtime, inode) in ``weight_hashes.json`` under
``$LMMS_GENBENCH_CACHE`` (default ``~/.cache/lmms_genbench``).

Before whole-file hashing, weight files were identified by 16 sampled blocks of 64 KiB
(:func:`legacy_identity`, kept only so that stores keyed that way are adopted, not redrawn:
:func:`adopt_legacy`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..core.keys import atomic_write

__all__ = ["SAMPLES", "adopt_legacy", "folder_identity", "hash_cache_path", "is_local_folder", "legacy_identity"]

logger = logging.getLogger(__name__)

#: configs and tokenizer files: hashed whole (they are small)
CONFIG_SUFFIXES = (".json", ".txt", ".model", ".yaml", ".yml", ".tiktoken", ".py")
#: tensor files: hashed whole, through the cache
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".msgpack", ".onnx", ".h5")
#: the legacy identity's blocks per weight file, spread evenly, and their size
SAMPLES, BLOCK = 16, 64 * 1024
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


def _sha256(path: Path) -> str:
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
        digest = _sha256(path)
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


def _files(root: Path) -> list[Path]:
    """Configs and weight files under ``root``, hidden ones (caches, ``.git``) left out."""
    out = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(directory) / name
            if not name.startswith(".") and path.suffix in CONFIG_SUFFIXES + WEIGHT_SUFFIXES:
                out.append(path)
    return out


def _is_config(path: Path, size: int) -> bool:
    return path.suffix in CONFIG_SUFFIXES and size <= MAX_CONFIG_BYTES


def folder_identity(folder: str) -> str:
    """16 hex digits naming every byte a local checkpoint folder holds (see the module docstring)."""
    root = Path(os.path.expanduser(folder)).resolve()
    entries = {}
    with _CACHE_LOCK:
        cache = _HashCache(hash_cache_path())
        files = [(path, path.stat().st_size) for path in _files(root)]
        workers = max(1, min(HASH_THREADS, sum(1 for p, n in files if not _is_config(p, n))))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="genbench-hash") as pool:
            digests = pool.map(lambda item: _sha256(item[0]) if _is_config(*item) else cache.digest(item[0]), files)
            for (path, size), digest in zip(files, digests):
                entries[path.relative_to(root).as_posix()] = {"size": size, "sha256": digest}
        cache.save()
    blob = json.dumps(entries, sort_keys=True).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


# ---------------------------------------------------------------- legacy keys
def _safetensors_header(fh, size: int) -> tuple[bytes, int]:
    """The JSON header (first 8 bytes: its length, little-endian) and where the tensors start."""
    head = fh.read(8)
    if len(head) < 8:
        return b"", 0
    (length,) = struct.unpack("<Q", head)
    if length > size - 8:
        return b"", 0  # not a safetensors file after all: sampled as plain bytes
    return fh.read(length), 8 + length


def _legacy_file_identity(path: Path, size: int) -> dict:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        if _is_config(path, size):
            digest.update(fh.read())
            return {"size": size, "sha256": digest.hexdigest()}
        start = 0
        if path.suffix == ".safetensors":
            header, start = _safetensors_header(fh, size)
            digest.update(header)
        span = max(size - start, 0)
        for i in range(SAMPLES):
            fh.seek(start + (span * i) // SAMPLES)
            digest.update(fh.read(BLOCK))
    return {"size": size, "sampled_sha256": digest.hexdigest()}


def legacy_identity(folder: str) -> str:
    """The identity stores were keyed by before whole-file hashing: configs whole, each weight
    file by its safetensors header and 16 blocks of 64 KiB. Blind to most in-place edits, so
    it is never a key now; it only finds a store to adopt (:func:`adopt_legacy`)."""
    root = Path(os.path.expanduser(folder)).resolve()
    entries = {path.relative_to(root).as_posix(): _legacy_file_identity(path, path.stat().st_size)
               for path in _files(root)}
    blob = json.dumps(entries, sort_keys=True).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


def adopt_legacy(describer_dir: Path, name: str, legacy_names: Sequence[str]) -> Path | None:
    """Rename a store's folder of a generator keyed the legacy way (``describer_dir/<legacy>``)
    to its current name, when only the legacy one exists, so its hops are reused, not redrawn.
    The folder is taken to hold drawings of the weights present now (the legacy key could
    not tell). Returns the folder adopted, or None."""
    current = describer_dir / name
    if current.exists():
        return None
    for legacy in legacy_names:
        old = describer_dir / legacy
        if legacy != name and old.is_dir():
            try:
                os.rename(old, current)
            except OSError as exc:  # another process adopted it first, or a read-only store
                logger.debug("store folder %s not adopted: %s", old, exc)
                return None
            logger.warning("lmms-genbench: the store folder %s (keyed by sampled weight bytes, before whole-file "
                           "hashing) is now %s; its stored hops are reused", old, current.name)
            return current
    return None
