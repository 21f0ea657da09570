"""FLUX.1's autoencoder, which BAGEL publishes as ``ae.safetensors`` in Black Forest Labs' key
names, as diffusers' ``AutoencoderKL`` (16 latent channels, no quant convs): the same network
(group-normed residual blocks, one single-head attention block in the middle, asymmetric-padded
strided downsampling, nearest-neighbour upsampling). The keys are renamed at load time.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ....core.deps import require
from .checkpoint import AUTHORS, AutoencoderShape

__all__ = ["build_autoencoder", "decode_latents", "diffusers_state"]


def build_autoencoder(shape: AutoencoderShape) -> Any:
    """An empty diffusers ``AutoencoderKL`` of ``shape``."""
    diffusers = require("diffusers", "the bagel unified model")
    n = len(shape.multipliers)
    return diffusers.AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * n,
        up_block_types=("UpDecoderBlock2D",) * n, block_out_channels=tuple(shape.channels * m for m in shape.multipliers),
        layers_per_block=shape.res_blocks, latent_channels=shape.latent_channels, norm_num_groups=32,
        scaling_factor=AUTHORS["ae_scale_factor"], shift_factor=AUTHORS["ae_shift_factor"],
        use_quant_conv=False, use_post_quant_conv=False, mid_block_add_attention=True,
    )


_RESNET = {"nin_shortcut": "conv_shortcut"}
_ATTENTION = {"norm": "group_norm", "q": "to_q", "k": "to_k", "v": "to_v", "proj_out": "to_out.0"}


def diffusers_state(state: dict[str, torch.Tensor], levels: int) -> dict[str, torch.Tensor]:
    """``ae.safetensors``' keys (``decoder.up.3.block.0.conv1.weight``) as diffusers' names
    (``decoder.up_blocks.0.resnets.0.conv1.weight``); 1x1 attention convs become linear weights."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        side, rest = key.split(".", 1)
        if m := re.fullmatch(r"(down|up)\.(\d+)\.block\.(\d+)\.(\w+)\.(weight|bias)", rest):
            kind, level, block, part, leaf = m.groups()
            level = int(level) if kind == "down" else levels - 1 - int(level)  # diffusers lists up blocks low-res first
            name = f"{kind}_blocks.{level}.resnets.{block}.{_RESNET.get(part, part)}.{leaf}"
        elif m := re.fullmatch(r"(down|up)\.(\d+)\.(downsample|upsample)\.conv\.(weight|bias)", rest):
            kind, level, sampler, leaf = m.groups()
            level = int(level) if kind == "down" else levels - 1 - int(level)
            name = f"{kind}_blocks.{level}.{sampler}rs.0.conv.{leaf}"
        elif m := re.fullmatch(r"mid\.block_(\d)\.(\w+)\.(weight|bias)", rest):
            block, part, leaf = m.groups()
            name = f"mid_block.resnets.{int(block) - 1}.{_RESNET.get(part, part)}.{leaf}"
        elif m := re.fullmatch(r"mid\.attn_1\.(\w+)\.(weight|bias)", rest):
            part, leaf = m.groups()
            name = f"mid_block.attentions.0.{_ATTENTION[part]}.{leaf}"
            if part != "norm" and leaf == "weight":
                value = value.reshape(value.shape[0], value.shape[1])
        else:
            name = {"norm_out": "conv_norm_out"}.get(rest.split(".")[0], rest.split(".")[0]) + "." + rest.split(".", 1)[1]
        out[f"{side}.{name}"] = value
    return out


def decode_latents(vae: Any, latents: torch.Tensor) -> torch.Tensor:
    """Latents ([1, C, h, w], BAGEL's scaled space) to pixels in [-1, 1], as the authors'
    ``AutoEncoder.decode``: unscale, unshift, decode."""
    z = latents / AUTHORS["ae_scale_factor"] + AUTHORS["ae_shift_factor"]
    return vae.decode(z.to(vae.dtype)).sample
