"""Images the engine stored in this process, held for the scorer (issue 24, item 1).

A scorer that runs in the process that drew the chains (``lmms-eval --model cycle``
scores right after generating) would decode every PNG the writer has just encoded. The
writer hands each stored image here with the sha256 of its file's bytes; a scorer's
:func:`load_rgb` reads the file's bytes, and when their hash is one held it returns a
copy of the held image instead of decoding them. A file changed since it was written
has another hash and is decoded, so a held image is never a stale one.

Memory is bounded by pixels (:data:`HELD_BYTES`, least recently used out first), so
it holds about the latest few batches of a long run and every image of a small one. The
images live in :mod:`lmms_genbench.core.state`'s ``held_images`` slot.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..core import state

__all__ = ["HELD_BYTES", "Held", "clear", "counts", "held", "hold", "load_rgb"]

#: the pixels held at most (RGB bytes); 256 MiB: 340 images of 512 px, 85 of 1024 px
HELD_BYTES = 256 * 2**20

_LOCK = threading.Lock()


@dataclass
class Held:
    """The images held, by sha256, least recently used first; their pixels; and the images
    decoded from files and handed out from memory (for tests and benchmarks)."""

    images: OrderedDict[str, Any] = field(default_factory=OrderedDict)
    size: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {"decoded": 0, "held": 0})


def held() -> Held:
    """This process's held images (the state module's slot)."""
    return state.slot("held_images", Held)


def _nbytes(image: Any) -> int:
    return image.width * image.height * len(image.getbands())


def hold(sha256: str, image: Any) -> None:
    """Keep ``image`` (an RGB PIL image, as stored) under its file's ``sha256``."""
    if image.mode != "RGB":
        return  # load_rgb returns RGB: only an RGB image is what decoding the file gives
    size = _nbytes(image)
    if size > HELD_BYTES:
        return
    now = held()
    with _LOCK:
        old = now.images.pop(sha256, None)
        if old is not None:
            now.size -= _nbytes(old)
        now.images[sha256] = image
        now.size += size
        while now.size > HELD_BYTES:
            _, dropped = now.images.popitem(last=False)
            now.size -= _nbytes(dropped)


def load_rgb(path: Any):
    """The file's image as RGB: a copy of the held one when the file's bytes are those the
    writer stored, else decoded from the bytes."""
    from PIL import Image

    with open(path, "rb") as fh:
        blob = fh.read()
    digest = hashlib.sha256(blob).hexdigest()
    now = held()
    with _LOCK:
        image = now.images.get(digest)
        if image is not None:
            now.images.move_to_end(digest)
            now.counts["held"] += 1
    if image is not None:
        return image.copy()  # the caller may change its image; the held one stays as stored
    with _LOCK:
        now.counts["decoded"] += 1
    with Image.open(io.BytesIO(blob)) as img:
        return img.convert("RGB")


def counts() -> dict[str, int]:
    """Images decoded from files and handed out from memory, since the last :func:`clear`."""
    now = held()
    with _LOCK:
        return dict(now.counts)


def clear() -> None:
    """Forget every held image and reset the counts."""
    with _LOCK:
        state.put("held_images", None)
