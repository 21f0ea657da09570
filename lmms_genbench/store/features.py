"""Scoring features kept in the store (issue 34, item 5): what a scorer's network computed for
an image or a text, so that a rerun over a complete store loads no scoring network.

Layout: ``<store root>/.features/<network key>/<aa>/<sha256>.feat`` where ``<network key>`` is
the short hash of the network's identity (written out beside it in ``identity.json``: its name,
its weights' identity and every setting that changes the numbers) and ``<sha256>`` is the
item's content hash (an image file's bytes, a text's UTF-8). Items with the same content share
one file whatever chain, describer or generator they belong to, so seeds shared by several
describer x generator pairs are embedded once.

A file is ``MAGIC``, one JSON header line (item hash, network key, dtype, shape, the payload's
sha256, a few extras such as whether a text was cut) and the raw array; an item a network
computed twice with different bytes is marked unstable and never served. It is written to a
temporary sibling and renamed (two processes on one store at worst both write the same
values), without fsync: a file cut by a crash, truncated or edited fails its checks and is a
miss, recomputed and rewritten, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .verify import keeps_records

__all__ = ["FEATURES", "FORMAT", "MAGIC", "UNSTABLE", "FeatureStore", "feature_root", "network_key"]

#: the folder under the store root
FEATURES = ".features"
#: bumped when what a file means changes (every old file then misses)
FORMAT = 1
MAGIC = b"LGBFEAT1\n"
#: the extra of an item computed twice with different bytes (never served; :meth:`FeatureStore.put`)
UNSTABLE = "unstable"
_SUFFIX = ".feat"


def network_key(identity: Mapping[str, Any]) -> str:
    """16 hex digits of a network identity (canonical JSON, with the file format)."""
    blob = json.dumps({"format": FORMAT, **identity}, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


def feature_root(namespace: str | os.PathLike) -> Path:
    """Where a namespace's features live: its store root (``root/<describer>/<generator>/
    <protocol>``) when the namespace is one the engine wrote (its format marker), so every pair
    shares them; else beside the namespace's own chains."""
    namespace = Path(namespace)
    if keeps_records(namespace) and len(namespace.parents) >= 3:
        return namespace.parents[2] / FEATURES
    return namespace / FEATURES


class FeatureStore:
    """The features of one network identity under ``root`` (:func:`feature_root`)."""

    def __init__(self, root: str | os.PathLike, identity: Mapping[str, Any]) -> None:
        self.identity = dict(identity)
        self.key = network_key(self.identity)
        self.folder = Path(root) / self.key
        self._lock = threading.Lock()
        self._described = False
        #: files found corrupt (read as misses, rewritten)
        self.corrupt = 0

    def path(self, item: str) -> Path:
        return self.folder / item[:2] / f"{item}{_SUFFIX}"

    def get(self, item: str) -> tuple[Any, dict[str, Any]] | None:
        """``(array, extras)`` stored for ``item`` (its content hash), or None: absent or failing
        its checks (counted in :attr:`corrupt`)."""
        try:
            with open(self.path(item), "rb") as fh:
                blob = fh.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            return None
        found = self._decode(item, blob)
        if found is None:
            with self._lock:
                self.corrupt += 1
        elif found[1].get(UNSTABLE):
            return None
        return found

    def get_many(self, items: Iterable[str]) -> dict[str, tuple[Any, dict[str, Any]]]:
        out = {}
        for item in items:
            if item not in out:
                found = self.get(item)
                if found is not None:
                    out[item] = found
        return out

    def _decode(self, item: str, blob: bytes) -> tuple[Any, dict[str, Any]] | None:
        import numpy as np

        if not blob.startswith(MAGIC):
            return None
        end = blob.find(b"\n", len(MAGIC))
        if end < 0:
            return None
        try:
            head = json.loads(blob[len(MAGIC) : end].decode("utf-8"))
            payload = blob[end + 1 :]
            dtype = np.dtype(head["dtype"])
            shape = tuple(int(n) for n in head["shape"])
            if head["item"] != item or head["network"] != self.key:
                return None
            if len(payload) != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
                return None
            if hashlib.sha256(payload).hexdigest() != head["sha256"]:
                return None
            array = np.frombuffer(payload, dtype=dtype).reshape(shape).copy()
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None
        return array, dict(head.get("extras") or {})

    def put(self, item: str, array: Any, extras: Mapping[str, Any] | None = None) -> bool:
        """Store ``array`` for ``item``; False when the store cannot be written (read-only:
        scoring goes on, the features are recomputed next time).

        Where ``item`` is stored already with other bytes (a network whose row for an item
        depends on the rest of its batch), the file becomes an :data:`UNSTABLE` marker: never
        served again, so every batch holding the item is computed as without the cache."""
        import numpy as np

        array = np.ascontiguousarray(array)
        try:
            old = self.path(item).read_bytes()
        except OSError:
            old = None
        if old is not None:
            known = self._decode(item, old)
            if known is not None and (known[1].get(UNSTABLE) or known[0].tobytes() == array.tobytes()):
                return True  # the same row, or known unstable: nothing to write
            if known is not None:
                array, extras = np.zeros(0, np.float32), {UNSTABLE: True}
        payload = array.tobytes()
        head = {
            "item": item, "network": self.key, "dtype": array.dtype.str, "shape": list(array.shape),
            "sha256": hashlib.sha256(payload).hexdigest(), "extras": dict(extras or {}),
        }
        blob = MAGIC + json.dumps(head, sort_keys=True).encode("utf-8") + b"\n" + payload
        try:
            self._describe()
            _replace(self.path(item), blob)
        except OSError:
            return False
        return True

    def _describe(self) -> None:
        """``identity.json`` beside the files: what the key stands for, for a person."""
        with self._lock:
            if self._described:
                return
            self._described = True
        target = self.folder / "identity.json"
        if not target.is_file():
            blob = json.dumps({"format": FORMAT, **self.identity}, indent=2, sort_keys=True, default=str).encode("utf-8")
            _replace(target, blob)


def _replace(path: Path, blob: bytes) -> None:
    """Temporary sibling, then rename: a reader sees the old file or the whole new one. No
    fsync: a file lost or cut by a crash is a miss (its checks), not a wrong value."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
