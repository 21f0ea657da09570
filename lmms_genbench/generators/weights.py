"""The identity of a local checkpoint folder: what its images depend on, not where it lies.

A folder is identified by its configs (content) and its weight files (relative name, size,
the safetensors header and a sample of the tensor bytes), so a moved or copied folder keeps
its identity and weights replaced in place (even with the same shapes) get a new one. Reading
a few blocks per file keeps this cheap for checkpoints of many gigabytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

__all__ = ["SAMPLES", "folder_identity", "is_local_folder"]

#: configs and tokenizer files: hashed whole (they are small)
CONFIG_SUFFIXES = (".json", ".txt", ".model", ".yaml", ".yml", ".tiktoken", ".py")
#: tensor files: name, size and sampled bytes
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".msgpack", ".onnx", ".h5")
#: blocks of tensor bytes read per weight file, spread evenly, and their size
SAMPLES, BLOCK = 16, 64 * 1024
#: a config larger than this is identified like a weight file
MAX_CONFIG_BYTES = 16 * 1024 * 1024


def is_local_folder(pretrained: str) -> bool:
    return os.path.isdir(os.path.expanduser(pretrained))


def _safetensors_header(fh, size: int) -> tuple[bytes, int]:
    """The JSON header (first 8 bytes: its length, little-endian) and where the tensors start."""
    head = fh.read(8)
    if len(head) < 8:
        return b"", 0
    (length,) = struct.unpack("<Q", head)
    if length > size - 8:
        return b"", 0  # not a safetensors file after all: sampled as plain bytes
    return fh.read(length), 8 + length


def _file_identity(path: Path, size: int) -> dict:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        if path.suffix in CONFIG_SUFFIXES and size <= MAX_CONFIG_BYTES:
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


def folder_identity(folder: str) -> str:
    """16 hex digits naming what a local checkpoint folder holds (see the module docstring).
    Hidden files and folders (caches, ``.git``) are left out."""
    root = Path(os.path.expanduser(folder)).resolve()
    entries = {}
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(directory) / name
            if name.startswith(".") or path.suffix not in CONFIG_SUFFIXES + WEIGHT_SUFFIXES:
                continue
            entries[path.relative_to(root).as_posix()] = _file_identity(path, path.stat().st_size)
    blob = json.dumps(entries, sort_keys=True).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]
