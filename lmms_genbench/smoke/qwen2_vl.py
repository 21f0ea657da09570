"""A tiny random-weight Qwen2-VL checkpoint for offline smoke runs and tests.

The folder loads with lmms-eval's ``qwen2_vl`` class (simple only, but with batched
generation, unlike ``llava_hf``'s batch size 1). Built with ``head_dim=32`` it also
loads with vLLM (``vllm``), whose CPU attention takes head sizes 32, 64, 80, ... but
not the default 16. The tokenizer is the word-level one of :mod:`.tokenizers` with
Qwen2-VL's special tokens and chat template; the weights are seeded.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import tokenizers
from .checkpoints import build_atomically, builder_key, cached, init_and_save
from .tokenizers import TEMPLATE_WORDS, UNK, word_level_tokenizer, word_vocab

__all__ = [
    "QWEN2_VL_MAX_PIXELS",
    "QWEN2_VL_MIN_PIXELS",
    "VLLM_HEAD_DIM",
    "build_tiny_qwen2_vl",
    "qwen2_vl_build_key",
    "tiny_qwen2_vl_path",
]

# Qwen2-VL's special tokens (ChatML turns, vision delimiters, grounding markers), so
# prompts tokenize like the real model's. Qwen has no <unk>; WordLevel needs one.
QWEN_EOT, QWEN_IM_START, QWEN_IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
QWEN_VISION_START, QWEN_VISION_END = "<|vision_start|>", "<|vision_end|>"
QWEN_IMAGE_PAD, QWEN_VIDEO_PAD = "<|image_pad|>", "<|video_pad|>"
QWEN_SPECIALS = [
    QWEN_EOT,
    QWEN_IM_START,
    QWEN_IM_END,
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    QWEN_VISION_START,
    QWEN_VISION_END,
    "<|vision_pad|>",
    QWEN_IMAGE_PAD,
    QWEN_VIDEO_PAD,
    UNK,
]

QWEN2_VL_PATCH_SIZE = 14
QWEN2_VL_MERGE_SIZE = 2
_QWEN_TOKEN_PIXELS = (QWEN2_VL_PATCH_SIZE * QWEN2_VL_MERGE_SIZE) ** 2  # one LLM token: 28x28
# Pixel bounds of an image: 4 to 16 LLM tokens (16 to 64 patches). lmms-eval's qwen2_vl
# class overrides the saved processor's bounds with its own min_pixels/max_pixels
# arguments (default 3136/602112, i.e. up to 768 tokens), so pass these to it too.
QWEN2_VL_MIN_PIXELS = 4 * _QWEN_TOKEN_PIXELS
QWEN2_VL_MAX_PIXELS = 16 * _QWEN_TOKEN_PIXELS

# Attention head sizes the tiny Qwen2-VL can be built with, and M-RoPE's split of each
# head's head_dim / 2 rotary frequencies into temporal, height and width sections (the
# real model uses [16, 24, 24] of 64). 16 is the original tiny model; 32 is the
# smallest head size vLLM's CPU attention accepts.
QWEN2_VL_MROPE_SECTIONS = {16: [2, 3, 3], 32: [4, 6, 6]}
#: the head size of the tiny Qwen2-VL that vLLM can serve
VLLM_HEAD_DIM = 32

# Qwen2-VL-Instruct's own template: ChatML turns, a default system turn, and image or
# video parts as <|vision_start|><|image_pad|><|vision_end|> (the processor expands the
# pad to one token per merged patch). Content may be a string or a list of typed parts.
QWEN_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}"
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}"
    "{% endif %}"
    "{% endfor %}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _write_checkpoint(folder: Path, seed: int, head_dim: int = 16) -> None:
    """Build the Qwen2-VL tokenizer, processor and seeded model and save them into ``folder``."""
    from transformers import (
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    vocab = word_vocab(QWEN_SPECIALS)
    tokenizer = word_level_tokenizer(
        vocab,
        QWEN_SPECIALS,
        # As in Qwen2-VL-Instruct: turns end with <|im_end|>, padding is <|endoftext|>.
        eos=QWEN_IM_END,
        pad=QWEN_EOT,
        bos=None,
        extra_special_tokens={"image_token": QWEN_IMAGE_PAD, "video_token": QWEN_VIDEO_PAD},
        chat_template=QWEN_CHAT_TEMPLATE,
    )
    # Never generated: specials (EOS would end early; a stray <|image_pad|> breaks the
    # image-token count check), plus template words that read like a new chat turn.
    banned_ids = [vocab[t] for t in QWEN_SPECIALS + TEMPLATE_WORDS]

    pixels = {"min_pixels": QWEN2_VL_MIN_PIXELS, "max_pixels": QWEN2_VL_MAX_PIXELS}
    patching = {
        "patch_size": QWEN2_VL_PATCH_SIZE,
        "merge_size": QWEN2_VL_MERGE_SIZE,
        "temporal_patch_size": 2,
    }
    # AutoProcessor loads every sub-processor the processor class names, so the video
    # one is saved too (unused here; same small bounds per frame).
    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(**pixels, **patching),
        video_processor=Qwen2VLVideoProcessor(**pixels, **patching),
        tokenizer=tokenizer,
        chat_template=QWEN_CHAT_TEMPLATE,
    )

    text_config = {
        "vocab_size": len(vocab),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 64 // head_dim,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                            "mrope_section": QWEN2_VL_MROPE_SECTIONS[head_dim]},
        "bos_token_id": None,
        "eos_token_id": vocab[QWEN_IM_END],
        "pad_token_id": vocab[QWEN_EOT],
    }
    vision_config = {
        "depth": 2,
        "embed_dim": 32,
        "num_heads": 2,
        "mlp_ratio": 2,
        "hidden_size": text_config["hidden_size"],  # the patch merger projects into the LLM
        "in_channels": 3,
        "patch_size": QWEN2_VL_PATCH_SIZE,
        "spatial_merge_size": QWEN2_VL_MERGE_SIZE,
        "temporal_patch_size": patching["temporal_patch_size"],
    }
    config = Qwen2VLConfig(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=vocab[QWEN_IMAGE_PAD],
        video_token_id=vocab[QWEN_VIDEO_PAD],
        vision_start_token_id=vocab[QWEN_VISION_START],
        vision_end_token_id=vocab[QWEN_VISION_END],
        tie_word_embeddings=False,
    )
    init_and_save(folder, Qwen2VLForConditionalGeneration, config, processor, seed, banned_ids,
                  eos_token_id=vocab[QWEN_IM_END], pad_token_id=vocab[QWEN_EOT])


def qwen2_vl_build_key() -> str:
    """The key of this builder (:func:`.checkpoints.builder_key`), in its folders' names."""
    return builder_key(*tokenizers.SOURCES, Path(__file__))


