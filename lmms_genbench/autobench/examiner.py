"""The examiner: any lmms-eval model driven as "prompt (+ images) -> text".

:class:`LmmsExaminer` sends one request per call through
:mod:`lmms_genbench.host` (simple and chat models), with the image optional.
:class:`CachedExaminer` puts every call through the on-disk cache.
Tests inject any object with ``name`` and ``generate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from PIL import Image

from .. import host
from .cache import CallCache, image_hash

# the examiner's own task name in the model's logs (see lmms_genbench.host)
_TASK = "lmms_genbench_autobench"
_SPLIT = "examiner"
TEXT_ONLY_MODES = ("none", "blank")


class Examiner(Protocol):
    name: str

    def generate(self, prompt: str, images: Sequence[Image.Image] = (), gen_kwargs: dict | None = None) -> str: ...


class LmmsExaminer:
    """Adapter from an lmms-eval model instance.

    Args:
        lm: the model instance.
        name: identifies the model and the arguments that change its output.
        text_only: ``none`` sends text-only prompts without an image; ``blank``
            sends a plain white 64x64 image with them, for model classes that
            cannot run without one (lmms-eval 0.7.3's ``llava_hf``).
    """

    def __init__(self, lm, name: str, text_only: str = "none") -> None:
        if text_only not in TEXT_ONLY_MODES:
            raise ValueError(f"text_only: expected one of {TEXT_ONLY_MODES}; got {text_only!r}")
        self.lm = lm
        self.name = name
        self.text_only = text_only

    def generate(self, prompt, images=(), gen_kwargs=None) -> str:
        images = list(images)
        if not images and self.text_only == "blank":
            images = [Image.new("RGB", (64, 64), "white")]
        (text,) = host.generate(self.lm, [(prompt, gen_kwargs, images)], task=_TASK, split=_SPLIT)
        if not isinstance(text, str):
            raise TypeError(f"examiner returned {type(text).__name__}, not text")
        return text


def parse_model_args(text: str | None) -> dict[str, Any]:
    """``"a=1,b=x"`` -> ``{"a": "1", "b": "x"}`` (lmms-eval's --model_args form)."""
    out: dict[str, Any] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"examiner args: expected key=value pairs separated by commas; got {part!r}")
        out[key.strip()] = value.strip()
    return out


def build_examiner(model: str, args: dict[str, Any], text_only: str = "none") -> LmmsExaminer:
    """Instantiate the registered lmms-eval model ``model`` with ``args``."""
    lm = host.build_model(model, args, role="examiner", prefix="--examiner-args ")
    return LmmsExaminer(lm, host.model_identity(model, args), text_only)


class CachedExaminer:
    """Every call looked up in, or written to, a :class:`CallCache`.

    ``calls`` counts calls actually made (not served from the cache).
    """

    def __init__(self, inner: Examiner, cache: CallCache, gen_kwargs: dict | None = None) -> None:
        self.inner = inner
        self.cache = cache
        self.gen_kwargs = dict(gen_kwargs or {})
        self.name = inner.name
        self.calls = 0

    def __call__(self, prompt: str, images: Sequence[Image.Image] = (), purpose: str = "",
                 salt: str = "") -> str:
        """``salt`` separates calls that share a prompt but must not share an answer
        (two descriptions of one aspect asked the same way)."""
        key = self.cache.key(model=self.name, prompt=prompt, images=[image_hash(i) for i in images],
                             settings=self.gen_kwargs, salt=salt)
        hit = self.cache.get_text(key)
        if hit is not None:
            return hit
        text = self.inner.generate(prompt, images, dict(self.gen_kwargs))
        self.calls += 1
        if not text.strip():
            return text  # API wrappers answer "" on errors: never replay one from the cache
        self.cache.put_text(key, text, {"model": self.name, "purpose": purpose, "prompt": prompt})
        return text
