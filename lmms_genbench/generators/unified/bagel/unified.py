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

from ....core.failures import GeneratorConfigError
from ...base import GenerationResult
from ...common import check_image, describe_error
from ..arguments import Arg, Arguments, Preset, Rule, runtime
from ..base import DescribeResult
from ..common import UnifiedCommon, authors_text, cut, plain_decoding

__all__ = ["BagelUnified"]

RENORM_TYPES = ("global", "channel", "text_channel")
#: the largest side the latent position table covers: max_latent_size 64 x 16 pixels per token
MAX_IMAGE_SIZE = 64 * 16
NOTEBOOK = "inference.ipynb's text-to-image cell"


class BagelUnified(UnifiedCommon):
    """BAGEL checkpoints as the authors publish them (``ByteDance-Seed/BAGEL-7B-MoT``).

    Args: see ``ARGUMENTS``.

    Seeds: each drawing's starting noise comes from its own ``torch.Generator(seed)`` on the CPU
    (the same numbers as ``torch.manual_seed(seed); torch.randn(...)`` before the authors' call), so
    an image depends on its prompt and seed only.
    """

    concurrent = False  # one network on one device: describe and draw in turn
    ARGUMENTS = Arguments("bagel", (
        Arg("pretrained", str, None, "hub id or local folder holding ``llm_config.json``, ``vit_config.json``, "
            "``ema.safetensors``, ``ae.safetensors`` and the tokenizer files", key=None),
        *runtime("auto", 1, "the authors run bfloat16 (`auto` on CUDA)"),
        Arg("image_size", int, 1024, "side of the drawn square image", source="inferencer.py's `image_shapes`",
            minimum=16, rules=(Rule(lambda size: size % 16 == 0 and size <= MAX_IMAGE_SIZE, "expected a multiple of "
                                    f"16 up to {MAX_IMAGE_SIZE} (BAGEL's latent grid is at most 64 tokens of 16 px a "
                                    "side); got {given!r}"),)),
        Arg("num_timesteps", int, 50, "flow steps", source=NOTEBOOK, minimum=2),
        Arg("cfg_text_scale", float, 4.0, "text guidance; 1 turns guidance off", source=NOTEBOOK),
        Arg("cfg_img_scale", float, 1.0, "image guidance (1 is off); for text-to-image its context holds the prompt "
            "too", source=NOTEBOOK),
        Arg("cfg_interval_start", float, 0.4, "guidance applies where start < t <= end", source=NOTEBOOK, key=None),
        Arg("cfg_interval_end", float, 1.0, "guidance applies where start < t <= end", source=NOTEBOOK, key=None),
        Arg("timestep_shift", float, 3.0, "the schedule's shift t' = s t / (1 + (s - 1) t)", source=NOTEBOOK),
        Arg("cfg_renorm_min", float, 0.0, "lower clamp of the guidance renormalisation; 1.0 disables it",
            source=NOTEBOOK),
        Arg("cfg_renorm_type", "choice", "global", "one norm per image (``global``), per token (``channel``) or "
            "per token of the text condition only (``text_channel``)", source=NOTEBOOK, choices=RENORM_TYPES),
        Arg("max_new_tokens", int, 1000, "the authors' ``max_think_token_n`` where the task sets none; as their "
            "loop, at most this many minus one tokens", source="inference.ipynb and lmms-eval's bagel "
            "(`max_think_token_n`)"),
        Arg("temperature", float, 0.0, "describing temperature where the task sets none (0: greedy)",
            source="`do_sample=False`"),
    ), presets=(
        Preset("notebook", {}, "inference.ipynb's text-to-image cell"),
        Preset("app", {"cfg_img_scale": 1.5, "max_new_tokens": 512},
               "app.py: its `text_to_image` leaves the inferencer's `cfg_img_scale=1.5` in place; its "
               "`image_understanding` passes `max_new_tokens=512` as `max_think_token_n`"),
        Preset("lmms_eval", {"cfg_renorm_min": 1.0}, "lmms-eval 0.7.3's `bagel_umm` class "
               "(models/simple/bagel.py), `BASE_PARAMS['generate']`"),
        Preset("inferencer", {"cfg_text_scale": 3.0, "cfg_img_scale": 1.5},
               "inferencer.py's `interleave_inference` defaults"),
    ))
    #: the constructor's defaults (from_parts starts from them; tests read them)
    _DEFAULTS: ClassVar[dict[str, Any]] = ARGUMENTS.defaults

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._check(*args, **kwargs)
        try:
            self._load()
        except Exception as exc:  # no such folder or hub id, not a BAGEL checkpoint, ...
            raise GeneratorConfigError(
                f"unified.pretrained: cannot load a BAGEL checkpoint from {self.pretrained!r}: {describe_error(exc)}"
            ) from exc

    @classmethod
    def from_parts(cls, network: Any, vae: Any, tokenizer: Any, label: str = "random", **kwargs: Any) -> BagelUnified:
        """An instance around modules already built (``loading.random_real_size`` for a GPU check);
        ``kwargs`` as the constructor's, ``label`` names it."""
        from .loading import special_ids
        from .network import FlowSettings

        self = cls.__new__(cls)
        self._check(**{**kwargs, "pretrained": label})
        self.network, self.vae, self.tokenizer, self.special = network, vae, tokenizer, special_ids(tokenizer)
        self.flow = FlowSettings(self.cfg_text_scale, self.cfg_img_scale, self.cfg_interval, self.timestep_shift,
                                 self.num_timesteps, self.cfg_renorm_min, self.cfg_renorm_type)
        return self

    def _settings(self, values: dict[str, Any]) -> dict[str, Any]:
        # the interval is named as one setting, as it always was
        self.cfg_interval = (values["cfg_interval_start"], values["cfg_interval_end"])
        return {**super()._settings(values), "cfg_interval": list(self.cfg_interval)}

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
