"""A tiny random-weight Janus checkpoint for offline smoke runs and tests.

The folder loads with transformers' real ``JanusForConditionalGeneration`` and
``JanusProcessor``, so ``unified=janus,unified.pretrained=<folder>`` drives the
genuine Janus code paths (understanding with an image, image generation with
classifier-free guidance and VQ decoding) with no download. The tokenizer is the
word-level one of :mod:`.tokenizers` with Janus' special tokens; weights are
seeded. It describes in random words and draws 32x32 noise.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import tokenizers
from .checkpoints import build_atomically, builder_key, cached, init_and_save
from .tokenizers import BOS, EOS, PAD, TEMPLATE_WORDS, UNK, word_level_tokenizer, word_vocab

__all__ = ["JANUS_IMAGE_SIZE", "JANUS_IMAGE_TOKENS", "build_tiny_janus", "janus_build_key", "tiny_janus_path"]

IMAGE_TOKEN, BOI, EOI = "<image_placeholder>", "<begin_of_image>", "<end_of_image>"
USER, ASSISTANT = "<|User|>", "<|Assistant|>"
_SPECIALS = [UNK, BOS, EOS, PAD, IMAGE_TOKEN, BOI, EOI, USER, ASSISTANT]

# Understanding: a 32px image in 8px patches -> 4x4 = 16 image tokens. Generation draws
# the same 16 codes; the VQ decoder upsamples its 4x4 grid twice per extra level.
_VISION_SIZE, _PATCH = 32, 8
JANUS_IMAGE_TOKENS = (_VISION_SIZE // _PATCH) ** 2
_VQ_LEVELS = (1, 1, 1, 1)  # three upsamplings: 4 -> 32 pixels
JANUS_IMAGE_SIZE = (_VISION_SIZE // _PATCH) * 2 ** (len(_VQ_LEVELS) - 1)
_HIDDEN = 32

# Janus-Pro's turn format ("<|User|>: <image_placeholder>\n{text}\n\n<|Assistant|>:"),
# reduced to what describing and drawing need.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}<|User|>: {% else %}<|Assistant|>: {% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}"
    "{% for part in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image_placeholder>\n' }}{% endfor %}"
    "{% for part in message['content'] | selectattr('type', 'equalto', 'text') %}{{ part['text'] }}{% endfor %}"
    "{% endif %}{{ '\n\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|Assistant|>:{% endif %}"
)


def janus_build_key() -> str:
    """The builder key: :func:`.checkpoints.builder_key` over the tokenizer's sources and this module."""
    return builder_key(*tokenizers.SOURCES, Path(__file__))


def _write_checkpoint(folder: Path, seed: int) -> None:
    from transformers import (
        JanusConfig,
        JanusForConditionalGeneration,
        JanusImageProcessor,
        JanusProcessor,
    )

    vocab = word_vocab(_SPECIALS)
    tokenizer = word_level_tokenizer(
        vocab,
        _SPECIALS,
        eos=EOS,
        pad=PAD,
        bos=BOS,
        # JanusProcessor reads these three tokenizer attributes.
        extra_special_tokens={"image_token": IMAGE_TOKEN, "boi_token": BOI, "eoi_token": EOI},
        chat_template=CHAT_TEMPLATE,
    )
    banned_ids = [vocab[t] for t in _SPECIALS + TEMPLATE_WORDS]
    processor = JanusProcessor(
        # Janus-Pro normalises to [-1, 1] (mean = std = 0.5), the range its VQ decoder emits.
        image_processor=JanusImageProcessor(
            size={"height": _VISION_SIZE, "width": _VISION_SIZE},
            image_mean=[0.5, 0.5, 0.5],
            image_std=[0.5, 0.5, 0.5],
        ),
        tokenizer=tokenizer,
        chat_template=CHAT_TEMPLATE,
        num_image_tokens=JANUS_IMAGE_TOKENS,
    )
    config = JanusConfig(
        text_config={
            "model_type": "llama",
            "vocab_size": len(vocab),
            "hidden_size": _HIDDEN,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "max_position_embeddings": 512,
            "bos_token_id": vocab[BOS],
            "eos_token_id": vocab[EOS],
            "pad_token_id": vocab[PAD],
            "tie_word_embeddings": False,
        },
        vision_config={
            "hidden_size": _HIDDEN,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "mlp_ratio": 2,
            "image_size": _VISION_SIZE,
            "patch_size": _PATCH,
            "num_image_tokens": JANUS_IMAGE_TOKENS,
            "projection_dim": _HIDDEN,
            "depth": 2,
        },
        vq_config={
            "embed_dim": 8,
            "num_embeddings": 64,
            "latent_channels": 8,
            "base_channels": 32,  # GroupNorm has 32 groups: no fewer channels
            "channel_multiplier": list(_VQ_LEVELS),
            "num_res_blocks": 1,
            "projection_dim": _HIDDEN,
            "image_token_embed_dim": _HIDDEN,  # the language model's width
        },
        image_token_id=vocab[IMAGE_TOKEN],
        tie_word_embeddings=False,
    )
    ids = {"bos_token_id": vocab[BOS], "eos_token_id": vocab[EOS], "pad_token_id": vocab[PAD]}
    # Image mode reads the begin-of-image id from here, as in the real checkpoints. No text
    # safeguards: image mode would apply them to codebook logits.
    generation = {"generation_kwargs": {"boi_token_id": vocab[BOI]}}
    init_and_save(folder, JanusForConditionalGeneration, config, processor, seed, banned_ids, generation, **ids)


def build_tiny_janus(path: str | os.PathLike, seed: int = 0) -> Path:
    """Build the tiny random Janus checkpoint into ``path`` atomically; return ``path``.

    Args:
        path: destination folder (parent created if missing); written into a hidden
            sibling and moved into place (:func:`.checkpoints.build_atomically`).
        seed: torch seed for the random weights; same seed, same checkpoint.
    """
    dest = Path(path).expanduser().absolute()
    return build_atomically(dest, seed, "janus", _write_checkpoint, janus_build_key())


def tiny_janus_path(cache_dir: str | os.PathLike | None = None, seed: int = 0) -> Path:
    """Return a cached tiny Janus checkpoint folder, building it on first use.

    Args:
        cache_dir: cache root (default ``$LMMS_GENBENCH_CACHE``, else
            ``~/.cache/lmms_genbench``); the folder is
            ``<root>/smoke/tiny-janus-s{seed}-<build key>``, so a changed builder
            never reuses chains drawn by an older network.
        seed: torch seed for the random weights.

    Safe to call from several processes at once.
    """
    key = janus_build_key()
    return cached(cache_dir, f"tiny-janus-s{seed}-{key[:8]}", seed, "janus", key,
                  lambda dest: build_tiny_janus(dest, seed=seed))
