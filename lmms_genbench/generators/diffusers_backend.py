"""Text-to-image with any Hugging Face ``diffusers`` pipeline.

``torch`` and ``diffusers`` are imported when a generator is built, not when
this module is imported, so listing backends stays cheap.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..core.deps import require
from ..core.args import ArgumentError, as_choice, as_float, as_int, as_str
from ..core.keys import generator_name
from .base import GenerationFailure, GenerationResult
from .common import DTYPES, check_device, check_image, describe_error, resolve_dtype

logger = logging.getLogger(__name__)


class DiffusersGenerator:
    """Generate images with a ``diffusers`` text-to-image pipeline.

    Args:
        pretrained: Hub id or local folder for
            ``diffusers.AutoPipelineForText2Image.from_pretrained``. When
            ``pipeline`` is given nothing is loaded and ``pretrained`` only names
            that pipeline (in :attr:`name`); pass it so the cache key says
            which weights made the images.
        pipeline: An already-built pipeline, used as-is (it is not moved or
            cast; put it on ``device`` yourself). Any callable that takes
            ``prompt=[...]``, ``generator=[...]`` and returns an object with
            ``.images`` works, which is how tests inject fakes.
        dtype: Weight dtype when loading: ``auto`` picks bfloat16 on CUDA
            devices that support it, else float16 on CUDA/MPS, else float32.
            With ``pipeline`` it must be ``auto`` or that pipeline's dtype.
        device: torch device, e.g. ``cuda``, ``cuda:1``, ``mps`` or ``cpu``.
            Asking for an accelerator that is not there raises instead of
            silently running (very slowly) on the CPU.
        steps: ``num_inference_steps``; ``None`` keeps the pipeline's default.
        guidance: ``guidance_scale``; ``None`` keeps the pipeline's default.
        width: Image width in pixels (multiple of 8); ``None``: the default.
        height: Image height in pixels (multiple of 8); ``None``: the default.
        batch_size: Prompts per pipeline call.
        negative_prompt: Negative prompt applied to every prompt, or ``None``.

    Each prompt gets its own ``torch.Generator(device).manual_seed(seed)``, so
    its image depends on its own seed and not on its neighbours in the batch
    (up to the small numeric differences batching causes on GPUs).
    """

    def __init__(
        self,
        pretrained: str | None = None,
        pipeline: Any = None,
        dtype: str = "auto",
        device: str = "cuda",
        steps: int | None = None,
        guidance: float | None = None,
        width: int | None = None,
        height: int | None = None,
        batch_size: int = 4,
        negative_prompt: str | None = None,
    ) -> None:
        # Validate everything before importing torch or loading gigabytes.
        self.pretrained = as_str("pretrained", pretrained, optional=True)
        if pipeline is None and self.pretrained is None:
            raise ArgumentError(
                "pretrained: expected a diffusers pipeline id or local path "
                "(or pass pipeline=); got None"
            )
        dtype_choice = as_choice("dtype", dtype, DTYPES)
        self.device = str(as_str("device", device))
        self.steps = as_int("steps", steps, minimum=1, optional=True)
        self.guidance = as_float("guidance", guidance, minimum=0.0, optional=True)
        self.width = _pixels("width", width)
        self.height = _pixels("height", height)
        self.batch_size = int(as_int("batch_size", batch_size, minimum=1))  # type: ignore[arg-type]
        self.negative_prompt = as_str("negative_prompt", negative_prompt, optional=True)

        self._torch = require("torch", "the diffusers generator")
        torch_device = check_device(self._torch, self.device)
        self.dtype = resolve_dtype(self._torch, dtype_choice, torch_device, pipeline)

        if pipeline is None:
            pipeline = _load_pipeline(self.pretrained, self.dtype, self.device)  # type: ignore[arg-type]
        if hasattr(pipeline, "set_progress_bar_config"):
            # A tqdm bar per batch drowns the harness's own progress output.
            pipeline.set_progress_bar_config(disable=True)
        self.pipeline = pipeline

        label = self.pretrained or type(pipeline).__name__
        self.name = generator_name(
            "diffusers",
            label,
            {
                "pretrained": label,
                "steps": self.steps,
                "guidance": self.guidance,
                "width": self.width,
                "height": self.height,
                "dtype": self.dtype,
                "negative_prompt": self.negative_prompt,
                # The seeded noise comes from this device's RNG, which differs
                # between CPU and CUDA for the same seed.
                "device": torch_device.type,
            },
        )

    def __repr__(self) -> str:
        return f"DiffusersGenerator(name={self.name!r}, device={self.device!r})"

    def generate(
        self, prompts: Sequence[str], seeds: Sequence[int]
    ) -> list[GenerationResult]:
        """One image or :class:`GenerationFailure` per prompt, in order."""
        prompts, seeds = list(prompts), [int(s) for s in seeds]
        if len(prompts) != len(seeds):
            raise ValueError(
                f"generate: expected one seed per prompt; got {len(prompts)} "
                f"prompts and {len(seeds)} seeds"
            )
        results: list[GenerationResult] = []
        for start in range(0, len(prompts), self.batch_size):
            stop = start + self.batch_size
            results.extend(self._generate_chunk(prompts[start:stop], seeds[start:stop]))
        return results

    def _generate_chunk(
        self, prompts: list[str], seeds: list[int]
    ) -> list[GenerationResult]:
        try:
            return self._call(prompts, seeds)
        except Exception as exc:  # noqa: BLE001 - any pipeline error is isolated
            if len(prompts) == 1:
                logger.warning("diffusers: prompt failed: %s", describe_error(exc))
                return [GenerationFailure(f"pipeline raised {describe_error(exc)}")]
            logger.warning(
                "diffusers: batch of %d failed (%s); retrying prompts one by one",
                len(prompts),
                describe_error(exc),
            )
            self._free_accelerator_memory()
        # Retrying singly pins the failure on the prompt that causes it (and
        # gets past an out-of-memory batch) instead of failing the whole chunk.
        results: list[GenerationResult] = []
        for prompt, seed in zip(prompts, seeds):
            results.extend(self._generate_chunk([prompt], [seed]))
        return results

    def _call(self, prompts: list[str], seeds: list[int]) -> list[GenerationResult]:
        torch = self._torch
        kwargs: dict[str, Any] = {
            "prompt": prompts,
            "generator": [torch.Generator(self.device).manual_seed(s) for s in seeds],
            "output_type": "pil",
        }
        optional = {
            "num_inference_steps": self.steps,
            "guidance_scale": self.guidance,
            "width": self.width,
            "height": self.height,
        }
        kwargs.update({k: v for k, v in optional.items() if v is not None})
        if self.negative_prompt is not None:
            kwargs["negative_prompt"] = [self.negative_prompt] * len(prompts)

        output = self.pipeline(**kwargs)
        images = output.images if hasattr(output, "images") else output[0]
        if len(images) != len(prompts):
            raise RuntimeError(
                f"pipeline returned {len(images)} images for {len(prompts)} prompts"
            )
        flags = getattr(output, "nsfw_content_detected", None) or [False] * len(images)
        return [check_image(image, bool(flag)) for image, flag in zip(images, flags)]

    def _free_accelerator_memory(self) -> None:
        # After an out-of-memory error the cached blocks would make the
        # single-prompt retries fail too.
        cuda = getattr(self._torch, "cuda", None)
        if cuda is not None and cuda.is_available():
            cuda.empty_cache()


def _pixels(arg: str, value: Any) -> int | None:
    pixels = as_int(arg, value, minimum=8, optional=True)
    if pixels is not None and pixels % 8:
        raise ArgumentError(f"{arg}: expected a multiple of 8 or none; got {value!r}")
    return pixels


def _load_pipeline(pretrained: str, dtype: str, device: str) -> Any:
    diffusers = require("diffusers", "the diffusers generator")
    torch = require("torch", "the diffusers generator")
    pipeline = diffusers.AutoPipelineForText2Image.from_pretrained(
        pretrained, torch_dtype=getattr(torch, dtype)
    )
    return pipeline.to(device)
