"""Janus checkpoints in DeepSeek's own layout (``deepseek-ai/Janus-1.3B``, ``deepseek-ai/Janus-Pro-7B``),
read onto transformers' Janus classes.

DeepSeek publishes Janus 1.3B and Janus-Pro 1B / 7B for its ``janus`` package (github.com/deepseek-ai/Janus): a
``config.json`` with ``language_config`` / ``vision_config`` / ``aligner_config`` /
``gen_vision_config`` / ``gen_aligner_config`` / ``gen_head_config``, ``processor_config.json``
and ``preprocessor_config.json`` for its ``VLChatProcessor``, a Llama-style ``tokenizer.json``,
and the state dict of its ``MultiModalityCausalLM`` in ``model.safetensors``. This module reads
those files as published and builds transformers' ``JanusForConditionalGeneration`` from them
at load time: sizes come from the config and, where DeepSeek's config only names a part (the
SigLIP tower, the VQ model) and its code holds the sizes, from the weights' shapes; state-dict
keys are renamed and the SigLIP tower's fused ``qkv`` projections split. Prompts, image
preprocessing and the tokenizer follow DeepSeek's processor (:mod:`.janus_chat`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ...core.failures import GeneratorConfigError
from .common import CheckpointError, need, repo_file
from .janus_chat import DeepSeekChat, read_json

__all__ = ["DEEPSEEK_FILES", "DeepSeekChat", "is_deepseek_layout", "load_deepseek", "map_state_dict", "read_json",
           "real_config", "weight_paths"]

#: what DeepSeek's Janus-1.3B repository holds besides README/.gitattributes (its weights: one safetensors file)
DEEPSEEK_FILES = ("config.json", "model.safetensors", "preprocessor_config.json", "processor_config.json",
                  "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json")
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")

#: heads of the SigLIP towers DeepSeek's config names (janus/models/siglip_vit.py, SigLIP_MODEL_CONFIG):
#: the one size the weights do not carry
SIGLIP_HEADS = {"siglip_so400m_patch14_384": 16, "siglip_so400m_patch14_224": 16, "siglip_large_patch16_384": 16}


def is_deepseek_layout(config: dict[str, Any]) -> bool:
    """Whether a ``config.json`` is DeepSeek's ``multi_modality`` one rather than transformers' ``janus``."""
    return config.get("model_type") == "multi_modality" or "language_config" in config


def weight_paths(pretrained: str) -> list[Path]:
    """The weight files of ``pretrained``: the first of ``_WEIGHT_FILES`` it holds, or every shard
    its index names (also read by ``lmms-genbench check``: unified/folders.py)."""
    for name in _WEIGHT_FILES:
        path = repo_file(pretrained, name)
        if path is None:
            continue
        if not name.endswith(".index.json"):
            return [path]
        shards = sorted(set(json.loads(path.read_text(encoding="utf-8"))["weight_map"].values()))
        paths = [repo_file(pretrained, shard) for shard in shards]
        if any(part is None for part in paths):
            raise CheckpointError(f"{pretrained}: a shard named in {name} is missing")
        return paths  # type: ignore[return-value]
    raise CheckpointError(f"{pretrained} has none of {', '.join(_WEIGHT_FILES)}")


def _state_dict(pretrained: str) -> dict[str, Any]:
    from transformers.modeling_utils import load_state_dict  # reads safetensors or a torch pickle

    return {key: value for part in weight_paths(pretrained) for key, value in load_state_dict(str(part)).items()}


# -- state dict ------------------------------------------------------------------------

_VISION = "vision_model.vision_tower."
_RENAMES = [  # DeepSeek prefix -> transformers prefix, first match wins
    ("language_model.model.", "model.language_model."),
    ("language_model.lm_head.", "lm_head."),
    (_VISION + "patch_embed.proj.", "model.vision_model.embeddings.patch_embedding."),
    (_VISION + "norm.", "model.vision_model.post_layernorm."),
    ("gen_head.output_mlp_projector.", "model.generation_head.proj_out."),
    ("gen_head.vision_head.", "model.generation_head.vision_head."),
    ("gen_embed.", "model.generation_embeddings."),
    ("gen_vision_model.", "model.vqmodel."),
]
_BLOCK = {"norm1": "layer_norm1", "norm2": "layer_norm2", "attn.proj": "self_attn.projection_layer",
          "mlp.fc1": "mlp.fc1", "mlp.fc2": "mlp.fc2"}
_VQ = [(re.compile(r"(encoder)\.conv_blocks\.(\d+)\.res\."), r"\1.down.\2.block."),
       (re.compile(r"(encoder)\.conv_blocks\.(\d+)\."), r"\1.down.\2."),
       (re.compile(r"(decoder)\.conv_blocks\.(\d+)\.res\."), r"\1.up.\2.block."),
       (re.compile(r"(decoder)\.conv_blocks\.(\d+)\."), r"\1.up.\2."),
       (re.compile(r"\.mid\.0\."), ".mid.block_1."), (re.compile(r"\.mid\.1\."), ".mid.attn_1."),
       (re.compile(r"\.mid\.2\."), ".mid.block_2.")]


def map_state_dict(state: dict[str, Any]) -> dict[str, Any]:
    """DeepSeek's ``MultiModalityCausalLM`` state dict as transformers' ``JanusForConditionalGeneration`` one.

    Dropped: the SigLIP tower's attention-pooling head (built, never run: DeepSeek's tower
    returns its patch features), the VQ quantizer's training-time ``codebook_used`` counter,
    and rotary ``inv_freq`` buffers older LLaMA code saved (recomputed at load).
    """
    out: dict[str, Any] = {}
    for key, value in state.items():
        if key.startswith(_VISION + "attn_pool.") or key.endswith(("quantize.codebook_used", "rotary_emb.inv_freq")):
            continue
        if key == _VISION + "pos_embed":
            out["model.vision_model.embeddings.position_embedding.weight"] = value[0]
            continue
        block = re.match(re.escape(_VISION) + r"blocks\.(\d+)\.(.+)\.(weight|bias)$", key)
        if block:
            layer, part, kind = block.groups()
            prefix = f"model.vision_model.encoder.layers.{layer}."
            if part == "attn.qkv":  # one fused projection -> q, k, v
                for name, chunk in zip(("q_proj", "k_proj", "v_proj"), value.chunk(3, dim=0)):
                    out[f"{prefix}self_attn.{name}.{kind}"] = chunk.contiguous()
            elif part in _BLOCK:
                out[f"{prefix}{_BLOCK[part]}.{kind}"] = value
            else:
                raise KeyError(f"unexpected SigLIP key {key}")
            continue
        mlp = re.match(r"(aligner|gen_aligner)\.layers\.(\d+)\.(weight|bias)$", key)
        if mlp:  # Sequential(Linear, GELU, Linear, ...): Linear 0 -> fc1, Linear 2k -> hidden_layers[k-1]
            name, index, kind = mlp.group(1), int(mlp.group(2)), mlp.group(3)
            target = "model.aligner" if name == "aligner" else "model.generation_aligner"
            part = "fc1" if index == 0 else f"hidden_layers.{index // 2 - 1}"
            out[f"{target}.{part}.{kind}"] = value
            continue
        for old, new in _RENAMES:
            if key.startswith(old):
                renamed = new + key[len(old):]
                if old == "gen_vision_model.":
                    for pattern, repl in _VQ:
                        renamed = pattern.sub(repl, renamed)
                out[renamed] = value
                break
        else:
            raise KeyError(f"unexpected key {key}")
    return out


# -- configuration ---------------------------------------------------------------------

def _count(state: dict[str, Any], pattern: str) -> int:
    found = {int(m.group(1)) for k in state if (m := re.match(pattern, k))}
    return max(found) + 1 if found else 0


LANGUAGE_KEYS = ("vocab_size", "num_hidden_layers")
#: transformers' LlamaConfig defaults, which DeepSeek's ``LlamaConfig(**language_config)`` fills in where
#: config.json omits a key; its save_pretrained omits the keys equal to them, so the published
#: Janus-Pro-7B config.json has no hidden_size, intermediate_size or num_attention_heads
LLAMA_DEFAULTS = {"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32}


class _Weights(dict):
    """A state dict whose missing key names the weights file and the key."""

    def __missing__(self, key: str) -> Any:
        raise CheckpointError(f"the weights (model.safetensors) have no {key!r}")


def janus_config(config: dict[str, Any], processor: dict[str, Any], state: dict[str, Any], ids: dict[str, int]):
    """transformers' ``JanusConfig`` for DeepSeek's ``config.json`` and the shapes of its weights."""
    from transformers import JanusConfig

    source = "config.json"
    language = dict(need(config, "language_config", source))
    vision, aligner, gen_aligner, gen_head, gen_vision = (
        dict(need(config, part, source)).get("params", {}) for part in
        ("vision_config", "aligner_config", "gen_aligner_config", "gen_head_config", "gen_vision_config"))
    for part, keys, where in ((language, LANGUAGE_KEYS, "language_config"), (aligner, ("n_embed",), "aligner_config"),
                              (gen_aligner, ("n_embed",), "gen_aligner_config"),
                              (gen_head, ("n_embed", "image_token_embed"), "gen_head_config")):
        for key in keys:
            need(part, key, f"config.json {where}")
    for part, params in (("aligner_config", aligner), ("gen_aligner_config", gen_aligner)):
        if params.get("projector_type") != "mlp_gelu":
            raise ValueError(f"{part}.params.projector_type {params.get('projector_type')!r} is not supported "
                             "(Janus-1.3B's is 'mlp_gelu')")
    tower = vision.get("model_name", "")
    if tower not in SIGLIP_HEADS:
        raise ValueError(f"vision_config.params.model_name {tower!r} is not a SigLIP tower DeepSeek's code knows "
                         f"({', '.join(SIGLIP_HEADS)})")
    if vision.get("select_feature", "same") != "same":
        raise ValueError("vision_config.params.select_feature must be 'same' (DeepSeek's SigLIP towers use it)")
    # the tower's sizes as built (DeepSeek keeps only the layers up to select_layer)
    state = _Weights(state)
    width = state[_VISION + "pos_embed"].shape[-1]
    patch = state[_VISION + "patch_embed.proj.weight"].shape[-1]
    layers = _count(state, re.escape(_VISION) + r"blocks\.(\d+)\.")
    mlp_hidden = state[_VISION + "blocks.0.mlp.fc1.weight"].shape[0]
    image_size = int(vision.get("image_size", 384))
    grid = image_size // patch
    tokens = int(processor.get("num_image_tokens", grid * grid))
    if tokens != grid * grid:
        raise ValueError(f"processor_config.json's num_image_tokens {tokens} is not the tower's {grid}x{grid} patches")
    # the VQ model (gen_vision_config names it: "VQ-16"; DeepSeek's vq_model.py holds its sizes)
    vq = "gen_vision_model."
    base = state[vq + "encoder.conv_in.weight"].shape[0]
    levels = _count(state, re.escape(vq) + r"decoder\.conv_blocks\.(\d+)\.")
    multiplier = [state[f"{vq}decoder.conv_blocks.{levels - 1 - level}.res.0.conv2.weight"].shape[0] // base
                  for level in range(levels)]
    res_blocks = _count(state, re.escape(vq) + r"decoder\.conv_blocks\.0\.res\.(\d+)\.") - 1
    codes, code_dim = state[vq + "quantize.embedding.weight"].shape
    if codes != int(gen_vision.get("image_token_size", codes)) or code_dim != int(gen_vision.get("n_embed", code_dim)):
        raise ValueError("gen_vision_config.params disagrees with the VQ codebook in the weights")
    language = {**LLAMA_DEFAULTS, **language}
    hidden = int(language["hidden_size"])
    for key, shape in (("vocab_size", state["language_model.model.embed_tokens.weight"].shape),
                       ("hidden_size", state["language_model.model.embed_tokens.weight"].shape[::-1]),
                       ("intermediate_size", state["language_model.model.layers.0.mlp.gate_proj.weight"].shape)):
        if int(language[key]) != shape[0]:  # a default filled in for another model's size, or a wrong key
            raise CheckpointError(f"config.json language_config {key} {language[key]} (LlamaConfig's default where "
                                  f"the key is absent) disagrees with the weights' {shape[0]}")
    if int(gen_aligner["n_embed"]) != hidden or int(gen_head["image_token_embed"]) != int(gen_aligner["n_embed"]):
        raise ValueError("gen_aligner n_embed and gen_head image_token_embed must equal the language model's width")
    text = {
        "model_type": "llama",
        "vocab_size": int(language["vocab_size"]),
        "hidden_size": hidden,
        "intermediate_size": int(language["intermediate_size"]),
        "num_hidden_layers": int(language["num_hidden_layers"]),
        "num_attention_heads": int(language["num_attention_heads"]),
        "num_key_value_heads": int(language.get("num_key_value_heads", language["num_attention_heads"])),
        "max_position_embeddings": int(language.get("max_position_embeddings", 2048)),
        # LlamaConfig's defaults where DeepSeek's language_config says nothing (as its LlamaConfig(**...))
        "rms_norm_eps": float(language.get("rms_norm_eps", 1e-6)),
        "rope_theta": float(language.get("rope_theta", 10000.0)),
        "hidden_act": language.get("hidden_act", "silu"),
        "tie_word_embeddings": False,
        **ids,
    }
    return JanusConfig(
        text_config=text,
        vision_config={
            "hidden_size": int(width), "num_hidden_layers": layers, "num_attention_heads": SIGLIP_HEADS[tower],
            "image_size": image_size, "patch_size": int(patch), "mlp_ratio": mlp_hidden / width,
            "layer_norm_eps": 1e-6, "attention_bias": True, "hidden_act": "gelu",
            "projection_dim": int(aligner["n_embed"]), "depth": int(aligner.get("depth", 1)),
            "num_image_tokens": tokens,
        },
        vq_config={
            "embed_dim": int(code_dim), "num_embeddings": int(codes), "latent_channels": int(
                state[vq + "decoder.conv_in.weight"].shape[1]),
            "base_channels": int(base), "channel_multiplier": multiplier, "num_res_blocks": res_blocks,
            "projection_dim": int(gen_head["image_token_embed"]), "num_hidden_layers": int(gen_aligner.get("depth", 1)),
            "image_token_embed_dim": int(gen_head["n_embed"]), "hidden_act": "gelu",
        },
        image_token_id=ids["image_token_id"],
        tie_word_embeddings=False,
    )


def load_deepseek(pretrained: str, torch: Any, dtype: Any, device: Any,
                  chat_format: str = "auto") -> tuple[Any, DeepSeekChat]:
    """transformers' Janus model (on ``device``, in ``dtype``, eval mode) and the chat of a DeepSeek-layout
    checkpoint (its roles: ``chat_format``, :func:`.janus_chat.chat_roles`)."""
    from transformers import GenerationConfig, JanusForConditionalGeneration
    from transformers.initialization import no_init_weights

    try:
        config = read_json(pretrained, "config.json")
        chat = DeepSeekChat.read(pretrained, chat_format)
        state = _state_dict(pretrained)
        janus = janus_config(config, read_json(pretrained, "processor_config.json"), state, chat.ids())
    except (OSError, ValueError, KeyError) as exc:
        # CheckpointError names the file and key; a bare KeyError would print only the key
        what = str(exc) if isinstance(exc, CheckpointError) else f"{type(exc).__name__}: {exc}"
        raise GeneratorConfigError(f"unified.pretrained: {pretrained!r} is not a readable DeepSeek-format Janus "
                                   f"checkpoint: {what}") from exc
    with no_init_weights(), torch.device(device):  # every weight is loaded next
        model = JanusForConditionalGeneration._from_config(janus, dtype=dtype)
    model.load_state_dict(map_state_dict(state), strict=True)
    model.generation_config = GenerationConfig(
        bos_token_id=janus.text_config.bos_token_id, eos_token_id=chat.eos_id, pad_token_id=chat.pad_id,
        generation_kwargs={"boi_token_id": chat.boi_id},  # image mode reads it from here
    )
    return model.eval(), chat


def real_config():
    """transformers' ``JanusConfig`` at deepseek-ai/Janus-1.3B's sizes, for memory tables and GPU checks
    without its download: its config.json (LLaMA 2048 wide, 24 layers, 16 heads, 5632 MLP, 102400
    tokens; mlp_gelu aligners of depth 2; 16384 codes of 8), the tower it names
    (``siglip_large_patch16_384``: 1024 wide, 24 layers, 16 heads, patch 16, MLP ratio 4, 384 px)
    and ``VQ-16`` (vq_model.py: base 128, ``ch_mult`` [1, 1, 2, 2, 4], 2 blocks, ``z_channels`` 256)."""
    from transformers import JanusConfig

    return JanusConfig(
        text_config={"model_type": "llama", "vocab_size": 102400, "hidden_size": 2048, "intermediate_size": 5632,
                     "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
                     "max_position_embeddings": 16384, "rms_norm_eps": 1e-6, "tie_word_embeddings": False},
        vision_config={"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "image_size": 384,
                       "patch_size": 16, "mlp_ratio": 4.0, "projection_dim": 2048, "depth": 2, "num_image_tokens": 576},
        vq_config={"embed_dim": 8, "num_embeddings": 16384, "latent_channels": 256, "base_channels": 128,
                   "channel_multiplier": [1, 1, 2, 2, 4], "num_res_blocks": 2, "projection_dim": 2048,
                   "num_hidden_layers": 2, "image_token_embed_dim": 2048},
        tie_word_embeddings=False,
    )
