"""The ``smoke`` generator backend: the tiny random-weight Stable Diffusion
pipeline of :mod:`lmms_genbench.smoke.diffusion` behind :class:`DiffusersGenerator`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.deps import require
from ..core.args import ArgumentError, as_float, as_int, as_str
from ..smoke.diffusion import MAX_TOKENS, build_tiny_pipeline
from .base import GenerationResult
from .common import check_device
from .diffusers_backend import DiffusersGenerator
from .lazy import GeneratorPlan


class SmokeGenerator:
    """A deterministic tiny Stable Diffusion pipeline with random weights.

    Args:
        seed: Seeds the weights; the same seed always builds the same network.
        size: Width and height of the images in pixels (multiple of 8).
        steps: Denoising steps.
        guidance: Classifier-free guidance scale; 1.0 or less skips the
            unconditional pass, halving the work.
        batch_size: Prompts per pipeline call.
        device: torch device; ``cpu`` by default since the network is tiny.
    """

    def __init__(
        self,
        seed: int = 0,
        size: int = 64,
        steps: int = 2,
        guidance: float = 1.0,
        batch_size: int = 8,
        device: str = "cpu",
    ) -> None:
        self._check(seed, size, steps, guidance, batch_size, device)
        pipeline = build_tiny_pipeline(self.seed).to(self.device)
        # DiffusersGenerator owns the batching, seeding and failure handling.
        self._inner = DiffusersGenerator(
            pretrained=f"smoke-seed{self.seed}",
            pipeline=pipeline,
            dtype="float32",
            device=self.device,
            steps=self.steps,
            guidance=self.guidance,
            width=self.size,
            height=self.size,
            batch_size=self.batch_size,
        )

    @classmethod
    def plan(cls, seed: int = 0, size: int = 64, steps: int = 2, guidance: float = 1.0, batch_size: int = 8,
             device: str = "cpu") -> GeneratorPlan:
        """Name and batch size, every argument checked, nothing built (:mod:`.lazy`)."""
        probe = cls.__new__(cls)
        probe._check(seed, size, steps, guidance, batch_size, device)
        return GeneratorPlan(probe.name, probe.batch_size)

    def _check(self, seed, size, steps, guidance, batch_size, device) -> None:
        self.seed = int(as_int("seed", seed, minimum=0))  # type: ignore[arg-type]
        self.size = int(as_int("size", size, minimum=8))  # type: ignore[arg-type]
        if self.size % 8:
            raise ArgumentError(f"size: expected a multiple of 8; got {size!r}")
        self.steps = int(as_int("steps", steps, minimum=1))  # type: ignore[arg-type]
        self.guidance = float(as_float("guidance", guidance, minimum=0.0))  # type: ignore[arg-type]
        self.batch_size = int(as_int("batch_size", batch_size, minimum=1))  # type: ignore[arg-type]
        self.device = str(as_str("device", device))

        # Fail on a missing accelerator before building anything.
        check_device(require("torch", "the smoke generator"), self.device)
        device_type = self.device.split(":")[0]
        self.name = (
            f"smoke-s{self.seed}-{self.size}px-{self.steps}st-"
            f"g{self.guidance:g}-t{MAX_TOKENS}-{device_type}"
        )

    def __repr__(self) -> str:
        return f"SmokeGenerator(name={self.name!r})"

    @property
    def text_budget(self) -> dict[str, int]:
        return self._inner.text_budget

    def text_cuts(self, prompts: Sequence[str]) -> list[dict[str, int]]:
        """See :meth:`DiffusersGenerator.text_cuts`."""
        return self._inner.text_cuts(prompts)

    def generate(
        self, prompts: Sequence[str], seeds: Sequence[int]
    ) -> list[GenerationResult]:
        """One image per prompt; see :meth:`DiffusersGenerator.generate`."""
        return self._inner.generate(prompts, seeds)
