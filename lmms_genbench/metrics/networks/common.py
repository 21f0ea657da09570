"""Shared helpers of the metric encoders: image loading, argument checks, model cache."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any

__all__ = ["DTYPES", "ModelCache", "cast_modules", "check_batch_size", "check_device", "check_dtype", "to_rgb_images"]


def to_rgb_images(items: Sequence[Any], name: str = "images") -> list[Any]:
    """Return ``items`` as a list of RGB ``PIL.Image``s.

    Accepts PIL images (any mode) and paths to image files; anything else is an error.
    """
    from PIL import Image

    if isinstance(items, (str, bytes, os.PathLike)) or not isinstance(items, Sequence):
        raise TypeError(
            f"{name} must be a sequence of PIL images or image paths, got {type(items).__name__}"
        )
    out = []
    for i, item in enumerate(items):
        if isinstance(item, Image.Image):
            # convert() always returns a new image, and loads lazily opened files
            out.append(item if item.mode == "RGB" else item.convert("RGB"))
        elif isinstance(item, (str, os.PathLike)):
            with Image.open(item) as im:
                out.append(im.convert("RGB"))
        else:
            raise TypeError(
                f"{name}[{i}] must be a PIL.Image.Image or a path, got {type(item).__name__}"
            )
    return out


def check_batch_size(batch_size: Any) -> int:
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or batch_size < 1
    ):
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    return batch_size


def check_device(device: Any) -> str:
    """Normalise a device given as a string or ``torch.device`` to its string form."""
    if hasattr(device, "type") and hasattr(device, "index"):  # torch.device
        return str(device)
    if not isinstance(device, str) or not device:
        raise ValueError(
            f"device must be a string such as 'cpu' or 'cuda:0', got {device!r}"
        )
    return device


#: weight dtypes of the scorer networks; "float32" is exact, the others trade digits for speed
DTYPES = ("float32", "bfloat16", "float16")
_DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}


def check_dtype(dtype: Any, name: str = "dtype") -> str:
    """The canonical name of a weight dtype (``bf16`` -> ``bfloat16``), or a ValueError naming the choices."""
    value = _DTYPE_ALIASES.get(dtype, dtype) if isinstance(dtype, str) else dtype
    if value not in DTYPES:
        raise ValueError(
            f"{name} must be one of {DTYPES} (or {', '.join(_DTYPE_ALIASES)}), got {dtype!r}"
        )
    return value


def cast_modules(modules: Sequence[Any], dtype: str) -> None:
    """Cast the weights of torch ``modules`` to ``dtype`` (a no-op for ``float32``)."""
    if check_dtype(dtype) == "float32":
        return
    import torch

    for module in modules:
        module.to(getattr(torch, dtype))


class ModelCache:
    """Process-wide cache of loaded models, keyed by hashable specs.

    lmms-eval calls task functions from a thread pool, so a model is loaded at most once
    per key: a key being loaded has its own lock, which a second caller of that key waits
    on, while lookups and loads of other keys go on (loading OWLv2-large does not hold up a
    CLIP lookup). A load may look up other keys of the same cache (a colour classifier is
    built from the cached CLIP encoders); no load needs a key that needs it back.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards the two dicts only, never held during a load
        self._items: dict[tuple[Hashable, ...], Any] = {}
        self._loading: dict[tuple[Hashable, ...], threading.Lock] = {}

    def get(self, key: tuple[Hashable, ...], load: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                return self._items[key]
            key_lock = self._loading.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._items:  # loaded by the caller this one waited for
                    return self._items[key]
            value = load()
            with self._lock:
                self._items[key] = value
                self._loading.pop(key, None)
            return value

    def clear(self, families: Sequence[str] = ()) -> None:
        """Forget every item, or only those whose key starts with one of ``families``."""
        with self._lock:
            if not families:
                self._items.clear()
            for key in [k for k in self._items if k[:1] and k[0] in families]:
                del self._items[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
