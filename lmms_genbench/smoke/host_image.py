"""A tiny stand-in for lmms-eval's own image-generating model types, for tests.

:class:`TinyImageModel` is an lmms-eval ``lmms`` model that answers
``generate_until`` the way ``bagel``, ``ovis_u1`` and ``mmada`` do in lmms-eval
0.7.3: it saves one PNG per request into ``<output_dir>/<run id>/`` as
``{task}_{doc_id}_0.png`` and answers ``{"text": "", "images": [path]}``. The picture
is seeded noise from the prompt and the model's own ``seed``, 32 px by default.
``answer=`` makes it answer as a broken model would (tests of the reading side).
Registered as an lmms-eval model type by :func:`register_tiny_image_model`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import uuid
from collections.abc import Callable

__all__ = ["ANSWERS", "TINY_IMAGE_MODEL", "lazy_model_class", "register_model_type", "register_tiny_image_model"]
# and TinyImageModel, made on first access

#: the model type :func:`register_tiny_image_model` registers
TINY_IMAGE_MODEL = "genbench_tiny_image"
#: what the stand-in can answer: a good image, or one of the broken shapes
ANSWERS = ("image", "missing", "undecodable", "text", "no_images")


def _model_class():
    from lmms_eval.api.model import lmms

    class TinyImageModel(lmms):
        def __init__(self, output_dir: str = "./logs/genbench_tiny_image", seed: int = 0, size: int = 32,
                     answer: str = "image", **kwargs) -> None:
            super().__init__()
            if answer not in ANSWERS:
                raise ValueError(f"answer: expected one of {', '.join(ANSWERS)}; got {answer!r}")
            self.seed, self.size, self.answer = int(seed), int(size), answer
            # as bagel: a run folder of its own under the output folder
            self.output_dir = os.path.join(output_dir, uuid.uuid4().hex[:8])
            os.makedirs(self.output_dir, exist_ok=True)

        def generate_until(self, requests):
            return [self._one(*request.args) for request in requests]

        def _one(self, context, gen_kwargs, doc_to_visual, doc_id, task, split) -> str:
            import numpy as np
            from PIL import Image

            path = os.path.join(self.output_dir, f"{task}_{doc_id}_0.png")
            if self.answer == "text":
                return "[GENERATION_FAILED] out of memory"
            if self.answer == "no_images":
                return json.dumps({"text": "I cannot draw that", "images": []})
            if self.answer == "undecodable":
                with open(path, "wb") as fh:
                    fh.write(b"not a png")
            elif self.answer == "image":
                digest = hashlib.sha256(f"{self.seed}\0{context}".encode()).digest()
                rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
                pixels = rng.integers(1, 256, (self.size, self.size, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(path)
            return json.dumps({"text": "", "images": [path]})

        def loglikelihood(self, requests):
            raise NotImplementedError("the tiny image model only draws")

        def generate_until_multi_round(self, requests):
            raise NotImplementedError("the tiny image model only draws")

    return TinyImageModel


def lazy_model_class(module: str, name: str, build: Callable[[], type]) -> Callable[[str], type]:
    """A ``__getattr__`` for ``module`` that makes its lmms-eval model class ``name`` with ``build``
    on first access (so importing the module does not import lmms-eval), named as if defined at
    the module's top level (lmms-eval loads it by that path) and kept there for later lookups."""

    def __getattr__(attribute: str) -> type:
        if attribute != name:
            raise AttributeError(attribute)
        cls = build()
        cls.__module__, cls.__qualname__ = module, name
        setattr(sys.modules[module], name, cls)
        return cls

    return __getattr__


def register_model_type(model_type: str, class_path: str) -> str:
    """Register the class at ``class_path`` (``module.Class``) as lmms-eval's model type ``model_type``
    in this process; returns ``model_type``."""
    from lmms_eval.models import MODEL_REGISTRY_V2
    from lmms_eval.models.registry_v2 import ModelManifest

    MODEL_REGISTRY_V2.register_manifest(ModelManifest(model_id=model_type, simple_class_path=class_path),
                                        overwrite=True)
    return model_type


__getattr__ = lazy_model_class(__name__, "TinyImageModel", _model_class)


def register_tiny_image_model(name: str = TINY_IMAGE_MODEL) -> str:
    """Register :class:`TinyImageModel` as the lmms-eval model type ``name`` in this process."""
    return register_model_type(name, f"{__name__}.TinyImageModel")
