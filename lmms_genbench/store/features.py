"""Scoring features kept in the store (issue 34, item 5): what a scorer's network computed for
an image or a text, so that a rerun over a complete store loads no scoring network.

Layout: ``<store root>/.features/<network key>/<aa>/<sha256>.feat`` where ``<network key>`` is
the short hash of the network's identity (written out beside it in ``identity.json``: its name,
its weights' identity and every setting that changes the numbers) and ``<sha256>`` is the
item's content hash (an image file's bytes, a text's UTF-8). Items with the same content share
one file whatever chain, describer or generator they belong to, so seeds shared by several
describer x generator pairs are embedded once.

A file is ``MAGIC``, a checksum line (``sha256 <hex>``: the sha256 of everything after it), one
JSON header line (item hash, network key, dtype, shape, a few extras such as whether a text was
cut) and the raw array. A file is trusted only whole (issue 43): the checksum covers the header
and the payload, so one flipped bit of either is a miss; the header's item and network must be
the ones asked for, and its dtype and shape what the reader expects (:meth:`FeatureStore.get`'s
``dtype``/``shape``): any mismatch is counted in :attr:`FeatureStore.corrupt` and recomputed,
never served. An item a network computed twice with different bytes is marked unstable and never
served. It is written to a
temporary sibling and renamed (two processes on one store at worst both write the same
values), without fsync: a file cut by a crash, truncated or edited fails its checks and is a
miss, recomputed and rewritten, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .verify import records_kept

__all__ = ["FEATURES", "FORMAT", "LAYOUTS", "MAGIC", "UNSTABLE", "FeatureStore", "check_feature_file", "feature_root",
           "network_key", "verify_features"]

#: the folder under the store root
FEATURES = ".features"
#: bumped when what a file means changes (every old file then misses: another network key)
FORMAT = 2
MAGIC = b"LGBFEAT2\n"
_CHECK = b"sha256 "
#: the extra of an item computed twice with different bytes (never served; :meth:`FeatureStore.put`)
UNSTABLE = "unstable"
_SUFFIX = ".feat"
#: what a network's files hold, by the role its identity names (``metrics/scorers/stored*.py``):
#: the dtype and shape its reader asks :meth:`FeatureStore.get` for (a None length: any), and
#: whether every row of one network has the same length (an embedding's dimension)
LAYOUTS: dict[str, tuple[str, tuple[int | None, ...], bool]] = {
    "image": ("<f4", (None,), True), "text": ("<f4", (None,), True), "fid": ("<f4", (None,), True),
    "detector": ("<f8", (None, 7), False), "color": ("<i2", (None,), False),
}


def network_key(identity: Mapping[str, Any]) -> str:
    """16 hex digits of a network identity (canonical JSON, with the file format)."""
    blob = json.dumps({"format": FORMAT, **identity}, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


def feature_root(namespace: str | os.PathLike) -> Path:
    """Where a namespace's features live: its store root (``root/<describer>/<generator>/
    <protocol>``) when the namespace is one the engine wrote (its format marker), so every pair
    shares them; else beside the namespace's own chains."""
    namespace = Path(namespace)
    if records_kept(namespace) and len(namespace.parents) >= 3:
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
        #: files found corrupt or not what the reader expected (read as misses, rewritten)
        self.corrupt = 0
        #: why the first write failed (read-only, disk full, ``.features`` a file), or None
        self.unwritable: str | None = None

    def path(self, item: str) -> Path:
        return self.folder / item[:2] / f"{item}{_SUFFIX}"

    def get(self, item: str, dtype: Any = None, shape: tuple[int | None, ...] | None = None
            ) -> tuple[Any, dict[str, Any]] | None:
        """``(array, extras)`` stored for ``item`` (its content hash), or None: absent, or
        failing its checks (checksum, item, network; ``dtype`` and ``shape``, where given, are
        what the reader expects: a None length is any length). A file failing them is counted
        in :attr:`corrupt`; an unstable item is not."""
        try:
            with open(self.path(item), "rb") as fh:
                blob = fh.read()
        except OSError:
            return None
        found = decode(blob, item, self.key)
        if found is not None and found[1].get(UNSTABLE):
            return None
        if found is None or not expected(found[0], dtype, shape):
            self.count_corrupt()
            return None
        return found

    def get_many(self, items: Iterable[str], dtype: Any = None, shape: tuple[int | None, ...] | None = None
                 ) -> dict[str, tuple[Any, dict[str, Any]]]:
        out = {}
        for item in items:
            if item not in out:
                found = self.get(item, dtype, shape)
                if found is not None:
                    out[item] = found
        return out

    def count_corrupt(self, n: int = 1) -> None:
        """Count files refused (also by a reader after :meth:`get`: rows of one call that disagree)."""
        with self._lock:
            self.corrupt += n

    def put(self, item: str, array: Any, extras: Mapping[str, Any] | None = None) -> bool:
        """Store ``array`` for ``item``; False when the store cannot be written (read-only:
        scoring goes on, the features are recomputed next time; :attr:`unwritable` says why).

        Where ``item`` is stored already, whole and of the same dtype and shape, with other bytes
        (a network whose row for an item depends on the rest of its batch), the file becomes an
        :data:`UNSTABLE` marker: never served again, so every batch holding the item is computed
        as without the cache. A damaged or mismatched file is replaced."""
        import numpy as np

        array = np.ascontiguousarray(array)
        try:
            old = self.path(item).read_bytes()
        except OSError:
            old = None
        if old is not None:
            known = decode(old, item, self.key)
            if known is not None and known[1].get(UNSTABLE):
                return True  # known unstable: nothing to write
            if known is not None and expected(known[0], array.dtype, array.shape):
                if known[0].tobytes() == array.tobytes():
                    return True  # the same row: nothing to write
                array, extras = np.zeros(0, np.float32), {UNSTABLE: True}
        try:
            self._describe()
            _replace(self.path(item), encode(item, self.key, array, extras))
        except OSError as exc:
            with self._lock:
                self.unwritable = self.unwritable or (exc.strerror or str(exc))
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


