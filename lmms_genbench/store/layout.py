"""On-disk artifact store: every text and image of every chain step.

Layout: ``root/<describer>/<generator>/<protocol>/<doc>/<hop>.{png,txt}``.
Each file is written to a temporary sibling and renamed into place, so a file
that exists is complete; a rerun after a crash trusts exactly those files.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from ..core.keys import atomic_write, slug_key

DEFAULT_ROOT_ENV = "LMMS_GENBENCH_ARTIFACTS"


def default_root() -> Path:
    """``$LMMS_GENBENCH_ARTIFACTS`` or ``~/.cache/lmms_genbench/artifacts``."""
    env = os.environ.get(DEFAULT_ROOT_ENV)
    if env:
        return Path(env).expanduser()
    return Path("~/.cache/lmms_genbench/artifacts").expanduser()


@dataclass(frozen=True)
class ChainLocation:
    """Where one doc's chain lives in the store."""

    directory: Path

    def path(self, hop: int, kind: str) -> Path:
        suffix = "png" if kind == "image" else "txt"
        return self.directory / f"{hop:03d}.{suffix}"

    def has(self, hop: int, kind: str) -> bool:
        return self.path(hop, kind).is_file()

    def write_text(self, hop: int, text: str) -> Path:
        path = self.path(hop, "text")
        atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))
        return path

    def read_text(self, hop: int) -> str:
        return self.path(hop, "text").read_text(encoding="utf-8")

    def write_image(self, hop: int, image: Image.Image | bytes) -> Path:
        """Store hop ``hop``'s image: a PIL image, or its PNG bytes from :func:`encode_png`."""
        path = self.path(hop, "image")
        blob = image if isinstance(image, bytes) else encode_png(image)
        atomic_write(path, lambda fh: fh.write(blob))
        return path

    def read_image(self, hop: int) -> Image.Image:
        with Image.open(self.path(hop, "image")) as img:
            return img.convert("RGB")


#: zlib level of stored PNGs (lossless at every level). Measured on a 512 px drawing
#: (docs/perf-engine.md): level 1 encodes ~4x faster than the default 6 at ~10 % more
#: bytes; levels 0 and 2-9 lose on one side or the other. A file's sha256 (hops.jsonl)
#: depends on it, so changing it would make existing stores look changed.
PNG_LEVEL = 1


def encode_png(image: Image.Image) -> bytes:
    """``image`` as the PNG file the store keeps (the bytes its recorded hash is of)."""
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=PNG_LEVEL)
    return out.getvalue()


class ArtifactStore:
    """Root of the store; hands out one :class:`ChainLocation` per doc."""

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_root()

    def namespace(self, describer_id: str, generator_id: str, protocol_id: str) -> Path:
        return self.root / describer_id / generator_id / protocol_id

    def chain(self, namespace: Path, doc_key: str) -> ChainLocation:
        return ChainLocation(namespace / slug_key(doc_key))

    def write_json(self, path: Path, payload: Any) -> None:
        blob = json.dumps(payload, indent=2, sort_keys=True, default=str).encode("utf-8")
        atomic_write(path, lambda fh: fh.write(blob))

    def append_jsonl(self, path: Path, payload: Any) -> None:
        """Append one record; single small writes in append mode do not interleave."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(payload, sort_keys=True, default=str) + "\n")
