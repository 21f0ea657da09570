"""Weight-true keys (core/checkpoints.py; the legacy formula: generators/weights.py): every byte of a local checkpoint folder is hashed,
once per change of a file (the cache keyed by path, size, mtime and inode), and a store keyed
the legacy way (sampled bytes) is adopted, not redrawn (through the lmms-eval command:
tests/e2e/test_weight_keys_e2e.py).

On tiny random-weight folders only: the hashing rate of real checkpoints is measured in
docs/generators.md, not here.
"""

from __future__ import annotations

import json
import os
import shutil
import struct

import pytest

from lmms_genbench.core import checkpoints
from lmms_genbench.generators import weights
from lmms_genbench.store.identity import adopt_folder


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A hash cache of the test's own (the tiny smoke folders stay where they are cached)."""
    monkeypatch.setenv("LMMS_GENBENCH_CACHE", str(tmp_path / "cache"))


def _safetensors(path, tensors: int = 96, floats: int = 8 * 1024):
    """A safetensors file of ``tensors`` float32 tensors of 32 KiB each (3 MiB), values by index."""
    header, offset = {}, 0
    for i in range(tensors):
        header[f"t{i}"] = {"dtype": "F32", "shape": [floats], "data_offsets": [offset, offset + 4 * floats]}
        offset += 4 * floats
    blob = json.dumps(header).encode()
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(blob)) + blob)
        for i in range(tensors):
            fh.write(struct.pack("<f", float(i + 1)) * floats)
    return 8 + len(blob), 4 * floats


def _folder(root):
    (root / "transformer").mkdir(parents=True)
    (root / "model_index.json").write_text('{"_class_name": "FluxPipeline"}')
    (root / "transformer" / "config.json").write_text('{"patch_size": 1}')
    start, size = _safetensors(root / "transformer" / "diffusion_pytorch_model.safetensors")
    return root / "transformer" / "diffusion_pytorch_model.safetensors", start, size


def test_every_single_tensor_edit_changes_the_key(own_cache, tmp_path):
    """The issue's experiment (there: 256 KiB tensors of a 24 MiB file, the sampled key missed 80
    of 96), shrunk: negate one 32 KiB tensor of a 3 MiB file, each of the 96 in turn."""
    path, start, size = _folder(tmp_path / "ckpt")
    first = checkpoints.folder_identity(str(tmp_path / "ckpt"))
    legacy = weights.legacy_identity(str(tmp_path / "ckpt"))
    original = path.read_bytes()
    legacy_same = 0
    for i in range(96):
        data = bytearray(original)
        lo = start + i * size
        data[lo:lo + size] = struct.pack("<f", -float(i + 1)) * (size // 4)
        path.write_bytes(bytes(data))
        os.utime(path, ns=(1, 1 + i))  # a new stamp, as any write gives
        assert checkpoints.folder_identity(str(tmp_path / "ckpt")) != first, f"tensor {i}"
        legacy_same += weights.legacy_identity(str(tmp_path / "ckpt")) == legacy
    assert legacy_same > 0  # the sampled key was blind to some of them


def test_a_weight_file_is_hashed_once_per_change(own_cache, tmp_path, monkeypatch):
    path, _, _ = _folder(tmp_path / "ckpt")
    hashed = []
    real = checkpoints.sha256_path
    monkeypatch.setattr(checkpoints, "sha256_path", lambda p: hashed.append(p.name) or real(p))
    key = checkpoints.folder_identity(str(tmp_path / "ckpt"))
    assert hashed.count(path.name) == 1
    assert checkpoints.folder_identity(str(tmp_path / "ckpt")) == key
    assert hashed.count(path.name) == 1  # served from the cache
    assert (tmp_path / "cache" / "weight_hashes.json").exists()
    moved = tmp_path / "moved"
    shutil.copytree(tmp_path / "ckpt", moved)  # another path and inode: hashed again, same key
    assert checkpoints.folder_identity(str(moved)) == key and hashed.count(path.name) == 2
    os.utime(path, ns=(5, 5))  # touched: hashed again
    assert checkpoints.folder_identity(str(tmp_path / "ckpt")) == key and hashed.count(path.name) == 3


def test_the_legacy_identity_is_the_formula_stores_were_keyed_by(own_cache, tmp_path):
    """Pinned: adopting old stores depends on computing their key exactly as before (the legacy
    value is what the code before whole-file hashing gave for this folder)."""
    _folder(tmp_path / "ckpt")
    assert weights.legacy_identity(str(tmp_path / "ckpt")) == "02d451a89a452a12"
    assert checkpoints.folder_identity(str(tmp_path / "ckpt")) == "e07180789cdc232a"


def test_a_store_keyed_the_legacy_way_is_adopted_not_redrawn(tmp_path):
    describer = tmp_path / "store" / "describer-x"
    (describer / "diffusers-old-1" / "proto" / "doc").mkdir(parents=True)
    (describer / "diffusers-old-1" / "proto" / "doc" / "hop_001.txt").write_text("a cat")
    adopted = adopt_folder(describer, "diffusers-new-2", ("diffusers-old-1",))
    assert adopted == describer / "diffusers-new-2"
    assert (adopted / "proto" / "doc" / "hop_001.txt").read_text() == "a cat"
    assert not (describer / "diffusers-old-1").exists()
    # a current folder is never replaced
    (describer / "diffusers-old-1").mkdir()
    assert adopt_folder(describer, "diffusers-new-2", ("diffusers-old-1",)) is None
    assert (describer / "diffusers-old-1").exists()


def test_a_diffusers_generator_names_its_legacy_key(tmp_path):
    """The legacy name is what the generator was named before whole-file hashing, for the same
    folder and settings (the formula kept in weights.legacy_identity)."""
    from lmms_genbench.core.keys import generator_name
    from lmms_genbench.generators.diffusers_backend import DiffusersGenerator
    from lmms_genbench.smoke.pipelines import tiny_family_path

    folder = str(tiny_family_path("flux"))
    plan = DiffusersGenerator.plan(pretrained=folder, device="cpu", dtype="float32", steps=1, width=32, height=32)
    settings = {"pretrained": f"weights:{weights.legacy_identity(folder)}", "steps": 1, "guidance": None,
                "width": 32, "height": 32, "dtype": "float32", "negative_prompt": None, "device": "cpu"}
    assert plan.legacy_names == (generator_name("diffusers", "FluxPipeline", settings),)
    assert plan.name != plan.legacy_names[0]
