"""Tiny random-weight checkpoints for more of lmms-eval's describer classes.

Each folder loads with an lmms-eval 0.7.3 model class and transformers' real model
and processor classes: ``qwen2_5_vl``, ``gemma3``, ``idefics2``, ``internvl_hf``, and
LLaVA-OneVision through ``llava_hf`` (lmms-eval's own ``llava_onevision`` class needs
the LLaVA-NeXT ``llava`` package). Tokenizers are the word-level ones of
:mod:`.tokenizers` with each family's special tokens and a ChatML template; images are
32 px; language models have 2 layers of width 64; weights are seeded. They describe
in random words: they verify plumbing, never description quality.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from . import qwen2_vl, tokenizers
from .checkpoints import build_atomically, builder_key, cached, init_and_save
from .qwen2_vl import (QWEN2_VL_MAX_PIXELS, QWEN2_VL_MERGE_SIZE, QWEN2_VL_MIN_PIXELS, QWEN2_VL_PATCH_SIZE,
                       QWEN_CHAT_TEMPLATE, QWEN_IMAGE_PAD, QWEN_SPECIALS, QWEN_VIDEO_PAD, QWEN_VISION_END,
                       QWEN_VISION_START)
from .tokenizers import TEMPLATE_WORDS, UNK, word_level_tokenizer, word_vocab

__all__ = ["DESCRIBERS", "build_tiny_describer", "describer_args", "describers_build_key", "tiny_describer_path"]

_IMAGE_SIZE, _PATCH = 32, 8
_IM_START, _IM_END = "<|im_start|>", "<|im_end|>"


def _chatml(image: str) -> str:
    """A ChatML template whose image parts render as ``image`` (string content as it is)."""
    return (
        "{% for message in messages %}" + _IM_START + "{{ message['role'] }}\n"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' %}" + image + "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}" + _IM_END + "\n{% endfor %}"
        "{% if add_generation_prompt %}" + _IM_START + "assistant\n{% endif %}"
    )


def _tokenizer(specials: list[str], template: str, *, extra: dict[str, str], bos: str | None = None):
    vocab = word_vocab(specials)
    tokenizer = word_level_tokenizer(vocab, specials, eos=_IM_END, pad="<pad>", bos=bos,
                                      extra_special_tokens=extra, chat_template=template)
    # never generated: specials, and words that read like a new chat turn
    banned = [vocab[t] for t in specials + TEMPLATE_WORDS if t in vocab]
    return vocab, tokenizer, banned


def _text(vocab: dict[str, int], model_type: str = "qwen2", **extra) -> dict[str, Any]:
    return {"model_type": model_type, "vocab_size": len(vocab), "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 4096, "pad_token_id": vocab["<pad>"], "eos_token_id": vocab[_IM_END],
            "bos_token_id": None, "tie_word_embeddings": False, **extra}


def _siglip() -> dict[str, Any]:
    return {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 2, "image_size": _IMAGE_SIZE, "patch_size": _PATCH}


def _save(folder: Path, model_cls, config, processor, seed: int, vocab, banned) -> None:
    init_and_save(folder, model_cls, config, processor, seed, banned,
                   eos_token_id=vocab[_IM_END], pad_token_id=vocab["<pad>"])


def _qwen2_5_vl(folder: Path, seed: int) -> None:
    from transformers import (Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor,
                              Qwen2VLImageProcessor, Qwen2VLVideoProcessor)

    specials = ["<pad>", *QWEN_SPECIALS]
    vocab, tokenizer, banned = _tokenizer(specials, QWEN_CHAT_TEMPLATE,
                                          extra={"image_token": QWEN_IMAGE_PAD, "video_token": QWEN_VIDEO_PAD})
    patching = {"patch_size": QWEN2_VL_PATCH_SIZE, "merge_size": QWEN2_VL_MERGE_SIZE, "temporal_patch_size": 2,
                "min_pixels": QWEN2_VL_MIN_PIXELS, "max_pixels": QWEN2_VL_MAX_PIXELS}
    processor = Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(**patching),
                                    video_processor=Qwen2VLVideoProcessor(**patching), tokenizer=tokenizer,
                                    chat_template=QWEN_CHAT_TEMPLATE)
    text = _text(vocab, "qwen2_5_vl_text", rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                                                             "mrope_section": [2, 3, 3]})
    vision = {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64,
              "patch_size": QWEN2_VL_PATCH_SIZE, "spatial_merge_size": QWEN2_VL_MERGE_SIZE, "temporal_patch_size": 2,
              "window_size": 56, "fullatt_block_indexes": [1]}
    config = Qwen2_5_VLConfig(text_config=text, vision_config=vision, image_token_id=vocab[QWEN_IMAGE_PAD],
                              video_token_id=vocab[QWEN_VIDEO_PAD], vision_start_token_id=vocab[QWEN_VISION_START],
                              vision_end_token_id=vocab[QWEN_VISION_END], tie_word_embeddings=False)
    _save(folder, Qwen2_5_VLForConditionalGeneration, config, processor, seed, vocab, banned)


def _llava_onevision(folder: Path, seed: int) -> None:
    from transformers import (LlavaOnevisionConfig, LlavaOnevisionForConditionalGeneration,
                              LlavaOnevisionImageProcessor, LlavaOnevisionProcessor, LlavaOnevisionVideoProcessor)

    specials = ["<pad>", UNK, _IM_START, _IM_END, "<image>", "<video>"]
    template = _chatml("<image>\n")
    vocab, tokenizer, banned = _tokenizer(specials, template, extra={"image_token": "<image>", "video_token": "<video>"})
    pinpoints = [[_IMAGE_SIZE, _IMAGE_SIZE]]
    size = {"height": _IMAGE_SIZE, "width": _IMAGE_SIZE}
    processor = LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(size=size, image_grid_pinpoints=pinpoints),
        video_processor=LlavaOnevisionVideoProcessor(size=size), tokenizer=tokenizer,
        num_image_tokens=(_IMAGE_SIZE // _PATCH) ** 2, vision_feature_select_strategy="full",
        chat_template=template,
    )
    config = LlavaOnevisionConfig(vision_config=_siglip(), text_config=_text(vocab),
                                  image_token_index=vocab["<image>"], video_token_index=vocab["<video>"],
                                  image_grid_pinpoints=pinpoints, vision_feature_select_strategy="full",
                                  vision_feature_layer=-1, tie_word_embeddings=False)
    _save(folder, LlavaOnevisionForConditionalGeneration, config, processor, seed, vocab, banned)


def _gemma3(folder: Path, seed: int) -> None:
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3ImageProcessor, Gemma3Processor

    boi, eoi, soft = "<start_of_image>", "<end_of_image>", "<image_soft_token>"
    specials = ["<pad>", "<eos>", "<bos>", UNK, _IM_START, _IM_END, boi, eoi, soft]
    template = _chatml(boi)
    vocab, tokenizer, banned = _tokenizer(specials, template, bos="<bos>",
                                          extra={"boi_token": boi, "eoi_token": eoi, "image_token": soft})
    tokens_per_image = 4  # pooled from the 4x4 patch grid
    processor = Gemma3Processor(
        image_processor=Gemma3ImageProcessor(size={"height": _IMAGE_SIZE, "width": _IMAGE_SIZE}),
        tokenizer=tokenizer, chat_template=template, image_seq_length=tokens_per_image,
    )
    text = _text(vocab, "gemma3_text", head_dim=16, num_key_value_heads=1, sliding_window=64,
                 bos_token_id=vocab["<bos>"])
    config = Gemma3Config(text_config=text, vision_config=_siglip(), mm_tokens_per_image=tokens_per_image,
                          boi_token_index=vocab[boi], eoi_token_index=vocab[eoi], image_token_index=vocab[soft],
                          tie_word_embeddings=False)
    _save(folder, Gemma3ForConditionalGeneration, config, processor, seed, vocab, banned)


def _idefics2(folder: Path, seed: int) -> None:
    from transformers import Idefics2Config, Idefics2ForConditionalGeneration, Idefics2ImageProcessor, Idefics2Processor

    fake, image, end = "<fake_token_around_image>", "<image>", "<end_of_utterance>"
    specials = ["<pad>", UNK, "<s>", _IM_START, _IM_END, fake, image, end]
    template = _chatml(image)
    vocab, tokenizer, banned = _tokenizer(specials, template, bos="<s>",
                                          extra={"image_token": image, "image_boundary_token": fake})
    latents = 4
    processor = Idefics2Processor(
        image_processor=Idefics2ImageProcessor(do_image_splitting=False,
                                               size={"shortest_edge": _IMAGE_SIZE, "longest_edge": _IMAGE_SIZE}),
        tokenizer=tokenizer, image_seq_len=latents, chat_template=template,
    )
    vision = {k: v for k, v in _siglip().items() if k != "model_type"}
    perceiver = {"hidden_size": 64, "resampler_n_latents": latents, "resampler_depth": 1, "resampler_n_heads": 2,
                 "resampler_head_dim": 8, "num_key_value_heads": 1}
    config = Idefics2Config(vision_config=vision, perceiver_config=perceiver,
                            text_config=_text(vocab, "mistral", bos_token_id=vocab["<s>"]),
                            image_token_id=vocab[image], tie_word_embeddings=False)
    _save(folder, Idefics2ForConditionalGeneration, config, processor, seed, vocab, banned)


def _internvl(folder: Path, seed: int) -> None:
    from transformers import (GotOcr2ImageProcessor, InternVLConfig, InternVLForConditionalGeneration,
                              InternVLProcessor, InternVLVideoProcessor)

    start, end, context, video = "<img>", "</img>", "<IMG_CONTEXT>", "<video>"
    specials = ["<pad>", UNK, _IM_START, _IM_END, start, end, context, video]
    template = _chatml(context)
    vocab, tokenizer, banned = _tokenizer(specials, template, extra={
        "start_image_token": start, "end_image_token": end, "context_image_token": context, "video_token": video})
    tokens_per_image = (_IMAGE_SIZE // _PATCH) ** 2 // 4  # pixel shuffle at downsample ratio 0.5
    size = {"height": _IMAGE_SIZE, "width": _IMAGE_SIZE}
    processor = InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(size=size, crop_to_patches=False),
        video_processor=InternVLVideoProcessor(size=size), tokenizer=tokenizer,
        image_seq_length=tokens_per_image, chat_template=template,
    )
    vision = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
              "image_size": [_IMAGE_SIZE, _IMAGE_SIZE], "patch_size": [_PATCH, _PATCH]}
    config = InternVLConfig(vision_config=vision, text_config=_text(vocab), image_token_id=vocab[context],
                            image_seq_length=tokens_per_image, downsample_ratio=0.5, tie_word_embeddings=False)
    _save(folder, InternVLForConditionalGeneration, config, processor, seed, vocab, banned)


_BUILDERS: dict[str, Callable[[Path, int], None]] = {
    "qwen2_5_vl": _qwen2_5_vl,
    "llava_onevision": _llava_onevision,
    "gemma3": _gemma3,
    "idefics2": _idefics2,
    "internvl_hf": _internvl,
}
#: checkpoint -> the lmms-eval model type that loads it
DESCRIBERS = {"qwen2_5_vl": "qwen2_5_vl", "llava_onevision": "llava_hf", "gemma3": "gemma3",
              "idefics2": "idefics2", "internvl_hf": "internvl_hf"}


def describers_build_key() -> str:
    """The builder key (:func:`.checkpoints.builder_key`) over the tokenizer's sources, the tiny
    Qwen2-VL's (whose tokens and template the Qwen2.5-VL one takes) and this module."""
    return builder_key(*tokenizers.SOURCES, Path(qwen2_vl.__file__), Path(__file__))


