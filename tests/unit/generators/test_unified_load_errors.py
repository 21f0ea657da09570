"""Every unified port's loading failures name the file and the key or file that is missing or
wrong, and a mistyped local path is reported as a missing folder, not as an invalid hub id.

Each case is a copy of a parity checkpoint (tests/support/data/parity/, files linked, not copied)
with one file edited or removed, loaded through ``build_unified`` as a user names it.
"""

import json
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from lmms_genbench.core.failures import GeneratorConfigError  # noqa: E402
from lmms_genbench.generators.unified import build_unified  # noqa: E402
from lmms_genbench.generators.unified.common import CheckpointError, check_source  # noqa: E402
from tests.support.threads import single_thread  # noqa: E402

PARITY = Path(__file__).resolve().parents[2] / "support" / "data" / "parity"
CPU = {"device": "cpu", "dtype": "float32"}


@pytest.fixture(autouse=True)
def one_thread():
    with single_thread():
        yield


def _linked(src: Path, dst: Path) -> Path:
    """A tree of links to ``src``'s files (edits replace a link, never the parity file)."""
    shutil.copytree(src, dst, copy_function=lambda a, b: os.symlink(os.path.abspath(a), b))
    return dst


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.unlink()
    path.write_text(json.dumps(data))


def _fails(family: str, message: str, **kwargs) -> str:
    with pytest.raises(GeneratorConfigError) as err:
        build_unified(family, **{**CPU, **kwargs})
    text = str(err.value)
    assert message in text, text
    assert "\n" not in text.strip()
    return text


def test_check_source_tells_a_local_path_from_a_hub_id(tmp_path):
    check_source("pretrained", "showlab/show-o-512x512")  # a hub id: left to the Hub client
    check_source("pretrained", str(tmp_path))
    for value in (str(tmp_path / "missing"), "./models/showo", "~/models/showo", "models/showo/512"):
        with pytest.raises(CheckpointError, match=r"pretrained: no such folder"):
            check_source("pretrained", value)
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(CheckpointError, match="is a file; give the checkpoint's folder"):
        check_source("pretrained", str(tmp_path / "weights.bin"))


# -- Show-o ------------------------------------------------------------------------------------

SHOWO = PARITY / "showo"


def _showo(pretrained=None, vq_model=None, tokenizer=None):
    return {"pretrained": str(pretrained or SHOWO / "show-o-512x512"), "vq_model": str(vq_model or SHOWO / "magvitv2"),
            "tokenizer": str(tokenizer or SHOWO / "phi-1_5")}


def test_showo_load_failures_name_file_and_key(tmp_path):
    folder = _linked(SHOWO / "show-o-512x512", tmp_path / "no_vq")
    _edit_json(folder / "config.json", lambda c: c.pop("num_vq_tokens"))
    _fails("showo", f"{folder}/config.json has no 'num_vq_tokens'", **_showo(pretrained=folder))

    folder = _linked(SHOWO / "show-o-512x512", tmp_path / "not_square")
    _edit_json(folder / "config.json", lambda c: c.update(num_vq_tokens=15))
    _fails("showo", "config.json: num_vq_tokens 15 is not a square", **_showo(pretrained=folder))

    # another model's folder (the image tokenizer's) named as Show-o
    _fails("showo", f"{SHOWO / 'magvitv2'}/config.json has no 'vocab_size'", **_showo(pretrained=SHOWO / "magvitv2"))

    folder = tmp_path / "vq_without_weights"
    folder.mkdir()
    (folder / "config.json").write_text('{"_class_name": "MAGVITv2"}')
    _fails("showo", f"{folder} has no pytorch_model.safetensors", **_showo(vq_model=folder))

    _fails("showo", f"pretrained: no such folder '{tmp_path / 'show-o-512'}'", **_showo(pretrained=tmp_path / "show-o-512"))
    _fails("showo", "tokenizer: no such folder", **_showo(tokenizer=tmp_path / "phi"))


def test_showo_magvit_decoder_width_is_its_own():
    """The authors' VQGANDecoder takes its own ``ch``: a 64-wide decoder behind a 32-wide encoder loads."""
    import torch

    from lmms_genbench.generators.unified.showo.magvit import MagvitGeometry, MagvitV2, build_magvit

    geometry = MagvitGeometry(32, (1, 1, 2), (1, 1, 1), (1, 2, 2), (1, 1, 1), 13, decoder_ch=64)
    torch.manual_seed(0)
    state = MagvitV2(geometry).state_dict()
    assert state["decoder.conv_in.weight"].shape[0] == 128 and state["encoder.conv_in.weight"].shape[0] == 32
    loaded = build_magvit(state)
    assert loaded.geometry == geometry and loaded.geometry.decoder_width == 64
    assert loaded.decode(torch.zeros(1, 4, dtype=torch.long)).shape == (1, 3, 8, 8)


# -- Janus -------------------------------------------------------------------------------------

