"""MAGVIT-v2, Show-o's image tokenizer (``showlab/magvitv2``): pixels <-> lookup-free codes.

Our own modules, written to the authors' state-dict keys (``encoder.down.<i>.block.<j>...``,
``decoder.up.<i>...``, ``quantize.embedding``) so their published ``pytorch_model.safetensors``
loads as it is. The encoder is a VQGAN-style stack of residual blocks with a stride-2 conv per
level, a middle block with one self-attention, and a 1x1 ``quant_conv``; the lookup-free
quantiser (LFQ) reads one bit per latent channel (``z > 0``), so a 13-channel latent is a code in
[0, 8192); the decoder mirrors the encoder with nearest-neighbour upsampling.

The authors' ``MAGVITv2`` takes no arguments (its geometry is fixed in code, and the published
``config.json`` names only the class), so :func:`geometry_of` reads the geometry from the weights:
the same code loads the real tokenizer and any smaller one written in its layout.

Requires ``torch``; import this module only where torch is wanted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ..conv_blocks import AttentionWeights, ResnetBlock, group_norm

#: the file and config names of the authors' ``ModelMixin.save_pretrained`` (safetensors)
WEIGHTS_FILE = "pytorch_model.safetensors"
CONFIG_FILE = "config.json"


@dataclass(frozen=True)
class MagvitGeometry:
    """Channels per level (``ch * mult``) and residual blocks per level of each half."""

    ch: int
    encoder_mult: tuple[int, ...]
    encoder_blocks: tuple[int, ...]
    decoder_mult: tuple[int, ...]
    decoder_blocks: tuple[int, ...]
    z_channels: int
    #: the decoder's base width (``decoder_mult`` counts in it); None: ``ch``, as the published
    #: tokenizer. The authors' VQGANEncoder and VQGANDecoder each take their own ``ch``.
    decoder_ch: int | None = None

    @property
    def decoder_width(self) -> int:
        return self.ch if self.decoder_ch is None else self.decoder_ch

    @property
    def downsample(self) -> int:
        """Pixels per code along one side (16 for the published tokenizer)."""
        return 2 ** (len(self.decoder_mult) - 1)


#: the published tokenizer: models/modeling_magvitv2.py's VQGANEncoder/VQGANDecoder defaults
REAL_GEOMETRY = MagvitGeometry(128, (1, 2, 2, 4, 4), (4, 3, 4, 3, 4), (1, 1, 2, 2, 4), (4, 4, 3, 4, 3), 13)


def geometry_of(state: dict[str, torch.Tensor]) -> MagvitGeometry:
    """The geometry a state dict in the authors' key layout was written at."""

    def need(key: str) -> torch.Tensor:
        if key not in state:
            raise KeyError(f"the MAGVIT-v2 weights have no {key!r}")
        return state[key]

    def levels(prefix: str) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        found: dict[int, dict[int, int]] = {}
        for key, value in state.items():
            m = re.fullmatch(rf"{prefix}\.(\d+)\.block\.(\d+)\.conv1\.weight", key)
            if m:
                found.setdefault(int(m[1]), {})[int(m[2])] = int(value.shape[0])
            if re.fullmatch(rf"{prefix}\.\d+\.attn\.\d+\..*", key):
                raise ValueError(f"attention inside a level ({key}) is not part of Show-o's MAGVIT-v2")
        if not found or sorted(found) != list(range(len(found))):
            raise ValueError(f"no {prefix}.<level>.block.<n> weights: not a MAGVIT-v2 state dict")
        widths = [found[i][0] for i in sorted(found)]
        # the encoder's base width is its conv_in's; the decoder's own (it may differ: the authors'
        # classes take one ``ch`` each) is the largest that divides every level's width
        base = int(need("encoder.conv_in.weight").shape[0]) if prefix == "encoder.down" else math.gcd(*widths)
        return tuple(w // base for w in widths), tuple(len(found[i]) for i in sorted(found)), base

    enc_mult, enc_blocks, ch = levels("encoder.down")
    dec_mult, dec_blocks, dec_ch = levels("decoder.up")
    return MagvitGeometry(ch, enc_mult, enc_blocks, dec_mult, dec_blocks,
                          int(need("encoder.conv_out.weight").shape[0]), None if dec_ch == ch else dec_ch)


class _SelfAttention(AttentionWeights):
    """One-head attention over the latent positions (1x1 convs as projections)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        y = self.norm(x)
        q, k, v = (m(y).reshape(b, 1, c, h * w).transpose(-1, -2) for m in (self.q, self.k, self.v))
        out = F.scaled_dot_product_attention(q, k, v)  # scale c ** -0.5, as the authors'
        return x + self.proj_out(out.transpose(-1, -2).reshape(b, c, h, w))


class _Middle(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.block_1, self.attn_1, self.block_2 = (ResnetBlock(channels, channels), _SelfAttention(channels),
                                                   ResnetBlock(channels, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block_2(self.attn_1(self.block_1(x)))


class _Resample(nn.Module):
    """``conv``: a stride-2 conv after padding right and bottom (down) or a conv after a
    nearest x2 (up)."""

    def __init__(self, channels: int, down: bool) -> None:
        super().__init__()
        self.down = down
        self.conv = nn.Conv2d(channels, channels, 3, stride=2 if down else 1, padding=0 if down else 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.down:
            return self.conv(F.pad(x, (0, 1, 0, 1)))
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


def _level(blocks: list[nn.Module], resample: nn.Module | None) -> nn.Module:
    level = nn.Module()
    level.block = nn.ModuleList(blocks)
    if resample is not None:
        setattr(level, "downsample" if resample.down else "upsample", resample)
    return level


class MagvitEncoder(nn.Module):
    def __init__(self, g: MagvitGeometry) -> None:
        super().__init__()
        self.conv_in = nn.Conv2d(3, g.ch, 3, padding=1)
        self.down = nn.ModuleList()
        width = g.ch
        for i, (mult, n) in enumerate(zip(g.encoder_mult, g.encoder_blocks)):
            blocks = [ResnetBlock(width if j == 0 else g.ch * mult, g.ch * mult) for j in range(n)]
            width = g.ch * mult
            last = i == len(g.encoder_mult) - 1
            self.down.append(_level(blocks, None if last else _Resample(width, down=True)))
        self.mid = _Middle(width)
        self.norm_out = group_norm(width)
        self.conv_out = nn.Conv2d(width, g.z_channels, 3, padding=1)
        self.quant_conv = nn.Conv2d(g.z_channels, g.z_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(x)
        for level in self.down:
            for block in level.block:
                h = block(h)
            if hasattr(level, "downsample"):
                h = level.downsample(h)
        h = self.conv_out(F.silu(self.norm_out(self.mid(h))))
        return self.quant_conv(h)


class MagvitDecoder(nn.Module):
    def __init__(self, g: MagvitGeometry) -> None:
        super().__init__()
        width = g.decoder_width * g.decoder_mult[-1]
        self.post_quant_conv = nn.Conv2d(g.z_channels, g.z_channels, 1)
        self.conv_in = nn.Conv2d(g.z_channels, width, 3, padding=1)
        self.mid = _Middle(width)
        levels: list[nn.Module] = []
        for i in reversed(range(len(g.decoder_mult))):  # built top-down, stored bottom-up as the authors'
            out = g.decoder_width * g.decoder_mult[i]
            blocks = [ResnetBlock(width if j == 0 else out, out) for j in range(g.decoder_blocks[i])]
            width = out
            levels.insert(0, _level(blocks, _Resample(width, down=False) if i != 0 else None))
        self.up = nn.ModuleList(levels)
        self.norm_out = group_norm(width)
        self.conv_out = nn.Conv2d(width, 3, 3, padding=1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.mid(self.conv_in(self.post_quant_conv(z)))
        for level in reversed(self.up):
            for block in level.block:
                h = block(h)
            if hasattr(level, "upsample"):
                h = level.upsample(h)
        return self.conv_out(F.silu(self.norm_out(h)))


class LookupFreeQuantizer(nn.Module):
    """One bit per channel, most significant first; ``embedding`` holds each code's +-1 vector
    (a buffer in the authors' state dict, rebuilt here the same way)."""

    def __init__(self, bits: int) -> None:
        super().__init__()
        codes = torch.arange(2**bits)
        shifts = torch.arange(bits - 1, -1, -1)
        self.register_buffer("embedding", ((codes[:, None] >> shifts) & 1).float() * 2 - 1)
        self.register_buffer("power_vals", 2**shifts)

    def codes(self, z: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) latents -> (B, H*W) codes, row-major."""
        bits = (z > 0).long()
        return (bits * self.power_vals.view(1, -1, 1, 1)).sum(1).reshape(z.shape[0], -1)

    def latents(self, codes: torch.Tensor, side: int) -> torch.Tensor:
        """(B, side*side) codes -> (B, C, side, side) +-1 latents."""
        z = self.embedding[codes.reshape(-1)].view(codes.shape[0], side, side, -1)
        return z.permute(0, 3, 1, 2).contiguous()


class MagvitV2(nn.Module):
    """Encoder, decoder and quantiser under the authors' attribute names."""

    def __init__(self, geometry: MagvitGeometry) -> None:
        super().__init__()
        self.geometry = geometry
        self.encoder = MagvitEncoder(geometry)
        self.decoder = MagvitDecoder(geometry)
        self.quantize = LookupFreeQuantizer(geometry.z_channels)

    @property
    def codebook_size(self) -> int:
        return int(self.quantize.embedding.shape[0])

    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) pixels in [-1, 1] -> (B, H/16 * W/16) codes."""
        return self.quantize.codes(self.encoder(pixels))

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """(B, N) codes (N a square) -> (B, 3, H, W) pixels, about [-1, 1]."""
        side = math.isqrt(codes.shape[-1])
        if side * side != codes.shape[-1]:
            raise ValueError(f"{codes.shape[-1]} image codes do not make a square grid")
        z = self.quantize.latents(codes, side).to(self.decoder.conv_in.weight.dtype)
        return self.decoder(z)


def build_magvit(state: dict[str, torch.Tensor]) -> MagvitV2:
    """A :class:`MagvitV2` holding ``state`` (the authors' keys), at the geometry it was written at."""
    with torch.device("meta"):
        model = MagvitV2(geometry_of(state))
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()
