"""VILA-U (MIT Han lab) as a unified model, on transformers' LLaMA and our RQ-VAE tower.

    lmms-eval --model cycle --model_args unified=vila_u,\\
    unified.pretrained=mit-han-lab/vila-u-7b-256,unified.device=cuda,unified.dtype=bfloat16 \\
        --tasks sdp_nocaps

Describing is VILA-U's understanding mode: the image's quantised tower features, projected,
stand where ``<image>`` is in a ``vicuna_v1`` turn, and the LLaMA writes the answer. Drawing is
its generation mode: after ``<im_start>`` the LLaMA's hidden state at each of the image's
positions feeds the depth transformer, which draws that position's residual codes one level at
a time under classifier-free guidance; the summed code embeddings, projected, are the LLaMA's
next input; the RQ-VAE decoder turns the code map into pixels. ``torch`` and ``transformers``
are imported when the model is built; :meth:`VilaUUnified.plan` names it without weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PIL import Image

from ....core.deps import require
from ....core.failures import GeneratorConfigError
from ...base import GenerationResult
from ...common import check_image, describe_error
from ..arguments import FRACTION, Arg, Arguments, runtime
from ..base import DescribeResult
from ..common import UnifiedCommon, cut, hf_decoding

#: where the authors' depth transformer samples each code
DEPTH_SAMPLER = "`RQTransformer.generate` in `rqtransformer/modeling_rqtransformer.py`"


class VilaUUnified(UnifiedCommon):
    """VILA-U checkpoints in the authors' layout (``config.json``, ``llm/``, ``vision_tower/``,
    ``mm_projector/``), from a hub id or a local folder.

    Args: see ``ARGUMENTS``.

    Seeds: each prompt's codes are drawn from its own ``torch.Generator(seed)`` on the CPU as
    ``torch.multinomial`` draws (``argmax(p / E)``, ``E ~ Exp(1)``), and the generator is advanced
    exactly as the authors' code advances torch's global one for a single prompt (one draw per
    code, and one for the language-model token their loop samples and discards at each
    position). So on a CPU an image equals the authors' ``generate_image_content(prompt,
    generation_nums=1)`` after ``torch.manual_seed(seed)``, and prompts batch freely.
    """

    concurrent = False  # one network on one device: describe and draw in turn

    ARGUMENTS = Arguments("vila_u", (
        Arg("pretrained", str, "mit-han-lab/vila-u-7b-256", "hub id or folder", source="the paper's 256 px model",
            key=None),
        *runtime("auto", 4, "the authors' loader defaults to bfloat16 (`auto` on CUDA)"),
        Arg("guidance_scale", float, 3.0, "classifier-free guidance of the image codes",
            source="inference.py `--cfg`, `generate_image_content(cfg=3.0)`"),
        Arg("image_temperature", float, 1.0, "sampling temperature of each code; 0 takes the best code",
            source=DEPTH_SAMPLER),
        Arg("image_top_k", int, 900, "top-k of each code's sampling", source=DEPTH_SAMPLER),
        Arg("image_top_p", float, 0.96, "top-p of each code's sampling", source=DEPTH_SAMPLER, rules=(FRACTION,)),
        Arg("temperature", float, 0.9, "describing temperature where the task sets none; 0 is greedy",
            source="inference.py's understanding defaults"),
        Arg("top_p", float, 0.6, "describing top-p where the task sets none", source="inference.py's understanding "
            "defaults", rules=(FRACTION,)),
        Arg("max_new_tokens", int, 512, "description length limit where the task sets none", source="ours: the "
            "authors set none (`default_generation_config` caps the whole sequence at the tokenizer's "
            "`model_max_length`)"),
    ))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._check(*args, **kwargs)
        torch = self._torch
        transformers = require("transformers", "the vila_u unified model")
        from . import checkpoint
        from .tokenizer import LlamaSlowTokenizer

        try:
            folder = checkpoint.resolve_folder(self.pretrained)
            config = checkpoint.read_config(folder)
            llm_folder = checkpoint.part_folder(folder, config, "llm")
            self.tokenizer = LlamaSlowTokenizer(llm_folder)
            llm = transformers.LlamaForCausalLM.from_pretrained(str(llm_folder), dtype=getattr(torch, self.dtype))
            tower, depth, vision_config = checkpoint.load_vision(folder, config)
            config.setdefault("hidden_size", llm.config.hidden_size)
            config.setdefault("mm_hidden_size", vision_config.hidden_size)
            projector = checkpoint.load_projector(folder, config)
            self.image_start = self.tokenizer.piece_id("<im_start>")  # generation mode's cue
        except Exception as exc:  # no such folder or hub id, not a VILA-U checkpoint, ...
            raise GeneratorConfigError(
                f"unified.pretrained: cannot load a VILA-U checkpoint from {self.pretrained!r}: {describe_error(exc)}"
            ) from exc
        self.aspect = str(config.get("image_aspect_ratio") or "resize")
        if self.aspect not in ("resize", "pad"):
            raise GeneratorConfigError(f"unified.pretrained: image_aspect_ratio {self.aspect!r} is not "
                                       "'resize' or 'pad', the two the authors' preprocessing knows")
        dtype_ = getattr(torch, self.dtype)
        self.llm = llm.to(self._device, dtype_).eval()
        self.tower = tower.to(self._device, dtype_).eval()
        self.depth = depth.to(self._device, dtype_).eval()
        self.projector = projector.to(self._device, dtype_).eval()
        self.vision_size = int(vision_config.image_size)
        self.grid = self.vision_size // int(vision_config.patch_size)
        self.image_tokens = self.grid ** 2  # 256 for the 256 px checkpoint
        latent_side = tower.decoder_latent_shape[0] if tower.decoder_latent_shape else self.grid
        self.image_size = latent_side * 2 ** (len(tower.decoder.up) - 1)
        generation = llm.generation_config
        eos = generation.eos_token_id if generation.eos_token_id is not None else self.tokenizer.eos_token_id
        self.eos_ids = [eos] if isinstance(eos, int) else list(eos)
        self.pad_id = generation.pad_token_id if generation.pad_token_id is not None else 0

    # -- understanding ---------------------------------------------------------

    def pixels(self, images: Sequence[Image.Image]):
        """The tower's input (B, 3, S, S) for ``images``, in the model's dtype."""
        import numpy as np

        from .inputs import pixel_array

        arrays = np.stack([pixel_array(image, self.vision_size, self.aspect) for image in images])
        return self._torch.from_numpy(arrays).to(self._device, getattr(self._torch, self.dtype))

    def prompt_embeds(self, images: Sequence[Image.Image], question: str):
        """Input embeddings (B, L, width) of ``question`` about each image: the text's embeddings
        with the image's projected tower features in place of ``<image>``."""
        from .inputs import IMAGE_MARKER, describe_prompt, token_ids

        torch = self._torch
        ids = torch.tensor(token_ids(describe_prompt(question), self.tokenizer), device=self._device)
        at = int((ids == IMAGE_MARKER).nonzero()[0, 0])
        features, _ = self.tower.encode(self.pixels(images))
        image = self.projector(features)
        text = self.llm.get_input_embeddings()(ids.clamp(min=0)).unsqueeze(0).expand(len(images), -1, -1)
        return torch.cat([text[:, :at], image, text[:, at + 1:]], dim=1)

    def describe(self, images: Sequence[Image.Image], prompt: str, gen_kwargs: dict[str, Any]) -> list[DescribeResult]:
        """One description (or failure) per image, with the task's decoding settings."""
        settings, until = self._decoding(gen_kwargs or {})

        def call(chunk: list[Image.Image]) -> list[str]:
            with self._torch.inference_mode():
                embeds = self.prompt_embeds(chunk, prompt)
                mask = self._torch.ones(embeds.shape[:2], dtype=self._torch.long, device=self._device)
                out = self.llm.generate(inputs_embeds=embeds, attention_mask=mask, eos_token_id=self.eos_ids,
                                        pad_token_id=self.pad_id, **settings)
            return [cut(self.tokenizer.decode(row.tolist()).strip(), until) for row in out]

        return self._isolated(call, images, "describe")

    def _decoding(self, gen_kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The task's ``generation_kwargs`` as ``generate`` arguments (top_p the model's where the
        task sets none), plus its stop strings."""
        settings, until = hf_decoding(gen_kwargs, self.temperature, self.max_new_tokens, self.top_p)
        if not settings["do_sample"]:  # the checkpoint's generation_config.json samples; greedy must say so
            settings.update(temperature=None, top_p=None, top_k=None)
        return settings, until

    # -- generation --------------------------------------------------------------

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GenerationResult]:
        """One image (or failure) per prompt; each depends on its own prompt and seed only."""
        return self._isolated(self._draw, self._seeded(prompts, seeds), "generate")

    def _draw(self, chunk: list[tuple[str, int]]) -> list[GenerationResult]:
        torch = self._torch
        with torch.inference_mode():
            codes = self.image_codes([p for p, _ in chunk], [s for _, s in chunk])
            pixels = self.decode_codes(codes)
        arrays = pixels.permute(0, 2, 3, 1).to(torch.uint8).cpu().numpy()  # truncated, as the authors save
        return [check_image(Image.fromarray(a), False) for a in arrays]

    def image_codes(self, prompts: list[str], seeds: list[int]):
        """The codes (n, positions, depth) of one image per prompt."""
        from .generation import draw_codes

        return draw_codes(self, prompts, seeds)

    def decode_codes(self, codes):
        """Pixels in [0, 255] (n, 3, H, W), float32, of codes (n, positions, depth)."""
        latent = self.tower.quantizer.embed(codes).cumsum(dim=-2)[..., -1, :]
        latent = latent.reshape(codes.shape[0], self.grid, self.grid, -1)
        return self.tower.decode(latent).float().add(1).mul(127.5).clamp(0, 255)
