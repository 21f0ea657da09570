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

from collections.abc import Sequence
from typing import Any, ClassVar

from PIL import Image

from ....core.args import ArgumentError, as_choice, as_str
from ....core.failures import GeneratorConfigError
from ...base import GenerationResult
from ...common import check_image, describe_error
from ...lazy import GeneratorPlan
from ..base import DescribeResult
from ..common import UnifiedCommon, authors_text, count, cut, number, plain_decoding

__all__ = ["BagelUnified"]

RENORM_TYPES = ("global", "channel", "text_channel")
#: the largest side the latent position table covers: max_latent_size 64 x 16 pixels per token
MAX_IMAGE_SIZE = 64 * 16


class BagelUnified(UnifiedCommon):
    """BAGEL checkpoints as the authors publish them (``ByteDance-Seed/BAGEL-7B-MoT``).

    Args:
        pretrained: hub id or local folder holding ``llm_config.json``, ``vit_config.json``,
            ``ema.safetensors``, ``ae.safetensors`` and the tokenizer files.
        device: torch device; a missing accelerator is an error, never a silent CPU run.
        dtype: ``auto`` (bfloat16 on CUDA where supported, as the authors run), ``float16``,
            ``bfloat16`` or ``float32``.
        batch_size: images described, or prompts drawn, together: one pass per prefill, decoding
            step or flow step for the whole batch (the authors' inference takes one sample at a
            time; each output equals the one it gets alone, to float rounding).
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
    family = "bagel"
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
        defaults = cls._DEFAULTS
        unknown = sorted(set(kwargs) - set(defaults))
        if unknown:
            raise ArgumentError(f"unified.{unknown[0]}: not an argument of unified=bagel (allowed: "
                                f"{', '.join(defaults)})")
        return super().plan(**kwargs)

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
        self.pretrained = str(as_str("pretrained", pretrained))
        dtype_choice = self._check_runtime(device, dtype, batch_size)
        self.image_size = count("image_size", image_size, minimum=16)
        if self.image_size % 16 or self.image_size > MAX_IMAGE_SIZE:
            raise ArgumentError(f"image_size: expected a multiple of 16 up to {MAX_IMAGE_SIZE} (BAGEL's latent grid is "
                                f"at most 64 tokens of 16 px a side); got {image_size!r}")
        self.num_timesteps = count("num_timesteps", num_timesteps, minimum=2)
        self.cfg_text_scale = number("cfg_text_scale", cfg_text_scale)
        self.cfg_img_scale = number("cfg_img_scale", cfg_img_scale)
        self.cfg_interval = (number("cfg_interval_start", cfg_interval_start), number("cfg_interval_end", cfg_interval_end))
        self.timestep_shift = number("timestep_shift", timestep_shift)
        self.cfg_renorm_min = number("cfg_renorm_min", cfg_renorm_min)
        self.cfg_renorm_type = as_choice("cfg_renorm_type", cfg_renorm_type, RENORM_TYPES)
        self.max_new_tokens = count("max_new_tokens", max_new_tokens)
        self.temperature = number("temperature", temperature)
        self._settle(dtype_choice, {
            "image_size": self.image_size, "num_timesteps": self.num_timesteps, "cfg_text_scale": self.cfg_text_scale,
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

    # -- describing ------------------------------------------------------------

    def describe(self, images: Sequence[Image.Image], prompt: str, gen_kwargs: dict[str, Any]) -> list[DescribeResult]:
        """One description (or failure) per image: the authors' ``[image, prompt]`` understanding
        call, ``batch_size`` images at a time (each text the one it gets alone)."""
        max_length, temperature, until = plain_decoding(gen_kwargs or {}, self.temperature, self.max_new_tokens)

        def call(chunk: list[Image.Image]) -> list[str]:
            return [cut(text, until) for text in self.describe_many(chunk, prompt, max_length, temperature)]

        return self._isolated(call, images, "describe")

    def describe_one(self, image: Image.Image, prompt: str, max_length: int, temperature: float = 0.0,
                     on_logits: Any = None) -> str:
        """The text the authors' ``gen_text`` returns for ``image`` then ``prompt``."""
        seen = None if on_logits is None else (lambda _, logits: on_logits(logits))
        return self.describe_many([image], prompt, max_length, temperature, seen)[0]

    def describe_many(self, images: Sequence[Image.Image], prompt: str, max_length: int, temperature: float = 0.0,
                      on_logits: Any = None) -> list[str]:
        """:meth:`describe_one` for every image at once: one prefill of the images, one of the
        prompt, then one pass per decoding step over the unfinished descriptions
        (``on_logits(index, logits)`` sees every step's logits)."""
        torch = self._torch
        from .network import Batch

        def pick(logits):
            if temperature == 0:
                return logits.argmax(dim=-1).tolist()
            return torch.multinomial(torch.softmax(logits.float() / temperature, dim=-1), 1)[:, 0].tolist()

        net, ids = self.network, self.tokenizer.encode(prompt.strip())
        with torch.inference_mode():
            batch = net.add_images(Batch.empty(len(images)), images, self.special)
            batch = net.add_texts(batch, [ids] * len(images), self.special)
            out = net.generate_texts(batch, self.special, [max_length] * len(images), pick, on_logits)
        return [self.decode_text(ids) for ids in out]

    def decode_text(self, ids: list[int]) -> str:
        """As gen_text: decode from the start token, keep what lies before ``<|im_end|>``."""
        text = self.tokenizer.decode([self.special.bos, *ids], clean_up_tokenization_spaces=False)
        # transformers 4.49.0 (their pin) cleans where the config asks (Qwen2Tokenizer's default: off)
        text = authors_text(text, self.tokenizer.init_kwargs, default=False)
        return text.split("<|im_end|>")[0].split("<|im_start|>")[1]

    # -- drawing ---------------------------------------------------------------

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GenerationResult]:
        """One image (or failure) per prompt, ``batch_size`` prompts drawn together; each depends on
        its own prompt and seed only."""
        def call(chunk: list[tuple[str, int]]) -> list[GenerationResult]:
            size = (self.image_size, self.image_size)
            drawn = self.draw_many([p for p, _ in chunk], [s for _, s in chunk], [size] * len(chunk))
            return [check_image(image, False) for _, image in drawn]

        return self._isolated(call, self._seeded(prompts, seeds), "generate")

    def draw_one(self, prompt: str, seed: int, height: int, width: int, flow: Any = None) -> tuple[Any, Image.Image]:
        """The latent tokens and the image of the authors' text-to-image call at ``seed``."""
        return self.draw_many([prompt], [seed], [(height, width)], flow)[0]

    def draw_many(self, prompts: Sequence[str], seeds: Sequence[int], sizes: Sequence[tuple[int, int]],
                  flow: Any = None) -> list[tuple[Any, Image.Image]]:
        """:meth:`draw_one` for every prompt at once (``sizes``: (height, width) each): every flow
        step advances all latents in one pass per guidance context; each noise from its own seed."""
        torch = self._torch
        from .autoencoder import decode_latents
        from .network import Batch

        net = self.network
        noises = [torch.randn(((h // net.latent_downsample) * (w // net.latent_downsample),
                               net.patch * net.patch * net.latent_channels), generator=torch.Generator().manual_seed(s))
                  for s, (h, w) in zip(seeds, sizes)]
        with torch.inference_mode():
            texts = [self.tokenizer.encode(p.strip()) for p in prompts]  # as lmms-eval strips
            cond = net.add_texts(Batch.empty(len(prompts)), texts, self.special)
            # text guidance's context lacks the prompt; image guidance's holds it, as the conditional one
            contexts = {"cond": cond, "text": Batch.empty(len(prompts)), "image": cond}
            tokens = net.draw_many(contexts, sizes, noises, flow or self.flow, self.special)
            maps = [net.unpatchify(t, h, w) for t, (h, w) in zip(tokens, sizes)]
            pixels: list[Any] = [None] * len(maps)
            for size in dict.fromkeys(sizes):  # one decoder pass per image size
                rows = [i for i, s in enumerate(sizes) if s == size]
                for i, p in zip(rows, decode_latents(self.vae, torch.cat([maps[i] for i in rows]))):
                    pixels[i] = p
        # the inferencer's conversion: [-1, 1] to [0, 255], truncated to uint8
        arrays = [((p.float() * 0.5 + 0.5).clamp(0, 1).permute(1, 2, 0) * 255).to(torch.uint8).cpu().numpy()
                  for p in pixels]
        return [(t, Image.fromarray(a)) for t, a in zip(tokens, arrays)]
