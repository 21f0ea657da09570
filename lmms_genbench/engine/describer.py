"""Drive any lmms-eval model as a describer: a batch of images in, texts out."""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from PIL import Image

from .. import host
from ..generators.base import GenerationFailure

# the describer's own task name in the model's logs (see lmms_genbench.host)
_TASK = "lmms_genbench_describe"
_SPLIT = "step"

DescribeResult = str | GenerationFailure


class Describer(Protocol):
    """Images and one prompt in, one text (or failure) per image out."""

    name: str

    def describe(
        self, images: Sequence[Image.Image], prompt: str, gen_kwargs: dict[str, Any]
    ) -> list[DescribeResult]: ...


class LmmsDescriber:
    """Adapter from an lmms-eval model instance (simple or chat API): one
    request per image, all sharing the prompt, in one call."""

    def __init__(self, lm, name: str) -> None:
        self.lm = lm
        self.name = name

    def describe(self, images, prompt, gen_kwargs):
        try:
            texts = host.generate(self.lm, [(prompt, gen_kwargs, [image]) for image in images],
                                  task=_TASK, split=_SPLIT, quiet=True)  # the engine shows progress
        except Exception as exc:
            if len(images) == 1:
                return [GenerationFailure(f"describer error: {type(exc).__name__}: {exc}")]
            # isolate the bad input instead of failing the whole batch
            return [r for img in images for r in self.describe([img], prompt, gen_kwargs)]
        return [t if isinstance(t, str) else GenerationFailure(f"describer returned {type(t).__name__}") for t in texts]
