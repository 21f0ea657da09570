"""VILA-U at its published size with random weights, for memory and speed checks on a GPU.

The configuration of ``mit-han-lab/vila-u-7b-256`` as far as public sources state it: the LLM is
LLaMA-2-7B (paper, section 4.1) with the four image/video start/end tokens added; the tower is
SigLIP-large-patch16-256 (the config class's default ``pretrained_model``; 256 px, 16x16 patches)
with residual depth 4 and a 16384-code codebook (paper, section 4.1); the projector is
``mlp2x_gelu``. The decoder and depth-transformer sizes are not stated outside the checkpoint's
``vision_tower/config.json``: the decoder below is RQ-VAE's 256 px decoder (kakaobrain/rq-vae-transformer,
``ch`` 128, ``ch_mult`` [1, 1, 2, 2, 4], two res blocks, attention at 16 px) and the depth
transformer takes the authors' ``AttentionBlockConfig``/``AttentionStackConfig`` defaults
(width 2560, 40 heads, 6 layers). Those two parts' sizes are derived from the authors' code, not
read from the checkpoint; the authors' classes at this configuration give exactly these parts' keys
and shapes (tests/support/data/parity/vila_u/real_state_dict_shapes.json).
"""

from __future__ import annotations

import copy
from typing import Any

LLM = {"vocab_size": 32004, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
       "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096,
       "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
RQVAESIGLIP = {"embed_dim": 1024, "n_embed": 16384, "latent_shape": [16, 16, 1024], "code_shape": [16, 16, 4],
               "shared_codebook": True, "decoder_latent_shape": None,
               "pretrained_model": "google/siglip-large-patch16-256",
               "ddconfig": {"ch": 128, "ch_mult": [1, 1, 2, 2, 4], "num_res_blocks": 2, "attn_resolutions": [16],
                            "resolution": 256, "z_channels": 256, "in_channels": 3, "out_ch": 3, "dropout": 0.0}}
RQTRANSFORMER = {"block_size": [16, 16, 4], "input_embed_dim_1": 1024, "input_embed_dim_2": 4096,
                 "embed_dim": 2560, "vocab_size": 16384, "head": {"n_layer": 6, "block": {"n_head": 40}}}
PROJECTOR = "mlp2x_gelu"


def parts(device: str = "meta", dtype: Any = None) -> dict[str, Any]:
    """The four networks at the published size, randomly initialised on ``device`` (``meta``: no
    memory, for counting)."""
    import torch
    import transformers

    from .checkpoint import Projector, siglip_vision_config
    from .depth import DepthTransformer
    from .tower import RQVAESiglip

    previous = torch.get_default_dtype()
    if dtype is not None:  # built in ``dtype`` from the start: 7B in float32 would not fit a 24 GB card
        torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            llm = transformers.LlamaForCausalLM(transformers.LlamaConfig(**LLM))
            vision = siglip_vision_config(None, RQVAESIGLIP["pretrained_model"])  # a known id: no folder read
            built = {"llm": llm, "tower": RQVAESiglip(copy.deepcopy(RQVAESIGLIP), vision),
                     "depth": DepthTransformer(copy.deepcopy(RQTRANSFORMER)),
                     "projector": Projector(PROJECTOR, 1024, 4096)}
    finally:
        torch.set_default_dtype(previous)
    return {k: v if dtype is None else v.to(dtype) for k, v in built.items()}


def random_model(tokenizer_folder: str, device: str = "cuda", dtype: str = "bfloat16"):
    """A :class:`~.model.VilaUUnified` at the published size with random weights on ``device``; the
    tokenizer comes from ``tokenizer_folder`` (any LLaMA ``llm/`` folder with ``<im_start>``, e.g. the
    parity checkpoint's: only token ids matter here)."""
    import torch

    from .model import VilaUUnified
    from .tokenizer import LlamaSlowTokenizer

    model = VilaUUnified.__new__(VilaUUnified)
    model._check(pretrained="random:vila-u-7b-256", device=device, dtype=dtype, batch_size=1, temperature=0.0,
                 max_new_tokens=64)
    built = parts(str(model._device), getattr(torch, model.dtype))
    model.tokenizer = LlamaSlowTokenizer(tokenizer_folder)
    model.llm, model.tower, model.depth, model.projector = (
        built["llm"].eval(), built["tower"].eval(), built["depth"].eval(), built["projector"].eval())
    model.aspect, model.vision_size, model.grid = "resize", 256, 16
    model.image_tokens, model.image_size = 256, 256
    model.image_start = model.tokenizer.piece_id("<im_start>")
    model.eos_ids, model.pad_id = [model.tokenizer.eos_token_id], 0
    return model