def describer_args(checkpoint: str, path: str | os.PathLike) -> dict[str, Any]:
    """The ``describer.<arg>`` values that load ``checkpoint``'s folder on a CPU."""
    args: dict[str, Any] = {"pretrained": str(path), "device": "cpu", "device_map": "cpu"}
    if checkpoint == "qwen2_5_vl":
        args.update(min_pixels=QWEN2_VL_MIN_PIXELS, max_pixels=QWEN2_VL_MAX_PIXELS)
    return args


def _check(checkpoint: str) -> str:
    if checkpoint not in _BUILDERS:
        raise ValueError(f"checkpoint: expected one of {', '.join(_BUILDERS)}; got {checkpoint!r}")
    return checkpoint


def build_tiny_describer(checkpoint: str, path: str | os.PathLike, seed: int = 0) -> Path:
    """Build ``checkpoint``'s tiny folder into ``path`` atomically; return ``path``."""
    write = _BUILDERS[_check(checkpoint)]
    return build_atomically(Path(path).expanduser().absolute(), seed, f"describer_{checkpoint}", write,
                            describers_build_key())


def tiny_describer_path(checkpoint: str, cache_dir: str | os.PathLike | None = None, seed: int = 0) -> Path:
    """A cached tiny ``checkpoint`` folder (``<root>/smoke/tiny-<checkpoint>-s{seed}-<key>``), built on first use."""
    key = describers_build_key()
    return cached(cache_dir, f"tiny-{_check(checkpoint).replace('_', '-')}-s{seed}-{key[:8]}", seed,
                  f"describer_{checkpoint}", key, lambda dest: build_tiny_describer(checkpoint, dest, seed))
