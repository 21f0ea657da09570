"""The store names what made it: each namespace's identity.json is written beside its hashed
folder name, hashes back to it, is refused (naming the file) when it does not, and
``lmms-genbench store show`` prints it."""

import json

import pytest

from lmms_genbench.core.errors import ActionableError
from lmms_genbench.core.keys import generator_name, name_record
from lmms_genbench.host import model_identity, model_record
from lmms_genbench.store.identity import IDENTITY_FILE, check_identity, identity_folders, write_identity

SETTINGS = {"pretrained": "weights:0123456789abcdef", "steps": 2, "dtype": "float32", "device": "cpu",
            "call": {"max_sequence_length": 512}}


def _generator_folder(root):
    name = generator_name("diffusers", "StableDiffusion3Pipeline", SETTINGS)
    record = {**name_record("diffusers", "StableDiffusion3Pipeline", SETTINGS), "pipeline": "StableDiffusion3Pipeline",
              "pretrained": "/ckpt/sd3", "model": "diffusers", "given": {"max_sequence_length": "512"}}
    return root / "describer-x" / name, record


def test_an_identity_is_written_once_and_hashes_back_to_its_folder(tmp_path):
    folder, record = _generator_folder(tmp_path)
    path = write_identity(folder, record)
    written = json.loads(path.read_text())
    assert written["name"] == folder.name and written["settings"]["call"] == {"max_sequence_length": 512}
    assert check_identity(folder) == written
    write_identity(folder, {**record, "pipeline": "changed"})  # a folder keeps its first identity
    assert json.loads(path.read_text())["pipeline"] == "StableDiffusion3Pipeline"


def test_a_describer_identity_is_the_parts_of_its_name():
    args = {"pretrained": "org/vlm", "device": "cuda", "api_key": "secret"}
    record = model_record("llava_hf", args)
    assert "api_key" not in json.dumps(record) and "device" not in record["args"]
    from lmms_genbench.core.keys import recorded_name

    assert recorded_name(json.loads(json.dumps(record))) == model_identity("llava_hf", args)


@pytest.mark.parametrize("edit", [
    lambda r: r["settings"]["call"].update(max_sequence_length=256),  # a setting changed by hand
    lambda r: r.update(label="FluxPipeline"),
    lambda r: r["settings"].pop("dtype"),
])
def test_a_tampered_identity_is_refused_naming_the_file(tmp_path, edit):
    folder, record = _generator_folder(tmp_path)
    path = write_identity(folder, record)
    tampered = json.loads(path.read_text())
    edit(tampered)
    path.write_text(json.dumps(tampered))
    with pytest.raises(ActionableError, match=f"identity file {path} does not describe its folder"):
        check_identity(folder)


def test_an_identity_without_a_recipe_is_checked_by_its_name(tmp_path):
    folder = tmp_path / "d" / "smoke-s0-64px"
    write_identity(folder, {"model": "smoke", "given": {}})
    assert check_identity(folder)["name"] == "smoke-s0-64px"
    (folder / IDENTITY_FILE).write_text(json.dumps({"name": "smoke-s1-64px"}))
    with pytest.raises(ActionableError, match="hashes to smoke-s1-64px, not smoke-s0-64px"):
        check_identity(folder)


def test_store_show_prints_each_identity_and_refuses_a_tampered_one(tmp_path, capsys):
    from lmms_genbench.cli import main

    folder, record = _generator_folder(tmp_path)
    write_identity(folder, record)
    write_identity(folder.parent, {"model": "x"})
    (tmp_path / ".features" / "abc").mkdir(parents=True)
    (tmp_path / ".features" / "abc" / IDENTITY_FILE).write_text("{}")  # the feature cache's own: not a namespace
    assert list(identity_folders(tmp_path)) == [folder.parent, folder]
    assert main(["store", "show", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert '"max_sequence_length": 512' in out and '"/ckpt/sd3"' in out and "2 namespaces shown, 0 refused" in out
    (folder / IDENTITY_FILE).write_text(json.dumps({**json.loads((folder / IDENTITY_FILE).read_text()), "label": "x"}))
    assert main(["store", "show", str(tmp_path)]) == 1
    assert f"{folder}: refused: the store's identity file" in capsys.readouterr().out


def test_a_merge_keeps_the_first_identity_of_a_folder(tmp_path):
    from lmms_genbench.store import merge_stores

    for store, path in (("a", "/node1/ckpt"), ("b", "/node2/ckpt")):  # the same checkpoint, other paths
        folder, record = _generator_folder(tmp_path / store)
        write_identity(folder, {**record, "pretrained": path})
        chain = folder / "proto" / f"doc-{store}"
        chain.mkdir(parents=True)
        (chain / "000.txt").write_text("a cat")
    merge_stores([tmp_path / "a", tmp_path / "b"], tmp_path / "c")
    merged = folder.relative_to(tmp_path / "b")
    assert check_identity(tmp_path / "c" / merged)["pretrained"] == "/node1/ckpt"
