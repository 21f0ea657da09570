"""A tiny random-weight Stable Diffusion pipeline for smoke tests.

Built entirely from configs, like ``get_dummy_components`` in diffusers' own
tests: no download, about 160k parameters, a batch of 8 at 64x64 in a
fraction of a second on a CPU. The pictures are noise-like but deterministic,
which is all a pipeline test needs: same prompt and seed give the same image,
a different seed gives a different one. :class:`lmms_genbench.generators.smoke.SmokeGenerator`
serves it as the ``smoke`` generator backend.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from ..core.deps import require
from .vision import seeded
from .vocab import byte_level_vocab

__all__ = ["MAX_TOKENS", "MERGES", "build_tiny_pipeline", "build_tiny_tokenizer"]

# UNet and VAE widths: small enough for a CPU batch in a fraction of a second.
_CHANNELS = (8, 16)
_GROUPS = 4  # GroupNorm groups; must divide every width
# Width of the text encoder's embeddings, and so of the UNet's cross-attention.
_HIDDEN = 32
# The text encoder's position table; the tokenizer pads and truncates to it.
# Far above CLIP's 77: the tiny vocabulary is nearly byte-level, so 77 tokens
# would hold little more than GenCeption's fixed prompt prefix and every
# drawing would ignore its description.
MAX_TOKENS = 512
_VOCAB_SIZE = 1000  # room for the 514 base tokens plus the merges below

# A handful of BPE merges so common words become single tokens, as in CLIP.
# Each merge only uses tokens that exist by the time it applies.
MERGES = (
    ("t", "h"),
    ("th", "e</w>"),
    ("a", "n"),
    ("an", "d</w>"),
    ("o", "f</w>"),
    ("i", "n"),
    ("in", "g</w>"),
    ("e", "r</w>"),
    ("o", "n</w>"),
    ("r", "e"),
    ("e", "d</w>"),
    ("p", "h"),
    ("ph", "o"),
    ("pho", "t"),
    ("phot", "o</w>"),
    ("c", "a"),
    ("ca", "t</w>"),
    ("d", "o"),
    ("do", "g</w>"),
    ("re", "d</w>"),
    ("b", "l"),
    ("bl", "u"),
    ("blu", "e</w>"),
    ("o", "n"),
    ("a", "r"),
)


def build_tiny_pipeline(seed: int = 0) -> Any:
    """A CPU ``StableDiffusionPipeline`` with tiny random weights from ``seed``.

    The torch RNG is seeded afresh for each component, as diffusers' tests
    do, so a component's weights do not depend on the others' sizes; the
    caller's RNG state is left untouched.
    """
    require("torch", "the smoke generator")
    diffusers = require("diffusers", "the smoke generator")
    transformers = require("transformers", "the smoke generator")

    tokenizer = build_tiny_tokenizer()
    unet = seeded(
        seed,
        lambda: diffusers.UNet2DConditionModel(
            block_out_channels=_CHANNELS,
            layers_per_block=1,
            sample_size=32,
            in_channels=4,
            out_channels=4,
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
            cross_attention_dim=_HIDDEN,
            norm_num_groups=_GROUPS,
        ),
    )
    vae = seeded(
        seed,
        lambda: diffusers.AutoencoderKL(
            block_out_channels=list(_CHANNELS),
            in_channels=3,
            out_channels=3,
            down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
            up_block_types=["UpDecoderBlock2D", "UpDecoderBlock2D"],
            latent_channels=4,
            norm_num_groups=_GROUPS,
        ),
    )
    text_config = transformers.CLIPTextConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        hidden_size=_HIDDEN,
        intermediate_size=37,
        layer_norm_eps=1e-05,
        num_attention_heads=4,
        num_hidden_layers=2,
        max_position_embeddings=MAX_TOKENS,
        vocab_size=_VOCAB_SIZE,
    )
    text_encoder = seeded(seed, lambda: transformers.CLIPTextModel(text_config))
    scheduler = diffusers.DDIMScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,  # the value the pipeline expects; 0 triggers a warning
    )
    pipeline = diffusers.StableDiffusionPipeline(
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        unet=unet.eval(),
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    return pipeline


def build_tiny_tokenizer() -> Any:
    """A byte-level BPE ``CLIPTokenizer`` built from in-code vocab and merges.

    No tokenizer can be downloaded, so its files are written to a temporary
    folder and loaded from there (a path, so no hub lookup), then deleted.
    """
    transformers = require("transformers", "the smoke generator")
    vocab = byte_level_vocab(MERGES, byte_order=True)
    assert len(vocab) <= _VOCAB_SIZE
    with tempfile.TemporaryDirectory(prefix="lmms_genbench_tok_") as folder:
        with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as fh:
            json.dump(vocab, fh, ensure_ascii=False)
        with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as fh:
            fh.write("#version: 0.2\n")
            fh.writelines(f"{a} {b}\n" for a, b in MERGES)
        return transformers.CLIPTokenizer.from_pretrained(
            folder, model_max_length=MAX_TOKENS, local_files_only=True
        )
