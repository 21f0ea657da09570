"""VILA-U's unified vision tower: a SigLIP encoder quantised by residual quantisation (RQ-VAE).

Read from the authors' ``vila_u/model/multimodal_encoder/rqvaesigliptransformer/rqvaesiglip``
(``modeling_rqvaesiglip.py``, ``quantizations.py``, ``modules.py``) and rebuilt here:

* encoding runs SigLIP's patch embedding and all but its last encoder layer (transformers'
  ``SiglipVisionEmbeddings`` / ``SiglipEncoderLayer``), no post-layernorm, then quantises each
  patch feature with ``depth`` codebooks, each coding the residual the previous ones left;
* the features handed to the projector are ``x + (q - x)`` (the straight-through sum, kept as
  written so float32 results agree), the codes are ``(B, h, w, depth)``;
* decoding sums the code embeddings over depth, applies ``post_quant_conv`` and a taming-style
  decoder (GroupNorm(32), SiLU, nearest 2x upsampling). The authors' upsampler casts to
  bfloat16, so their decoder runs only in bfloat16; ours runs in the model's dtype (the same
  values in bfloat16).

Module names follow the checkpoint's state-dict keys (``rqvaesiglip.siglip_model.vision_model...``,
``rqvaesiglip.quantizer.codebooks.N.weight``, ``rqvaesiglip.decoder...``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..conv_blocks import AttentionWeights, ResnetBlock, group_norm

# The SigLIP checkpoints VILA-U's configs name by hub id (``pretrained_model``); their vision
# geometry as the config.json of each hub repository states it, so loading needs no download.
KNOWN_SIGLIP = {
    "google/siglip-large-patch16-256": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                                        "num_attention_heads": 16, "image_size": 256, "patch_size": 16},
    "google/siglip-so400m-patch14-384": {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                                         "num_attention_heads": 16, "image_size": 384, "patch_size": 14},
}


class SiglipTrunk(nn.Module):
    """SigLIP's vision embeddings and its first ``num_hidden_layers - 1`` encoder layers."""

    def __init__(self, vision_config) -> None:
        super().__init__()
        from transformers.models.siglip.modeling_siglip import SiglipEncoderLayer, SiglipVisionEmbeddings

        self.vision_model = nn.Module()
        self.vision_model.embeddings = SiglipVisionEmbeddings(vision_config)
        self.vision_model.encoder = nn.Module()
        # the authors stop after the second-to-last layer; the last one is never run
        self.vision_model.encoder.layers = nn.ModuleList(
            SiglipEncoderLayer(vision_config) for _ in range(vision_config.num_hidden_layers - 1))

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        hidden = self.vision_model.embeddings(pixels)
        for layer in self.vision_model.encoder.layers:
            out = layer(hidden, None)
            hidden = out[0] if isinstance(out, tuple) else out
        return hidden


class ResidualQuantizer(nn.Module):
    """Residual quantisation over ``depth`` codebooks of ``n_embed`` codes (plus the padding row
    the authors' ``VQEmbedding`` keeps at index ``n_embed``)."""

    def __init__(self, n_embed: int, dim: int, depth: int, shared: bool) -> None:
        super().__init__()
        self.depth, self.shared = depth, shared
        self.codebooks = nn.ModuleList(nn.Embedding(n_embed + 1, dim) for _ in range(1 if shared else depth))

    def book(self, level: int) -> nn.Embedding:
        return self.codebooks[0 if self.shared else level]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(features, codes)`` of ``x`` (B, h, w, dim): the straight-through quantised features and
        the codes (B, h, w, depth)."""
        residual = x.detach().clone()
        total = torch.zeros_like(x)
        codes = []
        for level in range(self.depth):
            table = self.book(level).weight[:-1]
            flat = residual.reshape(-1, residual.shape[-1])
            # squared distances as the authors compute them: |x|^2 + |c|^2 - 2 x.c (one addmm)
            distances = torch.addmm(flat.pow(2.0).sum(1, keepdim=True) + table.t().pow(2.0).sum(0, keepdim=True),
                                    flat, table.t(), alpha=-2.0)
            code = distances.argmin(dim=-1).reshape(residual.shape[:-1])
            quant = self.book(level)(code)
            residual.sub_(quant)
            total.add_(quant)
            codes.append(code.unsqueeze(-1))
        return x + (total - x).detach(), torch.cat(codes, dim=-1)

    def embed(self, codes: torch.Tensor) -> torch.Tensor:
        """Per-depth embeddings (..., depth, dim) of codes (..., depth)."""
        return torch.stack([self.book(i)(codes[..., i]) for i in range(codes.shape[-1])], dim=-2)


class AttnBlock(AttentionWeights):
    """The authors' attention arithmetic (bmm, softmax over keys)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        b, c, height, width = h.shape
        q = self.q(h).reshape(b, c, -1).permute(0, 2, 1)
        k = self.k(h).reshape(b, c, -1)
        v = self.v(h).reshape(b, c, -1)
        weights = torch.softmax(torch.bmm(q, k) * (int(c) ** -0.5), dim=2)
        out = torch.bmm(v, weights.permute(0, 2, 1)).reshape(b, c, height, width)
        return x + self.proj_out(out)