def encode(item: str, network: str, array: Any, extras: Mapping[str, Any] | None = None) -> bytes:
    """A feature file's bytes: magic, checksum line, header line, payload (module docstring)."""
    import numpy as np

    array = np.ascontiguousarray(array)
    head = {"item": item, "network": network, "dtype": array.dtype.str, "shape": list(array.shape),
            "extras": dict(extras or {})}
    body = json.dumps(head, sort_keys=True).encode("utf-8") + b"\n" + array.tobytes()
    return MAGIC + _CHECK + hashlib.sha256(body).hexdigest().encode("ascii") + b"\n" + body


def decode(blob: bytes, item: str | None, network: str | None) -> tuple[Any, dict[str, Any]] | None:
    """``(array, extras)`` of a whole file whose header names ``item`` and ``network`` (None:
    any), or None when a check fails (magic, the checksum over header and payload, size)."""
    import numpy as np

    start = len(MAGIC) + len(_CHECK)
    end = blob.find(b"\n", start)
    if not blob.startswith(MAGIC + _CHECK) or end < 0:
        return None
    body = blob[end + 1:]
    if hashlib.sha256(body).hexdigest().encode("ascii") != blob[start:end]:
        return None
    cut = body.find(b"\n")
    try:
        head = json.loads(body[:cut].decode("utf-8"))
        payload = body[cut + 1:]
        dtype = np.dtype(head["dtype"])
        shape = tuple(int(n) for n in head["shape"])
        if (item is not None and head["item"] != item) or (network is not None and head["network"] != network):
            return None
        if cut < 0 or len(payload) != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
            return None
        array = np.frombuffer(payload, dtype=dtype).reshape(shape).copy()
        extras = dict(head.get("extras") or {})
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, AttributeError):
        return None
    return array, extras


