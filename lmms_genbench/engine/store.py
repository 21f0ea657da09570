"""On-disk artifact store: every text and image of every chain step.

Layout: ``root/<describer>/<generator>/<protocol>/<doc>/<hop>.{png,txt}``.
Each file is written to a temporary sibling and renamed into place, so a file
that exists is complete; a rerun after a crash trusts exactly those files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

DEFAULT_ROOT_ENV = "LMMS_GENBENCH_ARTIFACTS"


def default_root() -> Path:
    """``$LMMS_GENBENCH_ARTIFACTS`` or ``~/.cache/lmms_genbench/artifacts``."""
    env = os.environ.get(DEFAULT_ROOT_ENV)
    if env:
        return Path(env).expanduser()
    return Path("~/.cache/lmms_genbench/artifacts").expanduser()


def stable_hash(obj: Any, length: int = 10) -> str:
    """Short hash of a JSON-serialisable object, stable across runs and hosts."""
    blob = json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


def slug_key(text: str, max_len: int = 48) -> str:
    """A readable, filesystem-safe, collision-free folder name for ``text``."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("._")[:max_len]
    return f"{readable or 'x'}-{stable_hash(str(text), 8)}"


def atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
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

    def write_image(self, hop: int, image: Image.Image) -> Path:
        path = self.path(hop, "image")
        # lossless; level 1 is ~5x faster than the default and barely larger
        atomic_write(path, lambda fh: image.save(fh, format="PNG", compress_level=1))
        return path

    def read_image(self, hop: int) -> Image.Image:
        with Image.open(self.path(hop, "image")) as img:
            return img.convert("RGB")


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
