"""Every role's checkpoint in its store folder's name and identity file (issue 52): a describer's,
a unified model's and a diffusers generator's folder change name when their weights change in
place or their Hub id resolves to a new revision; identity.json records each checkpoint; a folder
named before (no weights in the name) is adopted with its identity file kept aside; a sibling of
the same model and arguments with other weights is found and the part that differs named. Through
the lmms-eval command: tests/e2e/test_checkpoint_identity_e2e.py."""

from __future__ import annotations

import json

import pytest

from lmms_genbench.core.keys import recorded_name
from lmms_genbench.host import model_identity, model_legacy_names, model_record
from lmms_genbench.store.identity import (BEFORE_FILE, IDENTITY_FILE, adopt_folder, changed_parts, check_identity,
                                          checkpoints_now, same_run_elsewhere, write_identity)

A, B = "a" * 40, "b" * 40


@pytest.fixture
def hub(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("LMMS_GENBENCH_CACHE", str(tmp_path / "cache"))
    refs = tmp_path / "hub" / "models--org--vlm" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text(A)
    return refs


def _folder(tmp_path, content=b"weights"):
    folder = tmp_path / "ckpt"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(content)
    return folder


def test_a_describer_is_named_by_its_hub_revision_and_its_folder_by_its_bytes(hub, tmp_path):
    at_a = model_identity("llava_hf", {"pretrained": "org/vlm"})
    record = model_record("llava_hf", {"pretrained": "org/vlm"})
    assert record["checkpoints"] == {"pretrained": {"source": "org/vlm", "commit": A}}
    assert recorded_name(record) == at_a
    (hub / "main").write_text(B)
    assert model_identity("llava_hf", {"pretrained": "org/vlm"}) != at_a  # a new revision: a new folder
    # a Hub id not in the cache keeps the name it always had
    assert model_legacy_names("llava_hf", {"pretrained": "org/other"}) == ()
    folder = _folder(tmp_path)
    first = model_identity("llava_hf", {"pretrained": str(folder)})
    _folder(tmp_path, b"weights, trained on")
    assert model_identity("llava_hf", {"pretrained": str(folder)}) != first


def test_a_unified_model_is_named_by_its_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_GENBENCH_CACHE", str(tmp_path / "cache"))
    from lmms_genbench.generators.unified.registry import plan_unified

    folder = _folder(tmp_path)
    args = {"pretrained": str(folder), "device": "cpu", "dtype": "float32"}
    plan = plan_unified("janus", args)
    assert plan.identity["checkpoints"]["pretrained"]["source"] == str(folder)
    assert recorded_name(plan.identity) == plan.name and len(plan.legacy_names) == 1
    _folder(tmp_path, b"weights, trained on")
    changed = plan_unified("janus", args)
    assert changed.name != plan.name and changed.legacy_names == plan.legacy_names
    parts = changed_parts(plan.identity, changed.identity)
    assert len(parts) == 1 and parts[0].startswith(f"pretrained={folder}: folder ")


def test_a_rerun_finds_the_folder_of_the_same_arguments_with_other_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_GENBENCH_CACHE", str(tmp_path / "cache"))
    folder = _folder(tmp_path)
    args = {"pretrained": str(folder)}
    old = {**model_record("llava_hf", args), "role": "describer", "given": args}
    write_identity(tmp_path / "store" / recorded_name(old), old)
    assert changed_parts(old, checkpoints_now(old)) == []
    _folder(tmp_path, b"weights, trained on")
    assert len(changed_parts(old, checkpoints_now(old))) == 1
    new = {**model_record("llava_hf", args), "role": "describer", "given": args}
    (found, parts), = same_run_elsewhere(tmp_path / "store", new, recorded_name(new))
    assert found.name == recorded_name(old) and parts[0].startswith(f"pretrained={folder}")


def test_a_folder_named_before_weights_keyed_it_is_adopted_with_its_identity_kept_aside(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_GENBENCH_CACHE", str(tmp_path / "cache"))
    args = {"pretrained": str(_folder(tmp_path))}
    record = {**model_record("llava_hf", args), "role": "describer", "given": args}
    (legacy,) = model_legacy_names("llava_hf", args)
    before = {k: v for k, v in record.items() if k not in ("weights", "checkpoints")}
    write_identity(tmp_path / legacy, before)
    (tmp_path / legacy / "hop.txt").write_text("a cat")
    adopted = adopt_folder(tmp_path, recorded_name(record), (legacy,))
    assert adopted == tmp_path / recorded_name(record) and (adopted / "hop.txt").read_text() == "a cat"
    assert not (adopted / IDENTITY_FILE).exists() and json.loads((adopted / BEFORE_FILE).read_text())["name"] == legacy
    write_identity(adopted, record)
    assert check_identity(adopted)["checkpoints"] == record["checkpoints"]
