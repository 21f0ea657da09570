"""Show-o at its published size with random weights, for memory and speed checks without a
download (``benchmarks/``, ``scripts/weights_memory.py``).

The sizes are the published files' own: ``showlab/show-o-512x512``'s ``config.json``
(vocab_size 58498, llm_vocab_size 50295, codebook_size 8192, num_vq_tokens 1024),
``microsoft/phi-1_5``'s ``config.json`` (below) and the authors' fixed MAGVIT-v2 geometry
(:data:`.magvit.REAL_GEOMETRY`). Their counts agree with the published weight files: 1.448 B
parameters (5.79 GB of float32) and 95.5 M (382 MB).
"""

from __future__ import annotations

from pathlib import Path

import torch

from .magvit import REAL_GEOMETRY, MagvitV2

#: microsoft/phi-1_5 config.json (transformers format)
PHI_1_5 = dict(vocab_size=51200, hidden_size=2048, intermediate_size=8192, num_hidden_layers=24,
               num_attention_heads=32, partial_rotary_factor=0.5, max_position_embeddings=2048,
               hidden_act="gelu_new", layer_norm_eps=1e-5, rope_theta=10000.0, bos_token_id=50256,
               eos_token_id=50256, tie_word_embeddings=False)
#: showlab/show-o-512x512 config.json
SHOWO_512 = dict(vocab_size=58498, llm_vocab_size=50295, codebook_size=8192, num_vq_tokens=1024, w_clip_vit=False)


def language_model(device: str | torch.device = "meta", dtype: torch.dtype = torch.float32):
    """transformers' Phi as Show-o runs it: Phi-1.5's geometry, Show-o's vocabulary, q/k LayerNorm."""
    from transformers import PhiConfig, PhiForCausalLM

    config = PhiConfig(**{**PHI_1_5, "vocab_size": SHOWO_512["vocab_size"]}, qk_layernorm=True)
    with torch.device(device):  # built in ``dtype`` (no float32 copy first)
        return PhiForCausalLM._from_config(config, dtype=dtype).eval()


def image_tokenizer(device: str | torch.device = "meta") -> MagvitV2:
    with torch.device(device):
        return MagvitV2(REAL_GEOMETRY).eval()


def random_showo(device: str = "cuda", dtype: str = "float32", tokenizer: str | None = None, **settings):
    """A :class:`~.model.ShowoUnified` at the published size with random weights (512 px, 1024
    codes, 50 steps, guidance 5 unless ``settings`` say otherwise).

    ``tokenizer``: Phi-1.5's (hub id or folder); None takes the small tokenizer of the test data
    when this is a source checkout (the layouts and lengths of prompts then differ by a few
    tokens from the real tokenizer's, which does not change the cost)."""
    from .loading import load_vocab
    from .model import TOKENIZER, ShowoUnified

    if tokenizer is None:
        local = Path(__file__).resolve().parents[4] / "tests" / "support" / "data" / "parity" / "showo" / "phi-1_5"
        tokenizer = str(local) if local.is_dir() else TOKENIZER
    model = ShowoUnified.__new__(ShowoUnified)
    # the table's defaults for the settings not given; an unknown setting is an ArgumentError
    model._check(pretrained="random:show-o-512x512", vq_model="random:magvitv2", tokenizer=tokenizer, device=device,
                 dtype=dtype, batch_size=settings.pop("batch_size", 1), **settings)
    model.config = dict(SHOWO_512)
    model.vocab = load_vocab(tokenizer, SHOWO_512["llm_vocab_size"], SHOWO_512["codebook_size"], exact=False)
    torch.manual_seed(0)
    model.lm = language_model(model._device, getattr(torch, model.dtype))
    model.vq = image_tokenizer(model._device)
    model.num_codes = SHOWO_512["num_vq_tokens"]
    model.image_size = 32 * REAL_GEOMETRY.downsample
    model._dtype = getattr(torch, model.dtype)
    return model
