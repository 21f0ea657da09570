"""BLIP3-o's diffusion transformer: a Lumina-Next DiT that turns the language model's query
states into CLIP image features, and the flow-matching sampler that runs it.

The blocks are diffusers' own (``LuminaNextDiTBlock``, ``LuminaPatchEmbed``,
``LuminaCombinedTimestepCaptionEmbedding``, ``LuminaLayerNormContinuous``,
``PixArtAlphaTextProjection``); the model around them is not diffusers'
``LuminaNextDiT2DModel``: the authors' copy (``blip3o/model/lumina_nextdit2d.py``) projects the
condition to the DiT width first (``caption_projection``), so the timestep embedding and every
block's cross-attention see the projected condition. The module tree here is theirs
(``NextDiTCrossAttn.model``), so the published state-dict keys ``model.dit.model.*`` load as they
are. Widths are read from those weights: the authors' builder fixes them in code
(``NextDiTCrossAttnConfig``: 1792 channels and width, 24 layers, 28 heads) and writes none to
config.json.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

#: ``NextDiTCrossAttnConfig`` (blip3o/model/nextdit_crossattn.py): an 8 x 8 grid of 1792-d CLIP
#: features (EVA-CLIP-E-14-plus pooled 4 x 4, ``gen_pooling: early_pool2d_4``), patch 1
GRID, PATCH = 8, 1
#: the RoPE table NextDiTCrossAttn precomputes: head_dim over a 384 x 384 grid
ROPE_GRID = 384
#: Alpha-VLLM/Lumina-Next-SFT-diffusers' scheduler config, which the authors load by id
#: (blip3o_qwen_inference.py): FlowMatchEulerDiscreteScheduler, 1000 train steps, shift 1
FLOW_TRAIN_STEPS, FLOW_SHIFT = 1000, 1.0


class NextDiTCrossAttn(nn.Module):
    """The DiT, keyed as the authors' ``NextDiTCrossAttn`` (its ``model`` holds every weight)."""

    def __init__(self, in_channels: int, dim: int, n_layers: int, n_heads: int, n_kv_heads: int,
                 ffn_inner: int, cross_dim: int, norm_eps: float = 1e-5) -> None:
        super().__init__()
        self.model = _LuminaNextDiT(in_channels, dim, n_layers, n_heads, n_kv_heads, ffn_inner, cross_dim, norm_eps)
        self.in_channels = in_channels

    @classmethod
    def from_state_dict(cls, weights: Mapping[str, torch.Tensor]) -> NextDiTCrossAttn:
        """The DiT whose widths the weights (keys without the ``model.dit.`` prefix) imply, loaded."""
        layers = {int(k.split(".")[2]) for k in weights if k.startswith("model.layers.")}
        dim, in_channels = weights["model.patch_embedder.proj.weight"].shape
        n_heads = weights["model.layers.0.gate"].shape[0]
        head_dim = dim // n_heads
        dit = cls(in_channels=in_channels, dim=dim, n_layers=len(layers), n_heads=n_heads,
                  n_kv_heads=weights["model.layers.0.attn1.to_k.weight"].shape[0] // head_dim,
                  ffn_inner=weights["model.layers.0.feed_forward.linear_1.weight"].shape[0],
                  cross_dim=weights["model.caption_projection.linear_1.weight"].shape[1])
        dit.load_state_dict(dict(weights), strict=True)
        return dit

    def forward(self, x: torch.Tensor, timestep: torch.Tensor, z_latents: torch.Tensor) -> torch.Tensor:
        # every condition position is attended (the authors pass an all-ones mask)
        mask = torch.ones(z_latents.shape[:2], device=z_latents.device)
        return self.model(x, timestep, z_latents, mask)


