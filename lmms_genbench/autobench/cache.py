"""On-disk cache of every examiner and generator call.

A call's key is the stable hash of (model id, prompt, image hashes, settings);
the entry is written atomically after the call returns, so an interrupted
build re-run with the same settings replays finished calls from disk and pays
only for the rest.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

from PIL import Image

from ..core.keys import atomic_write, stable_hash


def image_hash(image: Image.Image) -> str:
    """Hash of the pixels (and mode/size), independent of file encoding."""
    h = hashlib.sha256(f"{image.mode}{image.size}".encode())
    h.update(image.tobytes())
    return h.hexdigest()[:20]


class CallCache:
    """``root/text/<k>.json`` for texts, ``root/images/<k>.png`` for images.

    ``hits`` and ``misses`` count lookups, for the build's cost report.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.hits = {"text": 0, "image": 0}
        self.misses = {"text": 0, "image": 0}

    @staticmethod
    def key(**parts: Any) -> str:
        return stable_hash(parts, 32)

    def _text_path(self, key: str) -> Path:
        return self.root / "text" / key[:2] / f"{key}.json"

    def _image_path(self, key: str) -> Path:
        return self.root / "images" / key[:2] / f"{key}.png"

    def get_text(self, key: str) -> str | None:
        path = self._text_path(key)
        if path.is_file():
            self.hits["text"] += 1
            return json.loads(path.read_text(encoding="utf-8"))["output"]
        self.misses["text"] += 1
        return None

    def put_text(self, key: str, output: str, record: dict[str, Any]) -> None:
        blob = json.dumps({**record, "output": output}, ensure_ascii=False).encode("utf-8")
        atomic_write(self._text_path(key), lambda fh: fh.write(blob))

    def get_image(self, key: str) -> Image.Image | None:
        path = self._image_path(key)
        if path.is_file():
            self.hits["image"] += 1
            with Image.open(path) as im:
                return im.convert("RGB")
        self.misses["image"] += 1
        return None

    def put_image(self, key: str, image: Image.Image) -> Path:
        buf = io.BytesIO()
        image.convert("RGB").save(buf, format="PNG")
        path = self._image_path(key)
        atomic_write(path, lambda fh: fh.write(buf.getvalue()))
        return path
