"""The examiner: any lmms-eval model driven as "prompt (+ images) -> text".

:class:`LmmsExaminer` builds lmms-eval requests for simple and chat models
(the pattern of :class:`lmms_genbench.engine.LmmsDescriber`, with the image
optional). :class:`CachedExaminer` puts every call through the on-disk cache.
Tests inject any object with ``name`` and ``generate``.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Sequence
from typing import Any, Protocol

from PIL import Image

from ..engine.store import slug_key, stable_hash
from ..core.model_args import identity_args
from .cache import CallCache, image_hash

_TASK = "lmms_genbench_autobench"
_SPLIT = "examiner"
TEXT_ONLY_MODES = ("none", "blank")


class Examiner(Protocol):
    name: str

    def generate(self, prompt: str, images: Sequence[Image.Image] = (), gen_kwargs: dict | None = None) -> str: ...


def _doc_to_visual(doc):
    return list(doc["images"])


def _doc_to_messages(doc, prompt: str):
    content = [{"type": "image", "url": im} for im in doc["images"]]
    return [{"role": "user", "content": [*content, {"type": "text", "text": prompt}]}]


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
        from lmms_eval.api.instance import Instance, unwrap_generation_output

        images = list(images)
        if not images and self.text_only == "blank":
            images = [Image.new("RGB", (64, 64), "white")]
        kwargs = copy.deepcopy(gen_kwargs or {})
        if getattr(self.lm, "is_simple", True):
            args = (prompt, kwargs, _doc_to_visual, 0, _TASK, _SPLIT)
        else:
            args = (prompt, functools.partial(_doc_to_messages, prompt=prompt), kwargs, 0, _TASK, _SPLIT)
        req = Instance(request_type="generate_until", arguments=args, idx=0,
                       metadata={"task": _TASK, "doc_id": 0, "repeats": 1})
        self.lm.task_dict = {_TASK: {_SPLIT: {0: {"images": images}}}}
        try:
            out = self.lm.generate_until([req])
        finally:
            self.lm.task_dict = {}
        if len(out) != 1:
            raise RuntimeError(f"examiner returned {len(out)} outputs for 1 request")
        text = unwrap_generation_output(out[0])[0]
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
    from lmms_eval.models import get_model

    lm = get_model(model)(**args)
    shown = identity_args(args)
    ident = str(shown.get("pretrained") or shown.get("model_version") or shown.get("model") or model)
    if os.path.isabs(ident) or os.path.exists(ident):
        ident = os.path.basename(os.path.normpath(ident))
    return LmmsExaminer(lm, f"{model}-{slug_key(ident, 32)}-{stable_hash(shown, 8)}", text_only)


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
