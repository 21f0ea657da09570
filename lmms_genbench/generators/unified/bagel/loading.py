"""Load a published BAGEL checkpoint into :class:`.network.BagelNetwork` and diffusers' autoencoder.

The modules are built on the meta device (no random initialisation of 14B parameters), the
published tensors assigned under strict key checks, then moved to the device and dtype asked for;
the rotary tables (buffers, not in the checkpoint) are rebuilt there.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from ....core.deps import require
from .autoencoder import build_autoencoder, diffusers_state
from .checkpoint import AUTHORS, autoencoder_shape, locate, read_configs, real_configs
from .network import BagelNetwork, SpecialIds

__all__ = ["build_empty", "load_bagel", "random_real_size", "special_ids"]

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>")


def build_empty(llm_config: Any, vit_config: Any, ae_shape: Any) -> tuple[BagelNetwork, Any]:
    """The network and autoencoder on the meta device (shapes only)."""
    with torch.device("meta"):
        network = BagelNetwork(llm_config, vit_config, ae_shape.latent_channels, AUTHORS["ae_downsample"])
        vae = build_autoencoder(ae_shape)
    return network, vae


def load_bagel(pretrained: str, device: Any, dtype: Any) -> tuple[BagelNetwork, Any, Any, SpecialIds]:
    """Network, autoencoder, tokenizer and special ids of the checkpoint ``pretrained``."""
    safetensors = require("safetensors.torch", "the bagel unified model")
    transformers = require("transformers", "the bagel unified model")
    files = locate(pretrained)
    llm_config, vit_config = read_configs(files)
    ae_state = safetensors.load_file(files.path("ae.safetensors"))
    ae_shape = autoencoder_shape(ae_state)
    if 2 ** (len(ae_shape.multipliers) - 1) != AUTHORS["ae_downsample"]:
        raise ValueError(f"ae.safetensors downsamples by {2 ** (len(ae_shape.multipliers) - 1)}, BAGEL expects 8")
    network, vae = build_empty(llm_config, vit_config, ae_shape)
    # cast while assigning, so that moving needs no dtype change (diffusers warns at a cast)
    ema = {k: v.to(dtype) for k, v in safetensors.load_file(files.path("ema.safetensors")).items()}
    expected = set(network.state_dict())
    missing = sorted(expected - set(ema))
    if missing:
        raise ValueError(f"ema.safetensors lacks {len(missing)} weights of BAGEL, e.g. {', '.join(missing[:3])}")
    extra = sorted(set(ema) - expected)
    if extra:  # the authors' loader (accelerate, not strict) ignores them too
        logger.warning("ema.safetensors: %d tensors BAGEL does not use, ignored (e.g. %s)", len(extra), extra[0])
    network.load_state_dict({k: ema[k] for k in expected}, strict=True, assign=True)
    ae = {k: v.to(dtype) for k, v in diffusers_state(ae_state, len(ae_shape.multipliers)).items()}
    vae.load_state_dict(ae, strict=True, assign=True)
    model = network.language_model.model
    rotary = type(model.rotary_emb)
    model.rotary_emb = rotary(config=llm_config)  # off the meta device before moving
    network.to(device=device)
    vae.to(device=device)
    with torch.device(device):  # its frequencies stay float32 whatever the weights' dtype
        model.rotary_emb = rotary(config=llm_config)
    tokenizer = transformers.AutoTokenizer.from_pretrained(files.folder)
    return network.eval(), vae.eval(), tokenizer, special_ids(tokenizer)


def special_ids(tokenizer: Any) -> SpecialIds:
    """The ids of Qwen2.5's chat and vision markers; a tokenizer without them is not BAGEL's."""
    vocab = tokenizer.get_vocab()
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise ValueError(f"the tokenizer lacks {', '.join(missing)}")
    return SpecialIds(*(vocab[t] for t in SPECIAL_TOKENS))


def random_real_size(device: Any, dtype: Any, seed: int = 0) -> tuple[BagelNetwork, Any]:
    """BAGEL-7B-MoT's network and autoencoder at the published sizes with seeded random weights,
    built directly on ``device`` (for timing and memory checks where the weights cannot be had)."""
    llm_config, vit_config, ae_shape = real_configs()
    torch.manual_seed(seed)
    with torch.device(device):
        network = BagelNetwork(llm_config, vit_config, ae_shape.latent_channels, AUTHORS["ae_downsample"])
        vae = build_autoencoder(ae_shape)
    return network.to(dtype).eval(), vae.to(dtype).eval()
