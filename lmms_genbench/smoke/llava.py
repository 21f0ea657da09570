"""A tiny random-weight LLaVA checkpoint for offline smoke runs and tests.

The folder loads with lmms-eval's real ``llava_hf`` class (chat and simple), so the
smoke preset exercises the genuine harness code path with no download: the tokenizer
is built locally over a small word list (:mod:`.tokenizers`), the image processor and
model are constructed from explicit tiny configs, and the weights are seeded.
Generations are deterministic word salad of real image words.

The tiny Qwen2-VL (:mod:`.qwen2_vl`) is importable from here too, as it always was.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import tokenizers, vision
from .checkpoints import build_atomically, builder_key, cached, init_and_save
from .qwen2_vl import (  # re-exported: their home before the split
    QWEN2_VL_MAX_PIXELS,
    QWEN2_VL_MIN_PIXELS,
    VLLM_HEAD_DIM,
    build_tiny_qwen2_vl,
    tiny_qwen2_vl_path,
)
from .tokenizers import BOS, EOS, PAD, TEMPLATE_WORDS, UNK, word_level_tokenizer, word_vocab
from .vision import TINY_TOWER

__all__ = [
    "QWEN2_VL_MAX_PIXELS",
    "QWEN2_VL_MIN_PIXELS",
    "VLLM_HEAD_DIM",
    "build_key",
    "build_tiny_llava",
    "build_tiny_qwen2_vl",
    "tiny_llava_path",
    "tiny_qwen2_vl_path",
]

IMAGE = "<image>"
SPECIALS = [UNK, BOS, EOS, PAD, IMAGE]

IMAGE_SIZE = TINY_TOWER["image_size"]
PATCH_SIZE = TINY_TOWER["patch_size"]
# CLIP adds a CLS token; the "default" strategy drops it, leaving one token per patch.
NUM_IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2

# Vicuna-style like llava-1.5 ("USER: <image>\n{prompt} ASSISTANT:"). Content may be a
# string (lmms-eval's simple class puts "<image>\n" in the text itself) or a list of
# typed parts (the chat class), so the template handles both.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] != 'system' %}{{ message['role'].upper() + ': ' }}{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] + ' ' }}"
    "{% else %}"
    "{% for part in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\n' }}{% endfor %}"
    "{% for part in message['content'] | selectattr('type', 'equalto', 'text') %}{{ part['text'] + ' ' }}{% endfor %}"
    "{% endif %}"
    "{% if message['role'] == 'assistant' %}{{ '</s>' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)


def build_key(*extra_files: Path) -> str:
    """The LLaVA builder's key (:func:`.checkpoints.builder_key`): a hash of the tokenizer's
    sources, the tiny vision tower's, this module's, ``extra_files`` and transformers' version."""
    return builder_key(*tokenizers.SOURCES, Path(vision.__file__), Path(__file__), *extra_files)


def _write_checkpoint(folder: Path, seed: int) -> None:
    """Build the tokenizer, image processor and seeded model and save them into ``folder``."""
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    vocab = word_vocab(SPECIALS)
    # Like llava-1.5's Llama tokenizer: a BOS in front of each text.
    tokenizer = word_level_tokenizer(vocab, SPECIALS, eos=EOS, pad=PAD, bos=BOS,
                                     extra_special_tokens={"image_token": IMAGE}, chat_template=CHAT_TEMPLATE)
    # Never generated: specials, plus template words that would read like a new chat turn.
    banned_ids = [vocab[t] for t in SPECIALS + TEMPLATE_WORDS]

    image_processor = CLIPImageProcessor(
        size={"shortest_edge": IMAGE_SIZE},
        crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        do_center_crop=True,
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's CLS token
        chat_template=CHAT_TEMPLATE,
    )

    vision_config = CLIPVisionConfig(**TINY_TOWER, intermediate_size=64, projection_dim=32)
    text_config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        bos_token_id=vocab[BOS],
        eos_token_id=vocab[EOS],
        pad_token_id=vocab[PAD],
        tie_word_embeddings=False,
    )
    config = LlavaConfig(
        vision_config=vision_config,
        text_config=text_config,
        image_token_index=vocab[IMAGE],
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
        image_seq_length=NUM_IMAGE_TOKENS,
        tie_word_embeddings=False,
    )
    init_and_save(folder, LlavaForConditionalGeneration, config, processor, seed, banned_ids,
                  bos_token_id=vocab[BOS], eos_token_id=vocab[EOS], pad_token_id=vocab[PAD])


def build_tiny_llava(path: str | os.PathLike, seed: int = 0) -> Path:
    """Build the tiny random LLaVA checkpoint into ``path`` atomically; return ``path``.

    Args:
        path: destination folder. Its parent is created if missing. The build is
            written into a hidden temporary sibling and moved into place with
            ``os.replace``, so readers never see a half-written folder.
        seed: torch seed for the random weights; same seed, same checkpoint.

    If a concurrent builder finishes first with the same builder key and seed,
    its (identical) folder is kept and ours discarded. An older or different
    build at ``path`` is moved aside and deleted (:func:`.checkpoints.build_atomically`).
    """
    dest = Path(path).expanduser().absolute()
    return build_atomically(dest, seed, "llava", _write_checkpoint, build_key())


def tiny_llava_path(cache_dir: str | os.PathLike | None = None, seed: int = 0) -> Path:
    """Return a cached tiny LLaVA checkpoint folder, building it on first use.

    Args:
        cache_dir: cache root; defaults to ``$LMMS_GENBENCH_CACHE`` if set, else
            ``~/.cache/lmms_genbench``. The checkpoint lives in
            ``<root>/smoke/tiny-llava-s{seed}-<build key>``: the key in the name
            also keys the artifact store, so a changed builder never reuses
            chains drawn by an older network.
        seed: torch seed for the random weights.

    A folder made by a different builder version is rebuilt. Safe to call from
    several processes at once (e.g. ranks of ``accelerate launch``).
    """
    key = build_key()
    return cached(cache_dir, f"tiny-llava-s{seed}-{key[:8]}", seed, "llava", key,
                  lambda dest: build_tiny_llava(dest, seed=seed))
