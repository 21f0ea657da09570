"""Each unified system's published checkpoint structure, mapped onto our model at that size.

``tests/support/data/parity/<model>/real_state_dict_shapes.json`` holds every state-dict key and
shape of the authors' classes built on the meta device at the published configuration (that
configuration and its source are in the file; the steps in the folder's README). Each test hands
those keys and shapes, as meta tensors, to our loader's own functions (the geometry read from
them as it is read from a downloaded checkpoint), which load them strictly: no missing key, no
unexpected key, equal shapes. So a key or shape that only the published size has fails here,
not after a multi-GB download. Janus 1.3B's is in test_janus13_parity.py. Meta device: seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

DATA = Path(__file__).resolve().parents[2] / "support" / "data" / "parity"


def _manifest(model: str) -> dict:
    return json.loads((DATA / model / "real_state_dict_shapes.json").read_text(encoding="utf-8"))


def _meta(shapes: dict[str, list[int]], prefix: str = "") -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: torch.empty(v, device="meta") for k, v in shapes.items() if k.startswith(prefix)}


def _shapes(module: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def _same(ours: dict, theirs: dict[str, list[int]]) -> None:
    theirs = {k: tuple(v) for k, v in theirs.items()}
    assert sorted(set(theirs) - set(ours)) == [], "keys of the published checkpoint our model lacks"
    assert sorted(set(ours) - set(theirs)) == [], "keys our model has that the published checkpoint lacks"
    assert {k: v for k, v in ours.items() if theirs[k] != v} == {}, "shapes that differ"


# -- Show-o ------------------------------------------------------------------------------------


def test_show_o_512_and_magvit_v2_at_the_published_size(tmp_path, monkeypatch):
    """show-o-512x512 (Phi-1.5 at Show-o's 58,498-token vocabulary, 437 tensors) and MAGVIT-v2
    (382 tensors) through build_language_model / build_magvit, as ShowoUnified._load calls them."""
    from lmms_genbench.generators.unified.showo import loading, magvit, real

    manifest = _manifest("showo")
    config, shapes = manifest["config"], manifest["state_dict_shapes"]
    phi = tmp_path / "phi-1_5"  # the tokenizer folder's config.json is where the loader reads Phi's geometry
    phi.mkdir()
    (phi / "config.json").write_text(json.dumps(config["phi-1_5"]), encoding="utf-8")
    monkeypatch.setattr(loading, "read_state", lambda repo, dtype, prefix="", device="cpu":
                        _meta(shapes["show-o-512x512"], prefix))
    lm = loading.build_language_model(str(phi), "showlab/show-o-512x512",
                                      config["show-o-512x512"]["vocab_size"], "meta", "float32")
    _same(_shapes(lm), {k.removeprefix("showo."): v for k, v in shapes["show-o-512x512"].items()})
    assert _shapes(lm) == _shapes(real.language_model())

    vq = magvit.build_magvit(_meta(shapes["magvitv2"]))
    _same(_shapes(vq), shapes["magvitv2"])
    assert vq.geometry == magvit.REAL_GEOMETRY and _shapes(vq) == _shapes(real.image_tokenizer())
    # the loader's image size: sqrt(num_vq_tokens) codes a side, 16 pixels per code
    assert vq.codebook_size == config["show-o-512x512"]["codebook_size"]
    assert int(config["show-o-512x512"]["num_vq_tokens"] ** 0.5) * vq.geometry.downsample == 512


# -- BAGEL -------------------------------------------------------------------------------------


def test_bagel_7b_mot_at_the_published_size(tmp_path):
    """BAGEL-7B-MoT: ema.safetensors (1,223 tensors, 14.6 B values: the MoT LM with its
    generation twin, SigLIP less its last layer, the 70 x 70 ViT and 64 x 64 latent position
    tables) and ae.safetensors (FLUX.1's autoencoder, 244 tensors), through the loader's
    read_configs / autoencoder_shape / build_empty / diffusers_state."""
    from lmms_genbench.generators.unified.bagel import checkpoint, loading
    from lmms_genbench.generators.unified.bagel.autoencoder import diffusers_state

    manifest = _manifest("bagel")
    config, shapes = manifest["config"], manifest["state_dict_shapes"]
    for name in ("llm_config.json", "vit_config.json"):
        (tmp_path / name).write_text(json.dumps(config[name]), encoding="utf-8")
    llm_config, vit_config = checkpoint.read_configs(checkpoint.BagelFiles(str(tmp_path)))
    ae_state = _meta(shapes["ae.safetensors"])
    ae_shape = checkpoint.autoencoder_shape(ae_state)
    network, vae = loading.build_empty(llm_config, vit_config, ae_shape)
    _same(_shapes(network), shapes["ema.safetensors"])
    mapped = diffusers_state(ae_state, len(ae_shape.multipliers))
    assert len(mapped) == len(ae_state)
    _same(_shapes(vae), {k: list(v.shape) for k, v in mapped.items()})

    real_llm, real_vit, real_ae = checkpoint.real_configs()  # what the random published-size model builds
    sizes = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
             "num_key_value_heads", "image_size", "patch_size", "tie_word_embeddings")
    assert ae_shape == real_ae
    assert [getattr(llm_config, k, None) for k in sizes] == [getattr(real_llm, k, None) for k in sizes]
    assert [getattr(vit_config, k, None) for k in sizes] == [getattr(real_vit, k, None) for k in sizes]


# -- BLIP3-o -----------------------------------------------------------------------------------


def _renamed_by_transformers(model, keys):
    """``keys`` (a checkpoint's pre-v5 names) as transformers' from_pretrained renames them for
    ``model``: its conversion mapping, then the base-model prefix (core_model_loading's two calls)."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightConverter, WeightRenaming, rename_source_key

    mapping = get_model_conversion_mapping(model)
    renamings = [m for m in mapping if isinstance(m, WeightRenaming)]
    converters = [m for m in mapping if isinstance(m, WeightConverter)]
    ours, out = model.state_dict(), {}
    for key in keys:
        new, _ = rename_source_key(key, renamings, converters, model.base_model_prefix, ours)
        if new not in ours and key in ours:
            new, _ = rename_source_key(key, [], [], model.base_model_prefix, ours)
        out[key] = new
    return out


@pytest.mark.parametrize("name", ["BLIP3o-Model-4B", "BLIP3o-Model-8B"])
def test_blip3o_at_the_published_size(name):
    """BLIP3o-Model-4B (Qwen2.5-VL-3B, tied head) and -8B (Qwen2.5-VL-7B): the Qwen2.5-VL half's
    keys as transformers renames them become exactly our Qwen2_5_VLForConditionalGeneration's
    (built from the config by qwen_config); the generation half (model.dit.*, latent queries) is
    exactly what load_qwen sets aside and what NextDiTCrossAttn.from_state_dict reads."""
    import re

    from transformers import Qwen2_5_VLForConditionalGeneration

    from lmms_genbench.generators.unified.blip3o import checkpoint, real
    from lmms_genbench.generators.unified.blip3o.dit import NextDiTCrossAttn, dit_weights

    manifest = _manifest("blip3o")
    config, shapes, tied = manifest["configs"][name], manifest["state_dict_shapes"][name], manifest["tied"][name]
    generation = {k: v for k, v in shapes.items() if re.search(checkpoint.GENERATION_KEYS, k)}
    assert sorted({k.split(".")[1] for k in generation}) == ["dit", "latent_queries"]
    saved = {k: v for k, v in shapes.items() if k not in generation and k not in tied}

    with torch.device("meta"):
        lm = Qwen2_5_VLForConditionalGeneration(checkpoint.qwen_config(config))
    renamed = _renamed_by_transformers(lm, saved)
    assert len(set(renamed.values())) == len(renamed)
    ours = {k: v for k, v in _shapes(lm).items() if not (config["tie_word_embeddings"] and k == "lm_head.weight")}
    _same(ours, {renamed[k]: v for k, v in saved.items()})
    # a head left out of the file must be the embedding (tied), else it would load as random
    assert (lm.lm_head.weight is lm.get_input_embeddings().weight) is bool(tied)

    with torch.device("meta"):
        dit = NextDiTCrossAttn.from_state_dict(dit_weights(_meta(generation)))
    _same(_shapes(dit), dit_weights(generation))
    assert generation["model.latent_queries"] == [1, config["n_query"], config["hidden_size"]]
    if name == "BLIP3o-Model-4B":  # real.py's random 4B is the same model
        with torch.device("meta"):
            parts = real.real_parts()
        assert _shapes(parts["dit"]) == _shapes(dit)
        assert {k: v for k, v in _shapes(parts["lm"]).items() if "embed_tokens" not in k and "lm_head" not in k} == \
            {k: v for k, v in _shapes(lm).items() if "embed_tokens" not in k and "lm_head" not in k}


# -- VILA-U ------------------------------------------------------------------------------------

#: what the authors' vision_tower file holds and VILA-U never runs (our loader leaves it unread):
#: SigLIP's text tower and contrastive scale/bias, the vision tower's pooling head and final norm,
#: its last encoder layer (encode_image stops one layer early) and the quantiser's EMA statistics
_VILA_U_UNREAD = (r"rqvaesiglip\.siglip_model\.text_model\.", r"rqvaesiglip\.(siglip_model\.)?logit_(scale|bias)$",
                  r"rqvaesiglip\.siglip_model\.vision_model\.(head|post_layernorm)\.",
                  r"rqvaesiglip\.quantizer\.codebooks\.\d+\.(cluster_size_ema|embed_ema)$")


@pytest.mark.parametrize("name, side, tokens, pixels", [("vila-u-7b-256", 256, 256, 256),
                                                        ("vila-u-7b-384", 384, 729, 384)])
def test_vila_u_at_the_published_size(tmp_path, monkeypatch, name, side, tokens, pixels):
    """vila-u-7b-256 and -384: llm/ maps exactly onto transformers' LLaMA; vision_tower/ and
    mm_projector/ through load_vision / load_projector (the SigLIP geometry from the id the tower
    config names, the quantiser, decoder and depth transformer from the config), every tensor they
    need present and every other one of a kind VILA-U never runs. The decoder's and the depth
    transformer's sizes are derived from the authors' code, not read from the published files
    (see the data README)."""
    import re

    from transformers import LlamaConfig, LlamaForCausalLM

    from lmms_genbench.generators.unified.vila_u import checkpoint

    manifest = _manifest("vila_u")
    config, shapes = manifest["configs"][name], manifest["state_dict_shapes"][name]
    part = {p: {k.split("/", 1)[1]: v for k, v in shapes.items() if k.startswith(p + "/")}
            for p in ("llm", "vision_tower", "mm_projector")}
    top = {"mm_hidden_size": config["mm_hidden_size"], "hidden_size": config["hidden_size"]}
    (tmp_path / "vision_tower").mkdir()
    (tmp_path / "mm_projector").mkdir()
    (tmp_path / "vision_tower" / "config.json").write_text(json.dumps(config["vision_tower"]), encoding="utf-8")
    (tmp_path / "mm_projector" / "config.json").write_text(
        json.dumps({"mm_projector_type": config["mm_projector_type"]}), encoding="utf-8")
    monkeypatch.setattr(checkpoint, "load_weights", lambda folder: _meta(part[folder.name]))
    with torch.device("meta"):
        tower, depth, vision = checkpoint.load_vision(tmp_path, top)
        projector = checkpoint.load_projector(tmp_path, top)
        llm = LlamaForCausalLM(LlamaConfig(**config["llm"]))
    _same(_shapes(projector), part["mm_projector"])
    renamed = _renamed_by_transformers(llm, part["llm"])
    _same(_shapes(llm), {renamed[k]: v for k, v in part["llm"].items()})

    read = {f"rqvaesiglip.{k}": v for k, v in _shapes(tower).items()}
    read.update({f"rqtransformer.{k}": v for k, v in _shapes(depth).items()})
    last = vision.num_hidden_layers - 1  # the layer encode_image never reaches
    unread = (*_VILA_U_UNREAD, rf"rqvaesiglip\.siglip_model\.vision_model\.encoder\.layers\.{last}\.")
    left = {k: v for k, v in part["vision_tower"].items() if k not in read}
    assert sorted(k for k in left if not any(re.search(p, k) for p in unread)) == []
    _same(read, {k: v for k, v in part["vision_tower"].items() if k in read})

    # the geometry the loader derives (VilaUUnified._load): input size, code grid, drawn size
    grid = vision.image_size // vision.patch_size
    latent_side = tower.decoder_latent_shape[0] if tower.decoder_latent_shape else grid
    assert (vision.image_size, grid ** 2, latent_side * 2 ** (len(tower.decoder.up) - 1)) == (side, tokens, pixels)
    assert config["vision_tower"]["rqvaesiglip"]["latent_shape"][:2] == [grid, grid]
    if name == "vila-u-7b-256":  # real.py's random 256 model is the same model
        from lmms_genbench.generators.unified.vila_u import real

        built = real.parts("meta")
        assert (_shapes(built["tower"]), _shapes(built["depth"]), _shapes(built["projector"]), _shapes(built["llm"])) \
            == (_shapes(tower), _shapes(depth), _shapes(projector), _shapes(llm))


# -- Janus-Pro 7B (DeepSeek's format) ----------------------------------------------------------


def test_janus_pro_7b_deepseek_format_at_the_published_size():
    """deepseek-ai/Janus-Pro-7B as DeepSeek publishes it (936 tensors, 7.42 B values): its keys,
    mapped by map_state_dict (renames, the SigLIP tower's fused qkv split), become exactly
    transformers' Janus built by janus_config from the same config and state dict, as
    load_deepseek reads them; 576 image tokens, 24 x 24 codes of 16 px (384 px)."""
    from transformers import JanusForConditionalGeneration

    from lmms_genbench.generators.unified.janus_deepseek import janus_config, map_state_dict

    real = _manifest("janus_pro7b")
    state = _meta(real["state_dict_shapes"])
    ids = {"bos_token_id": 100000, "eos_token_id": 100001, "pad_token_id": 100015, "image_token_id": 100581}
    config = janus_config(real["config"], {"num_image_tokens": 576}, state, ids)
    with torch.device("meta"):
        ours = _shapes(JanusForConditionalGeneration(config))
    mapped = {k: list(v.shape) for k, v in map_state_dict(state).items()}
    assert len(mapped) == len(ours)  # nothing dropped or merged beyond the qkv split
    _same(ours, mapped)
    assert (config.text_config.hidden_size, config.text_config.num_hidden_layers) == (4096, 30)
    assert (config.vision_config.num_image_tokens, config.vq_config.num_patches) == (576, 24)
    assert config.vq_config.num_patches * 2 ** (len(config.vq_config.channel_multiplier) - 1) == 384


def test_janus_pro_7b_config_json_as_published_omits_llamas_defaults():
    """DeepSeek's save_pretrained writes language_config without the keys equal to LlamaConfig's
    defaults (measured in their environment; a public copy of the published config.json shows the
    same: max_position_embeddings, model_type, num_hidden_layers, torch_dtype, vocab_size only); its
    LlamaConfig(**language_config) fills them back, and so does janus_config."""
    from lmms_genbench.generators.unified.janus_deepseek import janus_config

    real = _manifest("janus_pro7b")
    state = _meta(real["state_dict_shapes"])
    ids = {"bos_token_id": 100000, "eos_token_id": 100001, "pad_token_id": 100015, "image_token_id": 100581}
    published = json.loads(json.dumps(real["config"]))
    published["language_config"] = {k: v for k, v in published["language_config"].items() if k in (
        "max_position_embeddings", "model_type", "num_hidden_layers", "torch_dtype", "vocab_size")}
    as_published = janus_config(published, {"num_image_tokens": 576}, state, ids).text_config
    reconstructed = janus_config(real["config"], {"num_image_tokens": 576}, state, ids).text_config
    assert as_published.to_dict() == reconstructed.to_dict()
