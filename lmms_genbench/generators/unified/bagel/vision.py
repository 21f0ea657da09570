"""BAGEL's two image paths into the language model, and their preprocessing.

Understanding: a SigLIP vision transformer in NaViT form (patches at native aspect ratio, a
linear patch embedding, learned position embeddings indexed on a 70 x 70 grid), transformers'
``SiglipEncoderLayer`` for its layers, then an MLP connector and a fixed 2-D sin-cos position
table into the LM's width. Generation: FLUX latents in 2 x 2 patches, a linear map, a sinusoidal
timestep embedding and a 64 x 64 sin-cos table. Keys are the published ones
(``vit_model.vision_model.*``, ``connector.*``, ``vit_pos_embed.pos_embed``, ``time_embedder.*``,
``vae2llm``, ``llm2vae``, ``latent_pos_embed.pos_embed``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn
from transformers.activations import ACT2FN
from transformers.models.siglip.modeling_siglip import SiglipEncoderLayer

__all__ = ["Connector", "NaViT", "SinCosTable", "TimestepEmbedder", "grid_positions", "patchify", "resize_for",
           "to_rgb", "to_tensor"]


class _Embeddings(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        patch = config.patch_size
        self.patch_embedding = nn.Linear(config.num_channels * patch * patch, config.hidden_size)
        self.position_embedding = nn.Embedding((config.image_size // patch) ** 2, config.hidden_size)


class _Encoder(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        self.layers = nn.ModuleList(SiglipEncoderLayer(config) for _ in range(config.num_hidden_layers))


class _VisionModel(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        self.embeddings = _Embeddings(config)
        self.encoder = _Encoder(config)
        self.post_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)


class NaViT(nn.Module):
    """``vit_model``: images' patches ([n, 3 * p * p]) and grid positions to features."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        config._attn_implementation = "sdpa"
        self.vision_model = _VisionModel(config)

    def forward(self, patches: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.forward_many([patches], [positions])[0]

    def forward_many(self, patches: list[torch.Tensor], positions: list[torch.Tensor]) -> list[torch.Tensor]:
        """Several images, each with full attention over its own patches only: one pass per patch
        count (images of one size go together, unpadded and unmasked: the attention a padding mask
        would need runs the unfused path, slower than a pass per size)."""
        m = self.vision_model
        out: list[Any] = [None] * len(patches)
        for n in dict.fromkeys(p.shape[0] for p in patches):
            rows = [i for i, p in enumerate(patches) if p.shape[0] == n]
            x = m.embeddings.patch_embedding(torch.stack([patches[i] for i in rows]))
            x = x + m.embeddings.position_embedding(torch.stack([positions[i] for i in rows]))
            for layer in m.encoder.layers:
                y = layer(x, None)
                x = y[0] if isinstance(y, tuple) else y
            for i, features in zip(rows, m.post_layernorm(x)):
                out[i] = features
        return out


class Connector(nn.Module):
    """``connector``: two linear layers with the authors' ``gelu_pytorch_tanh`` between them."""

    def __init__(self, in_dim: int, out_dim: int, act: str) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(in_dim, out_dim), nn.Linear(out_dim, out_dim)
        self.act = ACT2FN[act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class SinCosTable(nn.Module):
    """A fixed 2-D sin-cos position table (DiT/MAE's), stored in the checkpoint as ``pos_embed``."""

    def __init__(self, side: int, dim: int) -> None:
        super().__init__()
        self.pos_embed = nn.Parameter(torch.from_numpy(_sincos_2d(dim, side)).float(), requires_grad=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.pos_embed[positions]


def _sincos_2d(dim: int, side: int) -> np.ndarray:
    def one_axis(d: int, pos: np.ndarray) -> np.ndarray:
        omega = 1.0 / 10000 ** (np.arange(d // 2, dtype=np.float64) / (d / 2.0))
        out = np.einsum("m,d->md", pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    w, h = np.meshgrid(np.arange(side, dtype=np.float32), np.arange(side, dtype=np.float32))
    return np.concatenate([one_axis(dim // 2, w), one_axis(dim // 2, h)], axis=1)


class TimestepEmbedder(nn.Module):
    """``time_embedder``: DiT's sinusoidal timestep features (256) through an MLP."""

    def __init__(self, hidden: int, features: int = 256) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(features, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.features = features

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.features // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half).to(t.device)
        args = t[:, None].float() * freqs[None]
        return self.mlp(torch.cat([torch.cos(args), torch.sin(args)], dim=-1).to(self.mlp[0].weight.dtype))


def resize_for(image: Image.Image, max_size: int, min_size: int, stride: int,
               max_pixels: int = 14 * 14 * 9 * 1024) -> Image.Image:
    """The authors' ``MaxLongEdgeMinShortEdgeResize`` (bicubic): long edge at most ``max_size``,
    short edge at least ``min_size``, both multiples of ``stride``, at most ``max_pixels``."""
    def divisible(v: float) -> int:
        return max(stride, int(round(v / stride) * stride))

    def scaled(w: int, h: int, s: float) -> tuple[int, int]:
        return divisible(round(w * s)), divisible(round(h * s))

    width, height = image.size
    scale = max(min(max_size / max(width, height), 1.0), min_size / min(width, height))
    w, h = scaled(width, height, scale)
    if w * h > max_pixels:
        w, h = scaled(w, h, max_pixels / (w * h))
    if max(w, h) > max_size:
        w, h = scaled(w, h, max_size / max(w, h))
    return image.resize((w, h), Image.BICUBIC)


def to_rgb(image: Image.Image) -> Image.Image:
    """The authors' ``pil_img2rgb``: transparency composited on white, anything else converted."""
    if image.mode == "RGBA" or image.info.get("transparency") is not None:
        image = image.convert("RGBA")
        white = Image.new("RGB", image.size, (255, 255, 255))
        white.paste(image, mask=image.split()[3])
        return white
    return image.convert("RGB")


def to_tensor(image: Image.Image) -> torch.Tensor:
    """[3, H, W] in [-1, 1]: ToTensor then Normalize(0.5, 0.5), as the authors' ImageTransform."""
    array = torch.from_numpy(np.asarray(image.convert("RGB"), dtype=np.uint8).copy())
    return (array.permute(2, 0, 1).float() / 255.0 - 0.5) / 0.5


def patchify(image: torch.Tensor, patch: int) -> torch.Tensor:
    """[C, H, W] to [(H/p)*(W/p), p*p*C], row-major patches, each (p, p, C) flattened."""
    c, h, w = image.shape
    x = image.reshape(c, h // patch, patch, w // patch, patch)
    return torch.einsum("chpwq->hwpqc", x).reshape(-1, patch * patch * c)


def grid_positions(rows: int, cols: int, side: int) -> torch.Tensor:
    """Flattened positions of a rows x cols grid inside a side x side table (no interpolation:
    BagelConfig's ``interpolate_pos`` is False)."""
    return (torch.arange(rows)[:, None] * side + torch.arange(cols)).flatten()
