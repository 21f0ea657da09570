"""BAGEL's network and its two inference paths, one sequence at a time (as the authors' own
``InterleaveInferencer``, which supports one sample per call).

A context is the language model's key/value cache plus two counters: its length and the next
rotary position. Text enters as ``<|im_start|> ids <|im_end|>`` (causal, one position per token);
an image enters between ``<|vision_start|>`` and ``<|vision_end|>`` with every one of its tokens at
the same single position (full attention among them), after which the position advances by one.

* describing: ViT image, then the prompt, then greedy decoding from ``<|im_start|>``;
* drawing: the prompt, then rectified-flow sampling of the latent tokens, each step one pass of
  ``[<|vision_start|>, latents, <|vision_end|>]`` against the cache (not kept), with text guidance
  against an empty context and image guidance, then FLUX's decoder.

Sources: the authors' ``modeling/bagel/bagel.py`` (``prepare_*``, ``forward_cache_update_*``,
``generate_text``, ``generate_image``, ``_forward_flow``) and ``inferencer.py``, read at
oscarqjh/Bagel 751db47 (ByteDance-Seed/Bagel 056b5fd has the same inference code).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .checkpoint import AUTHORS
from .language import KVCache, MoTLanguageModel
from .vision import (Connector, NaViT, SinCosTable, TimestepEmbedder, grid_positions, patchify, resize_for, to_rgb,
                     to_tensor)

__all__ = ["BagelNetwork", "Context", "FlowSettings", "SpecialIds"]


@dataclass(frozen=True)
class SpecialIds:
    """The four tokens the authors' ``add_special_tokens`` looks up (Qwen2.5 has them all)."""

    bos: int  # <|im_start|>
    eos: int  # <|im_end|>
    start_of_image: int  # <|vision_start|>
    end_of_image: int  # <|vision_end|>


@dataclass
class Context:
    cache: KVCache | None = None
    length: int = 0
    position: int = 0


@dataclass(frozen=True)
class FlowSettings:
    """The sampler's settings; defaults are the authors' text-to-image ones (inference.ipynb)."""

    text_scale: float = 4.0
    image_scale: float = 1.0
    interval: tuple[float, float] = (0.4, 1.0)
    timestep_shift: float = 3.0
    steps: int = 50
    renorm_min: float = 0.0
    renorm_type: str = "global"


@dataclass
class _Step:
    """What one denoising pass sees besides the latents."""

    ids: torch.Tensor  # the two image markers
    gen: torch.Tensor  # which tokens take the generation expert: the latents, not the markers
    pos_embed: torch.Tensor  # the latents' sin-cos positions
    contexts: dict[str, Context]  # cond, text (its guidance's), image (its guidance's)


