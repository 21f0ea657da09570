"""BAGEL's published checkpoint (``ByteDance-Seed/BAGEL-7B-MoT``) as published: its files, its
two config files and the constants the authors' loaders add to them.

The repository holds ``llm_config.json`` (a Qwen2 config), ``vit_config.json`` (a SigLIP vision
config), ``ema.safetensors`` (every weight but the autoencoder's, keys ``language_model.*``,
``vit_model.*``, ``connector.*``, ...), ``ae.safetensors`` (FLUX.1's autoencoder, its own key
names) and Qwen2.5's tokenizer files. Nothing is converted: a hub id is fetched with
``huggingface_hub`` (which honours ``HF_ENDPOINT``), a folder is read in place.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ....core.deps import require
from ..common import CheckpointError, check_source, need

__all__ = ["AUTHORS", "FILES", "AutoencoderShape", "BagelFiles", "autoencoder_shape", "locate", "read_configs",
           "real_configs"]

#: the files a BAGEL checkpoint needs (the authors' app.py / inference.ipynb read these names)
FILES = ("llm_config.json", "vit_config.json", "ema.safetensors", "ae.safetensors", "tokenizer_config.json",
         "vocab.json", "merges.txt")
OPTIONAL_FILES = ("tokenizer.json",)

#: what the authors' loaders set beside the two config files (app.py, inference.ipynb and
#: lmms-eval 0.7.3's bagel class, identically): the LM is the MoT variant with QK-norm and untied
#: heads; the ViT drops its last layer; BagelConfig's remaining arguments
AUTHORS = {
    "vit_max_num_patch_per_side": 70,
    "max_latent_size": 64,
    "latent_patch_size": 2,
    "connector_act": "gelu_pytorch_tanh",
    "vit_layers_dropped": 1,
    # FLUX.1's autoencoder: modeling/autoencoder.py load_ae (not in any file of the checkpoint)
    "ae_downsample": 8,
    "ae_scale_factor": 0.3611,
    "ae_shift_factor": 0.1159,
    # image transforms (app.py): ImageTransform(1024, 512, 16) for the VAE, (980, 224, 14) for the ViT
    "vae_transform": (1024, 512, 16),
    "vit_transform": (980, 224, 14),
}


@dataclass(frozen=True)
class BagelFiles:
    """Local paths of one checkpoint's files."""

    folder: str

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)


def locate(pretrained: str) -> BagelFiles:
    """The checkpoint's folder: ``pretrained`` itself, or its hub snapshot (only BAGEL's files)."""
    if os.path.isdir(pretrained):
        missing = [f for f in FILES if not os.path.isfile(os.path.join(pretrained, f))]
        if missing:
            raise CheckpointError(f"{pretrained} is not a BAGEL checkpoint folder: it lacks {', '.join(missing)}")
        return BagelFiles(pretrained)
    check_source("unified.pretrained", pretrained)
    hub = require("huggingface_hub", "the bagel unified model")
    folder = hub.snapshot_download(pretrained, allow_patterns=list(FILES + OPTIONAL_FILES))
    return locate(folder)


def read_configs(files: BagelFiles) -> tuple[Any, Any]:
    """transformers' ``Qwen2Config`` and ``SiglipVisionConfig`` as the authors' loaders finish them."""
    transformers = require("transformers", "the bagel unified model")
    found = {}
    for name, keys in (("llm_config.json", LLM_KEYS), ("vit_config.json", VIT_KEYS)):
        try:
            with open(files.path(name), encoding="utf-8") as fh:
                found[name] = json.load(fh)
        except ValueError as exc:
            raise CheckpointError(f"{files.path(name)} is not JSON: {exc}") from None
        # transformers' config classes would fill a missing size with another model's default
        for key in keys:
            need(found[name], key, files.path(name))
    return _configs(transformers, found["llm_config.json"], found["vit_config.json"])


#: the sizes each config file must state (the rest have the authors' config classes' defaults)
LLM_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads")
VIT_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "patch_size")


def _configs(transformers: Any, llm: dict[str, Any], vit: dict[str, Any]) -> tuple[Any, Any]:
    llm = {k: v for k, v in llm.items() if k not in ("architectures", "torch_dtype", "model_type")}
    llm["tie_word_embeddings"] = False  # as the authors' loaders set it
    llm_config = transformers.Qwen2Config(**llm)
    vit = {k: v for k, v in vit.items() if k not in ("architectures", "torch_dtype", "model_type", "rope")}
    vit["num_hidden_layers"] = int(vit["num_hidden_layers"]) - AUTHORS["vit_layers_dropped"]
    vit_config = transformers.SiglipVisionConfig(**vit)
    return llm_config, vit_config


@dataclass(frozen=True)
class AutoencoderShape:
    """FLUX-style autoencoder sizes, read off ``ae.safetensors`` (load_ae fixes FLUX.1's:
    128 channels, multipliers 1, 2, 4, 4, two residual blocks, 16 latent channels)."""

    channels: int
    multipliers: tuple[int, ...]
    res_blocks: int
    latent_channels: int


def autoencoder_shape(state: dict[str, Any]) -> AutoencoderShape:
    """The autoencoder's sizes from its state dict's shapes."""
    for key in ("encoder.conv_in.weight", "decoder.conv_in.weight", "encoder.down.0.block.0.conv1.weight"):
        need(state, key, "ae.safetensors")
    channels = int(state["encoder.conv_in.weight"].shape[0])
    levels = sorted({int(k.split(".")[2]) for k in state if k.startswith("encoder.down.")})
    widths = [int(state[f"encoder.down.{i}.block.0.conv1.weight"].shape[0]) for i in levels]
    blocks = len({k.split(".")[4] for k in state if k.startswith("encoder.down.0.block.")})
    latent = int(state["decoder.conv_in.weight"].shape[1])
    return AutoencoderShape(channels, tuple(w // channels for w in widths), blocks, latent)


def real_configs() -> tuple[Any, Any, AutoencoderShape]:
    """BAGEL-7B-MoT's published sizes: llm_config.json is Qwen2.5-7B-Instruct's, vit_config.json
    is SigLIP so400m-patch14 at 980 px (27 layers, 26 used), ae.safetensors is FLUX.1's."""
    transformers = require("transformers", "the bagel unified model")
    llm = dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4, hidden_act="silu", max_position_embeddings=32768,
               rms_norm_eps=1e-6, rope_theta=1000000.0)
    vit = dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27, num_attention_heads=16,
               image_size=980, patch_size=14, hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, num_channels=3)
    llm_config, vit_config = _configs(transformers, llm, vit)
    return llm_config, vit_config, AutoencoderShape(128, (1, 2, 4, 4), 2, 16)
