"""The text-to-image generator interface shared by every backend."""

from __future__ import annotations

from typing import Protocol, Sequence, Union, runtime_checkable

from PIL import Image

from ..core.errors import ActionableError, from_exception
from ..core.failures import GenerationFailure, GeneratorConfigError


GenerationResult = Union[Image.Image, GenerationFailure]


def config_failure(exc: GeneratorConfigError, name: str, prefix: str = "generator.") -> ActionableError:
    """The one line that ends an lmms-eval run whose generator ``name`` cannot work
    (an ``Exception`` would be caught by lmms-eval, printed and exit 0)."""
    fix = getattr(exc, "fix", "") or f"check the {prefix}<arg> values of --model_args and rerun"
    return from_exception(exc, f"the generator {name} cannot work", fix)


@runtime_checkable
class Generator(Protocol):
    """A batch of prompts and seeds in, one image (or failure) per prompt out.

    ``name`` identifies the backend *and* the settings that change its output;
    the artifact store keys cached images by it, so two generators that can
    draw different pictures for the same prompt and seed must differ in name.
    """

    name: str
    batch_size: int

    def generate(
        self, prompts: Sequence[str], seeds: Sequence[int]
    ) -> list[GenerationResult]: ...
