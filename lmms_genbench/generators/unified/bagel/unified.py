"""BAGEL (ByteDance Seed) as a unified model, natively: ``unified=bagel``.

    lmms-eval --model cycle --model_args unified=bagel,\\
    unified.pretrained=ByteDance-Seed/BAGEL-7B-MoT,unified.device=cuda,unified.dtype=bfloat16 \\
        --tasks sdp_nocaps

Describing runs the authors' understanding mode (the image through the ViT, the prompt, greedy
decoding); drawing their text-to-image mode (rectified flow over FLUX latents with text guidance,
then FLUX's decoder). Every default is the authors' (cited per argument). The checkpoint is read as
published (:mod:`.checkpoint`); :meth:`BagelUnified.plan` names the model without loading it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

from PIL import Image

from ....core.args import ArgumentError, as_choice, as_float, as_int, as_str
from ....core.deps import require
from ....core.failures import GeneratorConfigError
from ....core.keys import generator_name
from ...base import GenerationResult
from ...common import DTYPES, check_device, check_image, describe_error, resolve_dtype
from ...lazy import GeneratorPlan
from ..base import DescribeResult, run_isolated

__all__ = ["BagelUnified"]

RENORM_TYPES = ("global", "channel", "text_channel")
#: the largest side the latent position table covers: max_latent_size 64 x 16 pixels per token
MAX_IMAGE_SIZE = 64 * 16


class BagelUnified:
    """BAGEL checkpoints as the authors publish them (``ByteDance-Seed/BAGEL-7B-MoT``).

    Args:
        pretrained: hub id or local folder holding ``llm_config.json``, ``vit_config.json``,
            ``ema.safetensors``, ``ae.safetensors`` and the tokenizer files.
        device: torch device; a missing accelerator is an error, never a silent CPU run.
        dtype: ``auto`` (bfloat16 on CUDA where supported, as the authors run), ``float16``,
            ``bfloat16`` or ``float32``.
        batch_size: images described, or prompts drawn, per call (each runs alone inside: the
            authors' inference takes one sample at a time).
        image_size: side of the drawn square image, a multiple of 16 up to 1024 (the authors'
            ``image_shapes`` default (1024, 1024), inferencer.py).
        num_timesteps: flow steps (50: inference.ipynb's text-to-image settings, as every default below).
        cfg_text_scale: text guidance (4.0); 1 turns guidance off.
        cfg_img_scale: image guidance (1.0, off); for text-to-image its context holds the prompt too.
        cfg_interval_start, cfg_interval_end: guidance applies where start < t <= end (0.4, 1.0).
        timestep_shift: the schedule's shift t' = s t / (1 + (s - 1) t) (3.0).
        cfg_renorm_min: lower clamp of the guidance renormalisation (0.0; 1.0 disables it).
        cfg_renorm_type: ``global`` (one norm per image), ``channel`` or ``text_channel`` (global).
        max_new_tokens: the authors' ``max_think_token_n`` (1000: inference.ipynb, lmms-eval's
            bagel) where the task sets none; as their loop, at most this many minus one tokens.
        temperature: describing temperature where the task sets none (0: greedy, the authors'
            ``do_sample=False``).

    Seeds: each drawing's starting noise comes from its own ``torch.Generator(seed)`` on the CPU
    (the same numbers as ``torch.manual_seed(seed); torch.randn(...)`` before the authors' call), so
    an image depends on its prompt and seed only.
    """

    concurrent = False  # one network on one device: describe and draw in turn
    #: the constructor's defaults (plan and from_parts start from them)
    _DEFAULTS: ClassVar[dict[str, Any]] = {
        "pretrained": None, "device": "cuda", "dtype": "auto", "batch_size": 1, "image_size": 1024,
        "num_timesteps": 50, "cfg_text_scale": 4.0, "cfg_img_scale": 1.0, "cfg_interval_start": 0.4,
        "cfg_interval_end": 1.0, "timestep_shift": 3.0, "cfg_renorm_min": 0.0, "cfg_renorm_type": "global",
        "max_new_tokens": 1000, "temperature": 0.0,
    }

    def __init__(self, pretrained: str | None = None, device: str = "cuda", dtype: str = "auto", batch_size: int = 1,
                 image_size: int = 1024, num_timesteps: int = 50, cfg_text_scale: float = 4.0,
                 cfg_img_scale: float = 1.0, cfg_interval_start: float = 0.4, cfg_interval_end: float = 1.0,
                 timestep_shift: float = 3.0, cfg_renorm_min: float = 0.0, cfg_renorm_type: str = "global",
                 max_new_tokens: int = 1000, temperature: float = 0.0) -> None:
        self._check(pretrained, device, dtype, batch_size, image_size, num_timesteps, cfg_text_scale, cfg_img_scale,
                    cfg_interval_start, cfg_interval_end, timestep_shift, cfg_renorm_min, cfg_renorm_type,
                    max_new_tokens, temperature)
        try:
            self._load()
        except Exception as exc:  # no such folder or hub id, not a BAGEL checkpoint, ...
            raise GeneratorConfigError(
                f"unified.pretrained: cannot load a BAGEL checkpoint from {self.pretrained!r}: {describe_error(exc)}"
            ) from exc

    @classmethod
    def plan(cls, **kwargs: Any) -> GeneratorPlan:
        """Name and batch size, every argument and the device checked, no weights loaded."""
        probe = cls.__new__(cls)
        defaults = cls._DEFAULTS
        unknown = sorted(set(kwargs) - set(defaults))
        if unknown:
            raise ArgumentError(f"unified.{unknown[0]}: not an argument of unified=bagel (allowed: "
                                f"{', '.join(defaults)})")
        probe._check(**{**defaults, **kwargs})
        return GeneratorPlan(probe.name, probe.batch_size)

    @classmethod
    def from_parts(cls, network: Any, vae: Any, tokenizer: Any, label: str = "random", **kwargs: Any) -> BagelUnified:
        """An instance around modules already built (``loading.random_real_size`` for a GPU check);
        ``kwargs`` as the constructor's, ``label`` names it."""
        from .loading import special_ids
        from .network import FlowSettings

        self = cls.__new__(cls)
        self._check(**{**cls._DEFAULTS, **kwargs, "pretrained": label})
        self.network, self.vae, self.tokenizer, self.special = network, vae, tokenizer, special_ids(tokenizer)
        self.flow = FlowSettings(self.cfg_text_scale, self.cfg_img_scale, self.cfg_interval, self.timestep_shift,
                                 self.num_timesteps, self.cfg_renorm_min, self.cfg_renorm_type)
        return self

    def _check(self, pretrained, device, dtype, batch_size, image_size, num_timesteps, cfg_text_scale, cfg_img_scale,
               cfg_interval_start, cfg_interval_end, timestep_shift, cfg_renorm_min, cfg_renorm_type, max_new_tokens,
               temperature) -> None:
        self.pretrained = as_str("pretrained", pretrained)
        self.device = str(as_str("device", device))
        dtype_choice = as_choice("dtype", dtype, DTYPES)
        self.batch_size = int(as_int("batch_size", batch_size, minimum=1))  # type: ignore[arg-type]
        self.image_size = int(as_int("image_size", image_size, minimum=16))  # type: ignore[arg-type]
        if self.image_size % 16 or self.image_size > MAX_IMAGE_SIZE:
            raise ArgumentError(f"image_size: expected a multiple of 16 up to {MAX_IMAGE_SIZE} (BAGEL's latent grid is "
                                f"at most 64 tokens of 16 px a side); got {image_size!r}")
        self.num_timesteps = int(as_int("num_timesteps", num_timesteps, minimum=2))  # type: ignore[arg-type]
        self.cfg_text_scale = float(as_float("cfg_text_scale", cfg_text_scale, minimum=0.0))  # type: ignore[arg-type]
        self.cfg_img_scale = float(as_float("cfg_img_scale", cfg_img_scale, minimum=0.0))  # type: ignore[arg-type]
        self.cfg_interval = (float(as_float("cfg_interval_start", cfg_interval_start, minimum=0.0)),  # type: ignore[arg-type]
                             float(as_float("cfg_interval_end", cfg_interval_end, minimum=0.0)))  # type: ignore[arg-type]
        self.timestep_shift = float(as_float("timestep_shift", timestep_shift, minimum=0.0))  # type: ignore[arg-type]
        self.cfg_renorm_min = float(as_float("cfg_renorm_min", cfg_renorm_min, minimum=0.0))  # type: ignore[arg-type]
        self.cfg_renorm_type = as_choice("cfg_renorm_type", cfg_renorm_type, RENORM_TYPES)
        self.max_new_tokens = int(as_int("max_new_tokens", max_new_tokens, minimum=1))  # type: ignore[arg-type]
        self.temperature = float(as_float("temperature", temperature, minimum=0.0))  # type: ignore[arg-type]

        torch = self._torch = require("torch", "the bagel unified model")
        self._device = check_device(torch, self.device)
        self.dtype = resolve_dtype(torch, dtype_choice, self._device, None)
        label = os.path.basename(os.path.normpath(self.pretrained)) if os.path.isdir(self.pretrained) else self.pretrained
        self.name = generator_name("bagel", label, {
            "pretrained": self.pretrained, "dtype": self.dtype, "image_size": self.image_size,
            "num_timesteps": self.num_timesteps, "cfg_text_scale": self.cfg_text_scale,
            "cfg_img_scale": self.cfg_img_scale, "cfg_interval": list(self.cfg_interval),
            "timestep_shift": self.timestep_shift, "cfg_renorm_min": self.cfg_renorm_min,
            "cfg_renorm_type": self.cfg_renorm_type, "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
        })

    def _load(self) -> None:
        from .loading import load_bagel
        from .network import FlowSettings

        self.network, self.vae, self.tokenizer, self.special = load_bagel(
            self.pretrained, self._device, getattr(self._torch, self.dtype))
        self.flow = FlowSettings(self.cfg_text_scale, self.cfg_img_scale, self.cfg_interval, self.timestep_shift,
                                 self.num_timesteps, self.cfg_renorm_min, self.cfg_renorm_type)

    def __repr__(self) -> str:
        return f"BagelUnified(name={self.name!r}, device={self.device!r})"

    # -- describing ------------------------------------------------------------

    def describe(self, images: Sequence[Image.Image], prompt: str, gen_kwargs: dict[str, Any]) -> list[DescribeResult]:
        """One description (or failure) per image: the authors' ``[image, prompt]`` understanding call."""
        gen_kwargs = gen_kwargs or {}
        max_length = int(as_int("gen_kwargs max_new_tokens", gen_kwargs.get("max_new_tokens", self.max_new_tokens),
                                minimum=1))  # type: ignore[arg-type]
        temperature = float(as_float("gen_kwargs temperature", gen_kwargs.get("temperature", self.temperature),
                                     minimum=0.0))  # type: ignore[arg-type]
        sample = bool(gen_kwargs.get("do_sample", temperature > 0)) and temperature > 0
        until = gen_kwargs.get("until") or []
        until = [until] if isinstance(until, str) else [str(u) for u in until]

        def call(chunk: list[Image.Image]) -> list[str]:
            return [_cut(self.describe_one(image, prompt, max_length, temperature if sample else 0.0), until)
                    for image in chunk]

        return run_isolated(call, list(images), self.batch_size, "bagel describe", self._free_memory)

    def describe_one(self, image: Image.Image, prompt: str, max_length: int, temperature: float = 0.0,
                     on_logits: Any = None) -> str:
        """The text the authors' ``gen_text`` returns for ``image`` then ``prompt``."""
        torch = self._torch
        from .network import Context

        def pick(logits):
            if temperature == 0:
                return int(torch.argmax(logits))
            return int(torch.multinomial(torch.softmax(logits.float() / temperature, dim=-1), 1))

        with torch.inference_mode():
            ctx = self.network.add_image(Context(), image, self.special)
            ctx = self.network.add_text(ctx, self.tokenizer.encode(prompt.strip()), self.special)
            ids = self.network.generate_text(ctx, self.special, max_length, pick, on_logits)
        # as gen_text: decode from the start token, keep what lies before <|im_end|>
        text = self.tokenizer.decode([self.special.bos, *ids])
        return text.split("<|im_end|>")[0].split("<|im_start|>")[1]

    # -- drawing ---------------------------------------------------------------

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GenerationResult]:
        """One image (or failure) per prompt; each depends on its own prompt and seed only."""
        prompts, seeds = list(prompts), [int(s) for s in seeds]
        if len(prompts) != len(seeds):
            raise ValueError(f"generate: expected one seed per prompt; got {len(prompts)} prompts and {len(seeds)} seeds")

        def call(chunk: list[tuple[str, int]]) -> list[GenerationResult]:
            return [check_image(self.draw_one(p, s, self.image_size, self.image_size)[1], False) for p, s in chunk]

        return run_isolated(call, list(zip(prompts, seeds)), self.batch_size, "bagel generate", self._free_memory)

    def draw_one(self, prompt: str, seed: int, height: int, width: int, flow: Any = None) -> tuple[Any, Image.Image]:
        """The latent tokens and the image of the authors' text-to-image call at ``seed``."""
        torch = self._torch
        from .autoencoder import decode_latents
        from .network import Context

        net = self.network
        n = (height // net.latent_downsample) * (width // net.latent_downsample)
        noise = torch.randn((n, net.patch * net.patch * net.latent_channels), generator=torch.Generator().manual_seed(seed))
        with torch.inference_mode():
            cond = net.add_text(Context(), self.tokenizer.encode(prompt.strip()), self.special)  # as lmms-eval strips
            # text guidance's context lacks the prompt; image guidance's holds it, as the conditional one
            contexts = {"cond": cond, "text": Context(), "image": cond}
            tokens = net.draw(contexts, height, width, noise, flow or self.flow, self.special)
            pixels = decode_latents(self.vae, net.unpatchify(tokens, height, width))
        # the inferencer's conversion: [-1, 1] to [0, 255], truncated to uint8
        array = ((pixels.float() * 0.5 + 0.5).clamp(0, 1)[0].permute(1, 2, 0) * 255).to(torch.uint8).cpu().numpy()
        return tokens, Image.fromarray(array)

    def _free_memory(self) -> None:
        if self._torch.cuda.is_available():
            self._torch.cuda.empty_cache()


def _cut(text: str, until: list[str]) -> str:
    """``text`` up to the first stop string."""
    for stop in until:
        if stop and stop in text:
            text = text.split(stop, 1)[0]
    return text.strip()