def expected(array: Any, dtype: Any, shape: tuple[int | None, ...] | None) -> bool:
    """Whether ``array`` has the ``dtype`` (byte order included) and ``shape`` a reader expects
    (None: anything; a None length in ``shape``: any length)."""
    import numpy as np

    if dtype is not None and array.dtype.str != np.dtype(dtype).str:
        return False
    return shape is None or (array.ndim == len(shape) and
                             all(n is None or n == m for n, m in zip(shape, array.shape)))


def check_feature_file(path: Path, network: str, role: str | None = None) -> str | None:
    """Why a file in a network key's folder is not a whole feature file of its own name and key,
    holding what a network of ``role`` gives (:data:`LAYOUTS`: the dtype and shape scoring asks
    for), or None when it is (``store verify``)."""
    found = _read_feature(path, network)
    return found if isinstance(found, str) else _layout_problem(found[0], found[1], role)


def _read_feature(path: Path, network: str) -> tuple[Any, dict[str, Any]] | str:
    try:
        blob = path.read_bytes()
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    found = decode(blob, path.name[: -len(_SUFFIX)], network) if path.name.endswith(_SUFFIX) else None
    if found is None:
        return "fails its checks (the checksum over header and payload, its item, network or size)"
    return found


def _layout_problem(array: Any, extras: Mapping[str, Any], role: str | None) -> str | None:
    """Why ``array`` is not what scoring reads for a network of ``role`` (None: it is, or the role is unknown)."""
    if role not in LAYOUTS or extras.get(UNSTABLE):
        return None
    dtype, shape, _ = LAYOUTS[role]
    if not expected(array, dtype, shape):
        return (f"its header says dtype {array.dtype.str} shape {list(array.shape)}, not what a {role} network's "
                f"scoring reads ({dtype}, {['any' if n is None else n for n in shape]})")
    return None


def verify_features(root: str | os.PathLike, repair: bool = False) -> dict[str, Any]:
    """Every feature file under ``root``'s ``.features`` folders checked whole (``store verify``):
    ``{"files", "bad": [(path, why)], "removed", "outdated": [folders of another FORMAT, never
    read]}``. ``repair`` removes the bad files (the next scoring pass recomputes them)."""
    report: dict[str, Any] = {"files": 0, "bad": [], "removed": 0, "outdated": []}
    for directory, subdirs, _ in os.walk(root):
        if FEATURES not in subdirs:
            continue
        for key in sorted(os.listdir(Path(directory) / FEATURES)):
            folder = Path(directory) / FEATURES / key
            if not folder.is_dir():
                continue
            try:
                identity = json.loads((folder / "identity.json").read_text(encoding="utf-8"))
                fmt, role = identity.get("format"), identity.get("role")
            except (OSError, ValueError, AttributeError):
                fmt = role = None
            if fmt is not None and fmt != FORMAT:
                report["outdated"].append(folder)
                continue
            bad = _check_network(folder, key, role)
            report["files"] += bad.pop(None, 0)
            for path, why in bad.items():
                report["bad"].append((path, why))
                if repair:
                    try:
                        path.unlink()
                        report["removed"] += 1
                    except OSError:
                        pass
        subdirs[:] = [d for d in subdirs if d != FEATURES]
    return report


def _check_network(folder: Path, key: str, role: str | None) -> dict[Any, Any]:
    """``{path: why}`` of the bad files of one network's folder, and ``{None: files checked}``:
    each file whole and of its role's layout, and, for an embedding, of the length most of the
    folder's rows have (as scoring refuses the odd rows of one call)."""
    out: dict[Any, Any] = {None: 0}
    rows: dict[Path, int] = {}
    for path in sorted(folder.glob(f"*/*{_SUFFIX}")):
        out[None] += 1
        found = _read_feature(path, key)
        why = found if isinstance(found, str) else _layout_problem(found[0], found[1], role)
        if why is not None:
            out[path] = why
        elif role in LAYOUTS and LAYOUTS[role][2] and not found[1].get(UNSTABLE):
            rows[path] = int(found[0].shape[0])
    if len(set(rows.values())) > 1:
        common = Counter(rows.values()).most_common(1)[0][0]
        for path, n in rows.items():
            if n != common:
                out[path] = f"its header says {n} values, not the {common} of this network's other rows"
    return out


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