class BagelNetwork(nn.Module):
    """The modules of ``ema.safetensors`` under their published names."""

    def __init__(self, llm_config: Any, vit_config: Any, latent_channels: int, downsample: int) -> None:
        super().__init__()
        hidden = llm_config.hidden_size
        self.patch = AUTHORS["latent_patch_size"]
        self.latent_channels = latent_channels
        self.latent_downsample = downsample * self.patch
        self.language_model = MoTLanguageModel(llm_config)
        self.vit_model = NaViT(vit_config)
        self.vit_patch = vit_config.patch_size
        self.connector = Connector(vit_config.hidden_size, hidden, AUTHORS["connector_act"])
        self.vit_pos_embed = SinCosTable(AUTHORS["vit_max_num_patch_per_side"], hidden)
        latent_dim = self.patch * self.patch * latent_channels
        self.time_embedder = TimestepEmbedder(hidden)
        self.vae2llm = nn.Linear(latent_dim, hidden)
        self.llm2vae = nn.Linear(hidden, latent_dim)
        self.latent_pos_embed = SinCosTable(AUTHORS["max_latent_size"], hidden)

    @property
    def device(self) -> torch.device:
        return self.llm2vae.weight.device

    # -- context ---------------------------------------------------------------

    def _extend(self, ctx: Context, x: torch.Tensor, positions: torch.Tensor, causal: bool, next_position: int,
                gen: torch.Tensor | None = None) -> Context:
        _, cache = self.language_model(x, positions.to(self.device), ctx.cache, gen=gen, causal=causal)
        return Context(cache, ctx.length + x.shape[0], next_position)

    def add_text(self, ctx: Context, ids: list[int], special: SpecialIds) -> Context:
        tokens = torch.tensor([special.bos, *ids, special.eos], device=self.device)
        positions = torch.arange(ctx.position, ctx.position + len(tokens))
        return self._extend(ctx, self.language_model.embed(tokens), positions, True, ctx.position + len(tokens))

    def add_image(self, ctx: Context, image: Any, special: SpecialIds) -> Context:
        """An image for understanding: the VAE transform's resize first (the inferencer resizes every
        input image so), then the ViT transform, then ViT features in the image markers."""
        size, smallest, stride = AUTHORS["vae_transform"]
        image = resize_for(to_rgb(image), size, smallest, stride)
        size, smallest, stride = AUTHORS["vit_transform"]
        pixels = to_tensor(resize_for(image, size, smallest, stride))
        rows, cols = pixels.shape[1] // self.vit_patch, pixels.shape[2] // self.vit_patch
        grid = grid_positions(rows, cols, AUTHORS["vit_max_num_patch_per_side"]).to(self.device)
        dtype = self.llm2vae.weight.dtype
        features = self.vit_model(patchify(pixels, self.vit_patch).to(self.device, dtype), grid)
        features = self.connector(features) + self.vit_pos_embed(grid)
        markers = self.language_model.embed(torch.tensor([special.start_of_image, special.end_of_image],
                                                         device=self.device))
        x = torch.cat([markers[:1], features.to(markers.dtype), markers[1:]])
        positions = torch.full((x.shape[0],), ctx.position)
        return self._extend(ctx, x, positions, False, ctx.position + 1)

    # -- describing ------------------------------------------------------------

    def generate_text(self, ctx: Context, special: SpecialIds, max_length: int,
                      pick: Callable[[torch.Tensor], int], on_logits: Callable[[torch.Tensor], None] | None = None,
                      ) -> list[int]:
        """The authors' ``generate_text`` for one sequence: from ``<|im_start|>``, at most ``max_length``
        passes; the token that ends the loop (``<|im_end|>`` or the one of the last pass) is not kept."""
        out: list[int] = []
        token, cache, position = special.bos, ctx.cache, ctx.position
        for step in range(max_length):
            if step:
                out.append(token)
            x = self.language_model.embed(torch.tensor([token], device=self.device))
            hidden, cache = self.language_model(x, torch.tensor([position], device=self.device), cache, causal=True)
            logits = self.language_model.lm_head(hidden)[0]
            if on_logits is not None:
                on_logits(logits)
            token, position = pick(logits), position + 1
            if token == special.eos:
                break
        return out

    # -- drawing ---------------------------------------------------------------

    def draw(self, contexts: dict[str, Context], height: int, width: int, noise: torch.Tensor,
             settings: FlowSettings, special: SpecialIds) -> torch.Tensor:
        """Latent tokens ([h * w, p * p * C]) of one ``height`` x ``width`` image from ``noise``.

        ``contexts``: ``cond`` (the prompt), ``text`` (text guidance's: without the prompt) and
        ``image`` (image guidance's); the timesteps are the authors' shifted linear schedule.
        """
        h, w = height // self.latent_downsample, width // self.latent_downsample
        n = h * w
        step = _Step(
            ids=torch.tensor([special.start_of_image, special.end_of_image], device=self.device),
            gen=torch.cat([torch.tensor([False]), torch.ones(n, dtype=torch.bool), torch.tensor([False])]).to(self.device),
            pos_embed=self.latent_pos_embed(grid_positions(h, w, AUTHORS["max_latent_size"]).to(self.device)),
            contexts=contexts,
        )
        x = noise.to(self.device, torch.float32)
        t = torch.linspace(1, 0, settings.steps, device=self.device)
        t = settings.timestep_shift * t / (1 + (settings.timestep_shift - 1) * t)
        for i in range(settings.steps - 1):
            guided = settings.interval[0] < t[i] <= settings.interval[1]
            v = self._velocity(x, t[i], step, settings, guided)
            x = x - v.to(x.dtype) * (t[i] - t[i + 1])  # the velocity points from data to noise
        return x

    def _flow_pass(self, x_t: torch.Tensor, t: torch.Tensor, step: _Step, ctx: Context) -> torch.Tensor:
        markers = self.language_model.embed(step.ids)
        latents = self.vae2llm(x_t.to(markers.dtype)) + self.time_embedder(t.repeat(x_t.shape[0])) + step.pos_embed
        seq = torch.cat([markers[:1], latents.to(markers.dtype), markers[1:]])
        positions = torch.full((seq.shape[0],), ctx.position, device=self.device)
        hidden, _ = self.language_model(seq, positions, ctx.cache, gen=step.gen, causal=False)
        return self.llm2vae(hidden[1:-1])

    def _velocity(self, x_t: torch.Tensor, t: torch.Tensor, step: _Step, s: FlowSettings, guided: bool) -> torch.Tensor:
        """``_forward_flow``: the conditional velocity, guided when ``guided`` and text scale > 1."""
        v = self._flow_pass(x_t, t, step, step.contexts["cond"])
        text_scale, image_scale = (s.text_scale, s.image_scale) if guided else (1.0, 1.0)
        if text_scale <= 1.0:
            return v
        v_text = self._flow_pass(x_t, t, step, step.contexts["text"])
        v_image = self._flow_pass(x_t, t, step, step.contexts["image"]) if image_scale > 1.0 else None
        guided_text = v_text + text_scale * (v - v_text)
        if s.renorm_type == "text_channel":
            scale = (v.norm(dim=-1, keepdim=True) / (guided_text.norm(dim=-1, keepdim=True) + 1e-8))
            guided_text = guided_text * scale.clamp(min=s.renorm_min, max=1.0)
            return guided_text if v_image is None else v_image + image_scale * (guided_text - v_image)
        out = guided_text if v_image is None else v_image + image_scale * (guided_text - v_image)
        if s.renorm_type == "global":  # one norm over the whole image (the authors: batch size 1 only)
            scale = v.norm() / (out.norm() + 1e-8)
        else:  # "channel"
            scale = v.norm(dim=-1, keepdim=True) / (out.norm(dim=-1, keepdim=True) + 1e-8)
        return out * scale.clamp(min=s.renorm_min, max=1.0)

    def unpatchify(self, tokens: torch.Tensor, height: int, width: int) -> torch.Tensor:
        """Latent tokens to a [1, C, H/8, W/8] latent map (the inferencer's ``decode_image``)."""
        h, w, p, c = height // self.latent_downsample, width // self.latent_downsample, self.patch, self.latent_channels
        x = tokens.reshape(1, h, w, p, p, c)
        return torch.einsum("nhwpqc->nchpwq", x).reshape(1, c, h * p, w * p)