class Upsample(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.interpolate(x.float(), scale_factor=2.0, mode="nearest").to(x.dtype))


class Decoder(nn.Module):
    """The pixel decoder of the ``ddconfig`` block (``ch``, ``ch_mult``, ``num_res_blocks``,
    ``attn_resolutions``, ``resolution``, ``z_channels``, ``out_ch``)."""

    def __init__(self, ch: int, out_ch: int, ch_mult, num_res_blocks: int, attn_resolutions, resolution: int,
                 z_channels: int, **_ignored) -> None:
        super().__init__()
        levels = len(ch_mult)
        block_in = ch * ch_mult[-1]
        res = resolution // 2 ** (levels - 1)
        self.conv_in = nn.Conv2d(z_channels, block_in, 3, padding=1)
        self.mid = nn.Module()
        self.mid.block_1, self.mid.attn_1, self.mid.block_2 = \
            ResnetBlock(block_in, block_in), AttnBlock(block_in), ResnetBlock(block_in, block_in)
        ups = []
        for level in reversed(range(levels)):
            up = nn.Module()
            up.block, up.attn = nn.ModuleList(), nn.ModuleList()
            for _ in range(num_res_blocks + 1):
                up.block.append(ResnetBlock(block_in, ch * ch_mult[level]))
                block_in = ch * ch_mult[level]
                if res in attn_resolutions:
                    up.attn.append(AttnBlock(block_in))
            if level != 0:
                up.upsample = Upsample(block_in)
                res *= 2
            ups.insert(0, up)
        self.up = nn.ModuleList(ups)
        self.norm_out = group_norm(block_in)
        self.conv_out = nn.Conv2d(block_in, out_ch, 3, padding=1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.mid.block_2(self.mid.attn_1(self.mid.block_1(self.conv_in(z))))
        for level in reversed(range(len(self.up))):
            up = self.up[level]
            for i, block in enumerate(up.block):
                h = block(h)
                if len(up.attn):
                    h = up.attn[i](h)
            if hasattr(up, "upsample"):
                h = up.upsample(h)
        return self.conv_out(F.silu(self.norm_out(h)))


class RQVAESiglip(nn.Module):
    """``rqvaesiglip``: the SigLIP trunk, the quantiser, ``post_quant_conv`` and the decoder."""

    def __init__(self, config: dict, vision_config) -> None:
        super().__init__()
        latent, code = config["latent_shape"], config["code_shape"]
        if latent[:2] != code[:2]:
            raise ValueError(f"vision_tower: latent_shape {latent} and code_shape {code} differ in space; "
                             "only one code position per patch (as VILA-U's checkpoints) is supported")
        self.siglip_model = SiglipTrunk(vision_config)
        self.quantizer = ResidualQuantizer(int(config["n_embed"]), int(latent[2]), int(code[2]),
                                           bool(config.get("shared_codebook")))
        dd = config["ddconfig"]
        self.post_quant_conv = nn.Conv2d(int(config["embed_dim"]), int(dd["z_channels"]), 1)
        self.decoder = Decoder(**dd)
        self.decoder_latent_shape = config.get("decoder_latent_shape")

    def encode(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(features (B, h*w, dim), codes (B, h*w, depth))`` of normalised pixels."""
        hidden = self.siglip_model(pixels)
        b, length, dim = hidden.shape
        side = int(length ** 0.5)
        features, codes = self.quantizer(hidden.reshape(b, side, side, dim))
        return features.reshape(b, length, dim), codes.reshape(b, length, -1)

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """Pixels in [-1, 1] (B, 3, H, W) of a latent map (B, h, w, dim)."""
        z = latent.permute(0, 3, 1, 2).contiguous()
        if self.decoder_latent_shape is not None:
            z = F.interpolate(z.float(), size=tuple(self.decoder_latent_shape), mode="bilinear").to(latent.dtype)
        return self.decoder(self.post_quant_conv(z))
