"""Reading DeepSeek's Janus layout (generators/unified/janus_deepseek.py): what it refuses, and how it says so.
Outputs against DeepSeek's code: test_janus13_parity.py."""

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from lmms_genbench.core.failures import GeneratorConfigError
from lmms_genbench.generators.unified import build_unified
from lmms_genbench.generators.unified.janus_deepseek import (
    is_deepseek_layout,
    map_state_dict,
)

TINY = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "janus13" / "Janus-1.3B"


def _copy(tmp_path, edit=None):
    folder = tmp_path / "Janus-1.3B"
    shutil.copytree(TINY, folder)
    if edit:
        config = json.loads((folder / "config.json").read_text())
        edit(config)
        (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def test_the_layouts_are_told_apart_by_config_json():
    assert is_deepseek_layout(json.loads((TINY / "config.json").read_text()))
    assert not is_deepseek_layout({"model_type": "janus", "text_config": {}, "vision_config": {}, "vq_config": {}})


def test_an_unknown_siglip_tower_is_named(tmp_path):
    folder = _copy(tmp_path, lambda c: c["vision_config"]["params"].update(model_name="siglip_huge_patch7"))
    with pytest.raises(GeneratorConfigError, match="siglip_huge_patch7.*siglip_large_patch16_384"):
        build_unified("janus", pretrained=folder, device="cpu", dtype="float32")


def test_an_unsupported_projector_is_named(tmp_path):
    folder = _copy(tmp_path, lambda c: c["aligner_config"]["params"].update(projector_type="linear"))
    with pytest.raises(GeneratorConfigError, match="aligner_config.params.projector_type 'linear'"):
        build_unified("janus", pretrained=folder, device="cpu", dtype="float32")


def test_missing_weights_name_the_files_looked_for(tmp_path):
    folder = _copy(tmp_path)
    (Path(folder) / "model.safetensors").unlink()
    with pytest.raises(GeneratorConfigError, match="model.safetensors.*pytorch_model.bin"):
        build_unified("janus", pretrained=folder, device="cpu", dtype="float32")


def test_a_key_outside_deepseeks_model_is_an_error():
    with pytest.raises(KeyError, match="vision_model.vision_tower.blocks.0.ls1.gamma"):
        map_state_dict({"vision_model.vision_tower.blocks.0.ls1.gamma": object()})


def test_a_tokenizer_without_the_image_tag_gets_it_as_deepseeks_processor_adds_it(tmp_path):
    """VLChatProcessor adds ``<image_placeholder>`` as a special token when tokenizer.json lacks it;
    on this tokenizer without it, DeepSeek's processor gave it id 373 (begin/end of image 371/372)."""
    folder = Path(_copy(tmp_path))
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] != "<image_placeholder>"]
    (folder / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    janus = build_unified("janus", pretrained=str(folder), device="cpu", dtype="float32")
    chat = janus._chat
    assert (chat.image_id, chat.boi_id, chat.eoi_id) == (373, 371, 372)
    assert janus.model.config.image_token_id == 373
    ids = chat.understanding_ids("Describe")
    assert ids.count(373) == 16 and ids[ids.index(371) + 17] == 372


def test_buffers_deepseeks_model_saves_but_never_runs_are_dropped():
    kept = map_state_dict({"vision_model.vision_tower.attn_pool.latent": 0, "gen_vision_model.quantize.codebook_used": 0,
                           "language_model.model.layers.0.self_attn.rotary_emb.inv_freq": 0, "gen_embed.weight": 1})
    assert kept == {"model.generation_embeddings.weight": 1}
