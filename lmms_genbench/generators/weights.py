"""Legacy checkpoint keys, kept only so that stores keyed that way are adopted, not redrawn.

Before whole-file hashing (:mod:`lmms_genbench.core.checkpoints`: every role's weights), weight
files were identified by 16 sampled blocks of 64 KiB (:func:`legacy_identity`); before every role
was keyed by its weights, describers and unified models by their arguments alone. A store
folder under such a name is renamed to the current one (:func:`lmms_genbench.store.identity.adopt_folder`).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

from ..core.checkpoints import checkpoint_files, is_config

__all__ = ["SAMPLES", "legacy_identity"]

#: the legacy identity's blocks per weight file, spread evenly, and their size
SAMPLES, BLOCK = 16, 64 * 1024


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
        if is_config(path, size):
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
    it is never a key now; it only finds a store to adopt (:func:`lmms_genbench.store.identity.adopt_folder`)."""
    root = Path(os.path.expanduser(folder)).resolve()
    entries = {path.relative_to(root).as_posix(): _legacy_file_identity(path, path.stat().st_size)
               for path in checkpoint_files(root)}
    blob = json.dumps(entries, sort_keys=True).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]