JANUS = PARITY / "janus13" / "Janus-1.3B"


def test_janus_deepseek_load_failures_name_file_and_key(tmp_path):
    folder = _linked(JANUS, tmp_path / "no_vocab")
    _edit_json(folder / "config.json", lambda c: c["language_config"].pop("vocab_size"))
    _fails("janus", "config.json language_config has no 'vocab_size'", pretrained=str(folder))

    folder = _linked(JANUS, tmp_path / "no_vision")
    _edit_json(folder / "config.json", lambda c: c.pop("vision_config"))
    _fails("janus", "config.json has no 'vision_config'", pretrained=str(folder))

    folder = _linked(JANUS, tmp_path / "no_tokenizer")
    (folder / "tokenizer.json").unlink()
    _fails("janus", f"{folder} has no tokenizer.json", pretrained=str(folder))

    _fails("janus", f"no such folder '{tmp_path / 'Janus-1.3'}'", pretrained=str(tmp_path / "Janus-1.3"))


def test_janus_transformers_load_failures_name_file_and_key(tmp_path, tiny_janus):
    folder = _linked(Path(tiny_janus), tmp_path / "no_vision")
    _edit_json(folder / "config.json", lambda c: c.pop("vision_config"))
    _fails("janus", f"{folder}/config.json has no 'vision_config'", pretrained=str(folder))
    # another model's folder: Show-o's config names no model_type
    _fails("janus", "config.json: model_type None is neither transformers' 'janus' nor DeepSeek's",
           pretrained=str(SHOWO / "show-o-512x512"))


# -- BAGEL -------------------------------------------------------------------------------------

BAGEL = PARITY / "bagel" / "BAGEL-7B-MoT-tiny"


def test_bagel_load_failures_name_file_and_key(tmp_path):
    folder = _linked(BAGEL, tmp_path / "no_layers")
    _edit_json(folder / "vit_config.json", lambda c: c.pop("num_hidden_layers"))
    _fails("bagel", f"{folder}/vit_config.json has no 'num_hidden_layers'", pretrained=str(folder))
    _fails("bagel", "is not a BAGEL checkpoint folder: it lacks llm_config.json", pretrained=str(JANUS))
    _fails("bagel", "no such folder", pretrained=str(tmp_path / "BAGEL-7B"))


# -- BLIP3-o -----------------------------------------------------------------------------------

BLIP3O = PARITY / "blip3o"


def test_blip3o_load_failures_name_file_and_key(tmp_path):
    from safetensors.torch import load_file, save_file

    processor = str(BLIP3O / "Qwen2.5-VL-7B-Instruct")
    folder = _linked(BLIP3O / "BLIP3o-Model-4B", tmp_path / "no_dit")
    weights = sorted(p for p in folder.iterdir() if p.name.endswith(".safetensors"))
    for path in weights:
        state = {k: v for k, v in load_file(str(path)).items() if not k.startswith("model.dit.")}
        path.unlink()
        save_file(state, str(path), metadata={"format": "pt"})
    _fails("blip3o", "has no 'model.dit.*' weights (BLIP3-o's DiT)", pretrained=str(folder), processor=processor)

    folder = _linked(BLIP3O / "BLIP3o-Model-4B", tmp_path / "no_vision")
    _edit_json(folder / "config.json", lambda c: c.pop("vision_config"))
    _fails("blip3o", f"{folder}/config.json has no 'vision_config'", pretrained=str(folder), processor=processor)

    _fails("blip3o", "it lacks", pretrained=str(JANUS), processor=processor)
    _fails("blip3o", "unified.pretrained: no such folder", pretrained=str(tmp_path / "BLIP3o"), processor=processor)
    _fails("blip3o", "unified.processor: no such folder", pretrained=str(BLIP3O / "BLIP3o-Model-4B"),
           processor=str(tmp_path / "Qwen"))


# -- VILA-U ------------------------------------------------------------------------------------

VILA_U = PARITY / "vila_u" / "vila-u-7b-256"


def test_vila_u_load_failures_name_file_and_key(tmp_path):
    folder = _linked(VILA_U, tmp_path / "no_depth")
    _edit_json(folder / "vision_tower" / "config.json", lambda c: c.pop("rqtransformer"))
    _fails("vila_u", f"{folder}/vision_tower/config.json has no 'rqtransformer'", pretrained=str(folder))
    _fails("vila_u", f"{VILA_U / 'llm'} is the llm/ part of a VILA-U checkpoint; give its folder",
           pretrained=str(VILA_U / "llm"))
    _fails("vila_u", "is not a VILA-U config", pretrained=str(JANUS))
    _fails("vila_u", "no such folder", pretrained=str(tmp_path / "vila-u"))


def test_blip3o_processor_of_another_model_is_named():
    _fails("blip3o", "unified.processor: ", pretrained=str(BLIP3O / "BLIP3o-Model-4B"),
           processor=str(JANUS))
