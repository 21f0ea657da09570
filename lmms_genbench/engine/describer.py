"""Drive any lmms-eval model as a describer: a batch of images in, texts out."""

from __future__ import annotations

import threading
from typing import Any, Callable, Protocol, Sequence

from PIL import Image

from .. import host
from ..core.failures import GenerationFailure

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


class LazyDescriber:
    """A describer built by ``build()`` on its first :meth:`describe` call (thread-safe), so a
    run whose every hop is stored never loads the model (a vLLM engine takes tens of seconds
    to start). ``name`` keys the store and is known without the model."""

    #: names the same describer had in stores written before its weights were part of its name
    legacy_names: tuple[str, ...] = ()

    def __init__(self, name: str, build: Callable[[], Any]) -> None:
        self.name = name
        self._build = build
        self._lock = threading.Lock()
        self.loaded: Any = None

    def load(self):
        with self._lock:
            if self.loaded is None:
                self.loaded = self._build()
            return self.loaded

    @property
    def lm(self):
        """The lmms-eval model instance, loaded if it was not yet."""
        return self.load().lm

    def describe(self, images, prompt, gen_kwargs):
        return self.load().describe(images, prompt, gen_kwargs)
