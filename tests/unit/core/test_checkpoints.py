"""What names a checkpoint (core/checkpoints.py): a local folder by the digest of every byte (its
hash cache: tests/unit/generators/test_weight_keys.py), a Hub id by the commit the local cache's
refs resolve its revision to, so a new revision is another checkpoint; anything else by nothing."""

from __future__ import annotations

import pytest

from lmms_genbench.core import checkpoints

A, B = "a" * 40, "b" * 40


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """A Hugging Face cache of the test's own, with ``org/model`` at revision ``main`` = A."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("LMMS_GENBENCH_CACHE", str(tmp_path / "cache"))
    refs = cache / "models--org--model" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text(A)
    return refs


def test_a_hub_id_is_named_by_the_commit_its_revision_resolves_to(hub_cache):
    assert checkpoints.checkpoint_identity("org/model") == {"commit": A}
    (hub_cache / "main").write_text(B)  # the repository moved on, and the cache followed
    assert checkpoints.checkpoint_identity("org/model") == {"commit": B}
    (hub_cache / "v1").write_text(A)
    assert checkpoints.hub_commit("org/model", "v1") == A
    assert checkpoints.hub_commit("org/model", "c" * 40) == "c" * 40  # a pinned commit is itself


@pytest.mark.parametrize("source", ["org/absent", "gpt-4o", "not a repo/id x", ""])
def test_what_the_cache_does_not_hold_is_named_by_nothing(hub_cache, source):
    assert checkpoints.checkpoint_identity(source) is None


def test_checkpoint_keys_name_each_argument_that_holds_weights(hub_cache, tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    keys = checkpoints.checkpoint_keys({"pretrained": str(folder), "tokenizer": "org/model", "steps": 4, "x": "gpt-4o"})
    assert set(keys) == {"pretrained", "tokenizer"}
    assert keys["tokenizer"] == {"commit": A} and set(keys["pretrained"]) == {"folder"}
    (folder / "model.safetensors").write_bytes(b"weights, trained on")
    assert checkpoints.checkpoint_keys({"pretrained": str(folder)})["pretrained"] != keys["pretrained"]