def build_tiny_qwen2_vl(path: str | os.PathLike, seed: int = 0, head_dim: int = 16) -> Path:
    """Build the tiny random Qwen2-VL checkpoint into ``path`` atomically; return ``path``.

    Args:
        path: destination folder. Its parent is created if missing. The build is
            written into a hidden temporary sibling and moved into place with
            ``os.replace``, so readers never see a half-written folder
            (:func:`.checkpoints.build_atomically`).
        seed: torch seed for the random weights; same seed, same checkpoint.
        head_dim: the language model's attention head size, 16 or 32
            (:data:`VLLM_HEAD_DIM`: the one vLLM can serve).

    The folder loads with lmms-eval's ``qwen2_vl`` class on CPU given
    ``device="cpu", device_map="cpu", min_pixels=QWEN2_VL_MIN_PIXELS,
    max_pixels=QWEN2_VL_MAX_PIXELS`` (and any ``batch_size``).
    """
    _check_head_dim(head_dim)
    dest = Path(path).expanduser().absolute()

    def write(folder: Path, seed: int) -> None:
        _write_checkpoint(folder, seed, head_dim)

    return build_atomically(dest, seed, _kind(head_dim), write, qwen2_vl_build_key())


def _check_head_dim(head_dim: int) -> None:
    if head_dim not in QWEN2_VL_MROPE_SECTIONS:
        raise ValueError(f"head_dim: expected one of {sorted(QWEN2_VL_MROPE_SECTIONS)}; got {head_dim!r}")


def _kind(head_dim: int) -> str:
    """The build's name in its marker and folder: the original head size keeps its old name."""
    return "qwen2_vl" if head_dim == 16 else f"qwen2_vl_h{head_dim}"


def tiny_qwen2_vl_path(cache_dir: str | os.PathLike | None = None, seed: int = 0, head_dim: int = 16) -> Path:
    """Return a cached tiny Qwen2-VL checkpoint folder, building it on first use.

    Args:
        cache_dir: cache root; defaults to ``$LMMS_GENBENCH_CACHE`` if set, else
            ``~/.cache/lmms_genbench``. The checkpoint lives in
            ``<root>/smoke/tiny-qwen2-vl-s{seed}-<build key>`` (``tiny-qwen2-vl-h32-...``
            for ``head_dim=32``): the key in the name also keys the artifact store.
        seed: torch seed for the random weights.
        head_dim: as in :func:`build_tiny_qwen2_vl`; ``VLLM_HEAD_DIM`` for vLLM.

    A folder made by a different builder version is rebuilt. Safe to call from
    several processes at once.
    """
    _check_head_dim(head_dim)
    key = qwen2_vl_build_key()
    kind = "" if head_dim == 16 else f"h{head_dim}-"
    return cached(cache_dir, f"tiny-qwen2-vl-{kind}s{seed}-{key[:8]}", seed, _kind(head_dim), key,
                  lambda dest: build_tiny_qwen2_vl(dest, seed=seed, head_dim=head_dim))
