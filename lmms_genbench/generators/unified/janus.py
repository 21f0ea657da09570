"""Janus / Janus-Pro (DeepSeek) as a unified model, through transformers' Janus classes.

    lmms-eval --model cycle --model_args unified=janus,\\
    unified.pretrained=deepseek-community/Janus-Pro-7B,unified.device=cuda,unified.dtype=bfloat16 \\
        --tasks sdp_nocaps

A checkpoint in DeepSeek's own layout (``deepseek-ai/Janus-1.3B``, ``deepseek-ai/Janus-Pro-7B``)
is read onto the same classes at load time by :mod:`.janus_deepseek`, and described and drawn in
DeepSeek's chat format (:mod:`.janus_chat`: the roles read from the folder's files).

Describing is Janus' understanding mode (chat template with the image, text
generation); drawing is its image mode: the language model predicts the VQ
codes of one image under classifier-free guidance, and the VQ decoder turns them
into pixels. ``torch`` and ``transformers`` are imported when the model is built; its
:meth:`JanusUnified.plan` names it without loading the weights, so the cycle model loads
them at first use (a run served from the store never does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from ...core.deps import require
from ...core.failures import GeneratorConfigError
from ..base import GenerationResult
from ..common import check_image, describe_error
from .arguments import FRACTION, Arg, Arguments, Preset, describing, runtime
from .base import DescribeResult
from .common import CheckpointError, UnifiedCommon, authors_text, cut, hf_decoding
from .janus_chat import CHAT_FORMAT_CHOICES


def read_layout(pretrained: str) -> bool:
    """Whether ``pretrained`` is in DeepSeek's own layout (else transformers'), read as loading reads it
    (also by ``lmms-genbench check``: unified/folders.py). Raises :class:`CheckpointError` naming the
    file and key that is missing or wrong."""
    from .common import check_source, need
    from .janus_deepseek import is_deepseek_layout, read_json

    check_source("unified.pretrained", pretrained)
    config = read_json(pretrained, "config.json")
    if is_deepseek_layout(config):
        return True
    if config.get("model_type") != "janus":  # transformers' JanusConfig would fill a missing part with defaults
        raise CheckpointError(f"{pretrained}/config.json: model_type {config.get('model_type')!r} "
                              "is neither transformers' 'janus' nor DeepSeek's 'multi_modality'")
    for part in ("text_config", "vision_config", "vq_config"):
        need(config, part, f"{pretrained}/config.json")
    read_json(pretrained, "tokenizer_config.json")
    return False


def check_chat_format(pretrained: str, chat_format: str, deepseek: bool) -> None:
    """``unified.chat_format`` against the layout: a transformers-format folder's roles are its chat template's."""
    if chat_format != "auto" and not deepseek:
        raise GeneratorConfigError(f"unified.chat_format: {chat_format!r} applies to DeepSeek-format checkpoints; "
                                   f"{pretrained} is in transformers' format (its chat template sets the roles): "
                                   "leave it auto")

class JanusUnified(UnifiedCommon):
    """Janus / Janus-Pro checkpoints in the transformers format or in DeepSeek's own.

    Args: see ``ARGUMENTS``.

    The image size and its number of codes are the checkpoint's own (384 px from
    576 codes for Janus-Pro and Janus 1.3B); see :attr:`image_size` and :attr:`image_tokens`.

    Seeds: each prompt's codes are sampled with the Gumbel-max trick from noise of
    its own ``torch.Generator(seed)`` (drawn on the CPU), which samples exactly
    softmax(logits / image_temperature) while leaving every image a function of
    its own prompt and seed alone, so prompts batch freely. It is the noise
    ``torch.multinomial`` draws for one sample, so a prompt's codes are those
    DeepSeek's loop draws on the CPU for one image after ``torch.manual_seed(seed)``
    (up to float rounding of the logits). Describing has no
    seeds: with ``do_sample`` it uses torch's global generator, as lmms-eval models.
    """

    concurrent = False  # one network on one device: describe and draw in turn

    ARGUMENTS = Arguments("janus", (
        Arg("pretrained", str, None, "hub id or local folder of a Janus checkpoint: transformers' format "
            "(``deepseek-community/Janus-Pro-1B``, ``-7B``) or DeepSeek's (``deepseek-ai/Janus-1.3B``, "
            "``deepseek-ai/Janus-Pro-7B``: a config.json with ``language_config`` etc.; told apart by that file)", key=None),
        *runtime("auto", 4),
        Arg("guidance_scale", float, 5.0, "classifier-free guidance of image generation; 1 means no guidance",
            source="DeepSeek's generation_inference.py (`cfg_weight`)", minimum=1.0),
        Arg("image_temperature", float, 1.0, "sampling temperature of the image codes; 0 takes the most likely "
            "code at every step", source="DeepSeek's generation_inference.py (`temperature`)"),
        *describing(0.0, "inference.py (`do_sample=False`)", 512, "inference.py (`max_new_tokens=512`)"),
        Arg("chat_format", "choice", "auto", "the turn roles of a checkpoint in DeepSeek's layout: ``auto`` (read "
            "from its ``special_tokens_map.json``: Janus-Pro's lists ``<|User|>`` and ``<|Assistant|>``, "
            "Janus-1.3B's neither; a folder without that file is an error asking for this argument), ``janus`` "
            "(``User``/``Assistant``, DeepSeek's README for Janus-1.3B) or ``janus_pro`` "
            "(``<|User|>``/``<|Assistant|>``, its README for Janus-Pro). A transformers-format checkpoint has its "
            "own chat template: only ``auto``", choices=CHAT_FORMAT_CHOICES, quiet_default=True),
        Arg("top_p", float, None, "describing top-p where the task sets none and samples (none: not passed)",
            source="inference.py (greedy: none)", optional=True, rules=(FRACTION,), quiet_default=True),
    ), presets=(
        Preset("inference", {}, "DeepSeek's inference.py for describing, generation_inference.py for drawing"),
        Preset("app", {"temperature": 0.1, "top_p": 0.95}, "demo/app_januspro.py and demo/app.py: their "
               "understanding sliders' defaults, sampled; drawing as generation_inference.py"),
    ))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._check(*args, **kwargs)
        torch = self._torch
        transformers = require("transformers", "the janus unified model")
        from .janus_deepseek import load_deepseek

        self._chat = None  # DeepSeek's chat format, for a checkpoint in DeepSeek's own layout
        try:
            deepseek = read_layout(self.pretrained)
            if deepseek:  # deepseek-ai/Janus-1.3B as published: mapped onto transformers' classes here
                self.processor = None
                model, self._chat = load_deepseek(self.pretrained, torch, getattr(torch, self.dtype), self._device,
                                                  self.chat_format)
            else:
                check_chat_format(self.pretrained, self.chat_format, deepseek)
                self.processor = transformers.AutoProcessor.from_pretrained(self.pretrained)
                model = transformers.JanusForConditionalGeneration.from_pretrained(
                    self.pretrained, dtype=getattr(torch, self.dtype)
                )
        except GeneratorConfigError:
            raise
        except Exception as exc:  # no such folder or hub id, not a Janus checkpoint, ...
            what = str(exc) if isinstance(exc, CheckpointError) else describe_error(exc)
            raise GeneratorConfigError(
                f"unified.pretrained: cannot load a Janus checkpoint from {self.pretrained!r}: {what}"
            ) from exc
        self.model = model.to(self._device).eval()

        config = self.model.config
        self.image_tokens = int(config.vision_config.num_image_tokens)
        self.image_size = int(config.vq_config.num_patches) * 2 ** (len(config.vq_config.channel_multiplier) - 1)


    # -- describing ------------------------------------------------------------

    def describe(self, images: Sequence[Image.Image], prompt: str, gen_kwargs: dict[str, Any]) -> list[DescribeResult]:
        """One description (or failure) per image, with the task's decoding settings."""
        settings, until = hf_decoding(gen_kwargs or {}, self.temperature, self.max_new_tokens, self.top_p)
        if self._chat is not None:
            return self._isolated(lambda chunk: self._describe_deepseek(chunk, prompt, settings, until), images,
                                  "describe")
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
        text = self.processor.apply_chat_template(messages, add_generation_prompt=True)

        def call(chunk: list[Image.Image]) -> list[str]:
            inputs = self.processor(
                text=[text] * len(chunk),
                images=[image.convert("RGB") for image in chunk],
                generation_mode="text",
                padding=True,
                return_tensors="pt",
            ).to(self._device)
            inputs["pixel_values"] = inputs["pixel_values"].to(self.model.dtype)
            with self._torch.inference_mode():
                out = self.model.generate(**inputs, generation_mode="text", **settings)
            new = out[:, inputs["input_ids"].shape[1] :]
            return [cut(t, until) for t in self.decode_texts(new)]

        return self._isolated(call, images, "describe")

    def decode_texts(self, rows: Any) -> list[str]:
        """Generated ids as text, as the checkpoint's own code decodes them: DeepSeek's tokenizer
        decode, or the transformers-format processor's ``batch_decode(skip_special_tokens=True)``
        as under transformers 4.x (cleaned of spaces before punctuation where the tokenizer config
        asks; LlamaTokenizerFast's default: off)."""
        if self._chat is not None:
            return [self._chat.decode(list(map(int, row))) for row in rows]
        texts = self.processor.batch_decode(rows, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return [authors_text(t, self.processor.tokenizer.init_kwargs, default=False) for t in texts]

    def _describe_deepseek(self, chunk: list[Image.Image], prompt: str, settings: dict[str, Any],
                           until: list[str]) -> list[str]:
        """DeepSeek's understanding turn (inference.py): its sft prompt, its pixels, EOS as padding."""
        torch, chat = self._torch, self._chat
        ids = torch.tensor([chat.understanding_ids(prompt)] * len(chunk), device=self._device)
        pixels = torch.from_numpy(np.stack([chat.pixels(image) for image in chunk]))
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), pixel_values=pixels.to(self._device, self.model.dtype),
                generation_mode="text", eos_token_id=chat.eos_id, pad_token_id=chat.eos_id, **settings,
            )
        return [cut(t, until) for t in self.decode_texts(out[:, ids.shape[1]:].tolist())]

    # -- drawing ---------------------------------------------------------------

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GenerationResult]:
        """One image (or failure) per prompt; each depends on its own prompt and seed only."""
        return self._isolated(self._draw, self._seeded(prompts, seeds), "generate")

    def _draw(self, chunk: list[tuple[str, int]]) -> list[GenerationResult]:
        torch = self._torch
        from transformers import LogitsProcessorList

        # guidance and sampling run here, per row; generate's own guidance is off (1)
        # and its sampling greedy, so it takes the argmax of the noised scores
        processors = LogitsProcessorList(
            [_Guidance(self.guidance_scale), _SeededSampler([s for _, s in chunk], self.image_temperature)]
        )
        if self._chat is not None:
            return self._draw_deepseek([prompt for prompt, _ in chunk], processors)
        texts = [
            self.processor.apply_chat_template(
                [{"role": "user", "content": [{"type": "text", "text": prompt}]}], add_generation_prompt=True
            )
            for prompt, _ in chunk
        ]
        # the processor appends the begin-of-image token that starts image mode
        inputs = self.processor(text=texts, generation_mode="image", padding=True, return_tensors="pt").to(self._device)
        with torch.inference_mode():
            codes = self.model.generate(
                **inputs, generation_mode="image", do_sample=False, guidance_scale=1, logits_processor=processors
            )
            pixels = self.model.decode_image_tokens(codes)
        # undo the processor's normalisation ([-1, 1] for Janus-Pro) here: the processor's
        # own postprocess differs between its two backends and its PIL output is broken
        # in the torchvision one (transformers 5.2x). Truncated to uint8, not rounded, as that
        # postprocess (clip, then .to(uint8)) and DeepSeek's generation_inference.py do
        arrays = to_uint8(torch, pixels, self.processor.image_processor.image_mean,
                          self.processor.image_processor.image_std)
        return [check_image(Image.fromarray(a), False) for a in arrays]  # (H, W, 3) each

    def _draw_deepseek(self, prompts: list[str], processors: Any) -> list[GenerationResult]:
        """DeepSeek's drawing turn (generation_inference.py): its prompt ending in the begin-of-image tag,
        unconditional rows of pad tokens between BOS and that tag, its [-1, 1] -> uint8 conversion."""
        torch, chat = self._torch, self._chat
        rows = [chat.generation_ids(prompt) for prompt in prompts]
        width = max(len(row) for row in rows)
        ids = torch.full((len(rows), width), chat.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, row in enumerate(rows):  # left padding, as DeepSeek's batchify
            ids[i, width - len(row):] = torch.tensor(row)
            mask[i, width - len(row):] = 1
        with torch.inference_mode():
            codes = self.model.generate(
                input_ids=ids.to(self._device), attention_mask=mask.to(self._device), generation_mode="image",
                do_sample=False, guidance_scale=1, logits_processor=processors,
            )
            pixels = self.model.decode_image_tokens(codes)
        # generation_inference.py: clip((x + 1) / 2 * 255) stored into uint8 (truncation)
        arrays = ((pixels.float().cpu() + 1) / 2 * 255).clamp(0, 255).to(torch.uint8).numpy()
        return [check_image(Image.fromarray(a), False) for a in arrays]


def to_uint8(torch: Any, pixels: Any, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """(B, H, W, 3) normalised pixels as uint8: unnormalised, times 255, clipped, truncated."""
    mean_, std_ = torch.tensor(list(mean)), torch.tensor(list(std))
    return ((pixels.float().cpu() * std_ + mean_) * 255).clamp(0, 255).to(torch.uint8).numpy()


class _Guidance:
    """Classifier-free guidance: Janus stacks conditional rows over unconditional ones."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def __call__(self, input_ids, scores):
        cond, uncond = scores.chunk(2, dim=0)
        return uncond + self.scale * (cond - uncond)


class _SeededSampler:
    """Gumbel-max sampling with one generator per row.

    argmax(logits / T + G) with G = -log(E), E ~ Exp(1), is a draw from
    softmax(logits / T); drawing E from each row's own seeded CPU generator makes
    the draw independent of the batch and of the device. T = 0 is greedy.
    """

    def __init__(self, seeds: list[int], temperature: float) -> None:
        import torch

        self.temperature = temperature
        self.generators = [torch.Generator().manual_seed(seed) for seed in seeds]

    def __call__(self, input_ids, scores):
        import torch

        if self.temperature == 0:
            return scores
        size = scores.shape[-1]
        exp = torch.stack([torch.empty(size).exponential_(generator=g) for g in self.generators])
        return scores.float() / self.temperature - exp.log().to(scores.device)
