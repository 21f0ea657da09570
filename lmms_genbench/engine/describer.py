"""Drive any lmms-eval model as a describer: a batch of images in, texts out."""

from __future__ import annotations

import copy
import functools
from typing import Any, Protocol, Sequence

from PIL import Image

from ..generators.base import GenerationFailure

_TASK = "lmms_genbench_describe"
_SPLIT = "step"

DescribeResult = str | GenerationFailure


class Describer(Protocol):
    """Images and one prompt in, one text (or failure) per image out."""

    name: str

    def describe(
        self, images: Sequence[Image.Image], prompt: str, gen_kwargs: dict[str, Any]
    ) -> list[DescribeResult]: ...


def _doc_to_visual(doc):
    return [doc["image"]]


def _doc_to_messages(doc, prompt: str):
    return [
        {
            "role": "user",
            "content": [
                {"type": "image", "url": doc["image"]},
                {"type": "text", "text": prompt},
            ],
        }
    ]


class LmmsDescriber:
    """Adapter from an lmms-eval model instance (simple or chat API)."""

    def __init__(self, lm, name: str) -> None:
        self.lm = lm
        self.name = name

    def _requests(self, n: int, prompt: str, gen_kwargs: dict[str, Any]):
        from lmms_eval.api.instance import Instance

        to_messages = functools.partial(_doc_to_messages, prompt=prompt)
        requests = []
        for doc_id in range(n):
            # models mutate gen_kwargs (pop "until", add "image_sizes"): one copy each
            kwargs = copy.deepcopy(gen_kwargs)
            if getattr(self.lm, "is_simple", True):
                args = (prompt, kwargs, _doc_to_visual, doc_id, _TASK, _SPLIT)
            else:
                args = (prompt, to_messages, kwargs, doc_id, _TASK, _SPLIT)
            requests.append(
                Instance(
                    request_type="generate_until",
                    arguments=args,
                    idx=0,
                    metadata={"task": _TASK, "doc_id": doc_id, "repeats": 1},
                )
            )
        return requests

    def _call(self, images: Sequence[Image.Image], prompt: str, gen_kwargs) -> list[str]:
        from lmms_eval.api.instance import unwrap_generation_output

        self.lm.task_dict = {_TASK: {_SPLIT: {i: {"image": img} for i, img in enumerate(images)}}}
        try:
            outputs = self.lm.generate_until(self._requests(len(images), prompt, gen_kwargs))
        finally:
            self.lm.task_dict = {}
        if len(outputs) != len(images):
            raise RuntimeError(
                f"describer returned {len(outputs)} outputs for {len(images)} requests"
            )
        return [unwrap_generation_output(out)[0] for out in outputs]

    def describe(self, images, prompt, gen_kwargs):
        try:
            texts = self._call(images, prompt, gen_kwargs)
        except Exception as exc:
            if len(images) == 1:
                return [GenerationFailure(f"describer error: {type(exc).__name__}: {exc}")]
            # isolate the bad input instead of failing the whole batch
            return [r for img in images for r in self.describe([img], prompt, gen_kwargs)]
        return [t if isinstance(t, str) else GenerationFailure(f"describer returned {type(t).__name__}") for t in texts]