class _LuminaNextDiT(nn.Module):
    def __init__(self, in_channels, dim, n_layers, n_heads, n_kv_heads, ffn_inner, cross_dim, norm_eps) -> None:
        super().__init__()
        from diffusers.models.embeddings import (
            LuminaCombinedTimestepCaptionEmbedding,
            LuminaPatchEmbed,
            PixArtAlphaTextProjection,
            get_2d_rotary_pos_embed_lumina,
        )
        from diffusers.models.normalization import LuminaLayerNormContinuous
        from diffusers.models.transformers.lumina_nextdit2d import LuminaNextDiTBlock

        if (dim // n_heads) % 4:
            raise ValueError(f"the DiT's head size {dim // n_heads} must be a multiple of 4 (2-d RoPE)")
        self.out_channels = in_channels
        self.caption_projection = PixArtAlphaTextProjection(in_features=cross_dim, hidden_size=dim)
        self.patch_embedder = LuminaPatchEmbed(patch_size=PATCH, in_channels=in_channels, embed_dim=dim, bias=True)
        self.time_caption_embed = LuminaCombinedTimestepCaptionEmbedding(hidden_size=min(dim, 1024),
                                                                         cross_attention_dim=dim)
        # diffusers' block sizes its SwiGLU as multiple_of * ceil(8 dim / 3 / multiple_of); a
        # multiple_of equal to the stored width gives that width for any multiple_of the
        # authors used (256 in their config), since 8 dim / 3 <= width
        self.layers = nn.ModuleList(
            LuminaNextDiTBlock(dim, n_heads, n_kv_heads, ffn_inner, None, norm_eps, True, dim) for _ in range(n_layers)
        )
        self.norm_out = LuminaLayerNormContinuous(embedding_dim=dim, conditioning_embedding_dim=min(dim, 1024),
                                                  elementwise_affine=False, eps=1e-6, bias=True,
                                                  out_dim=PATCH * PATCH * in_channels)
        self.rope = get_2d_rotary_pos_embed_lumina(dim // n_heads, ROPE_GRID, ROPE_GRID)

    def forward(self, x, timestep, caption, caption_mask):
        if self.rope.device != x.device:  # moved once, not at every step (38 MB at the real width)
            self.rope = self.rope.to(x.device)
        hidden, mask, sizes, rope = self.patch_embedder(x, self.rope)
        caption = self.caption_projection(caption)
        temb = self.time_caption_embed(timestep, caption, caption_mask)
        caption_mask = caption_mask.bool()
        for layer in self.layers:
            hidden = layer(hidden, mask, rope, caption, caption_mask, temb=temb, cross_attention_kwargs={})
        hidden = self.norm_out(hidden, temb)
        height, width = sizes[0]
        rows, cols = height // PATCH, width // PATCH
        hidden = hidden[:, : rows * cols].view(hidden.shape[0], rows, cols, PATCH, PATCH, self.out_channels)
        return hidden.permute(0, 5, 1, 3, 2, 4).flatten(4, 5).flatten(2, 3)


def sample_features(dit: NextDiTCrossAttn, condition: torch.Tensor, generators: Sequence[torch.Generator],
                    steps: int, guidance: float) -> torch.Tensor:
    """CLIP features ``(B, GRID * GRID, channels)`` for the query states ``condition`` ``(B, n, d)``.

    The authors' ``sample_images`` (blip3o_qwen_inference.py): Euler flow matching from noise over
    sigmas ``linspace(1, 1 / steps, steps)``, classifier-free guidance against an all-zero
    condition, the DiT fed integer timesteps (they cast ``sigma * 1000`` to long). Row ``i``'s
    noise comes from ``generators[i]`` on the CPU, so each row depends on its own seed only.
    """
    from diffusers import FlowMatchEulerDiscreteScheduler

    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=FLOW_TRAIN_STEPS, shift=FLOW_SHIFT)
    scheduler.set_timesteps(steps, sigmas=np.linspace(1.0, 1 / steps, steps))
    shape = (dit.in_channels, GRID, GRID)
    latents = torch.stack([torch.randn(shape, generator=g, dtype=torch.float32) for g in generators])
    latents = latents.to(device=condition.device, dtype=condition.dtype)
    both = torch.cat([torch.zeros_like(condition), condition])  # unconditional rows first, as theirs
    for t in scheduler.timesteps:
        model_in = latents.repeat(2, 1, 1, 1)
        step = t.expand(model_in.shape[0]).to(model_in.device, torch.long)
        uncond, cond = dit(model_in, step, both).chunk(2)
        latents = scheduler.step(uncond + guidance * (cond - uncond), t, latents).prev_sample
    return latents.flatten(2).transpose(1, 2).contiguous()


def dit_weights(state: Mapping[str, Any]) -> dict[str, Any]:
    """The DiT's entries of a checkpoint state dict, without their ``model.dit.`` prefix."""
    prefix = "model.dit."
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
