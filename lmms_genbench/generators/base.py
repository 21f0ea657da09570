"""The text-to-image generator interface shared by every backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, Union, runtime_checkable

from PIL import Image

from ..core.errors import ActionableError, from_exception


@dataclass(frozen=True)
class GenerationFailure:
    """A prompt the backend could not turn into an image, with the reason.

    Returned in place of an image so one bad prompt never sinks its batch.
    """

    reason: str


GenerationResult = Union[Image.Image, GenerationFailure]


class GeneratorConfigError(RuntimeError):
    """The backend cannot work at all (bad key, no quota, unknown model).

    Raised rather than returned per prompt: the engine stops the run instead
    of failing every doc, and of paying for descriptions nobody will draw.
    ``fix``: what the user should change, shown in the run's last line
    (:func:`config_failure`).
    """

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.fix = fix


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
