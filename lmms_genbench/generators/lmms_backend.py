"""``generator=lmms:<model type>``: an image-generating lmms-eval model as our generator.

lmms-eval 0.7.3's generation model types (``bagel``, ``ovis_u1``, ``mmada``,
``bagel_unig2u``, ...) answer ``generate_until`` with a JSON string
``{"text": "", "images": [paths]}``, the images saved into an output folder each
class picks from its own constructor argument (``output_dir``,
``output_image_dir``). ``wan2_1_t2i`` answers the folder it wrote
``{doc_id:04d}_s{k}.png`` into, and a class may answer one image path. All three
shapes are read here; anything else (``[GENERATION_FAILED] ...``, plain text,
a path that is not there or does not decode) is a :class:`GenerationFailure`
with the reason, never an image.

The model is built and called through :mod:`lmms_genbench.host`, the one adapter
to lmms-eval models. Seeds: these classes take a seed at construction (if any),
not per request, so the image of a prompt depends on the model's own seed
setting, not on the chain's per-prompt seed; the seed setting is part of
:attr:`LmmsGenerator.name` through the model's arguments.
"""

from __future__ import annotations

import glob
import json
import os
import uuid
from collections.abc import Sequence
from typing import Any

from PIL import Image

from .. import host
from ..core.args import ArgumentError, as_int
from ..core.failures import GenerationFailure
from .base import GenerationResult
from .common import MAX_REASON_CHARS, check_image, describe_error

__all__ = ["REGISTRY_FIXES", "LmmsGenerator", "read_answer", "repair_registration"]

#: model types lmms-eval 0.7.3 registers under class paths that do not import (``bagel`` ->
#: ``simple.bagel.Bagel``, ``bagel_umm`` -> ``simple.bagel_umm.BagelUMM``), and where the class is
REGISTRY_FIXES = {"bagel": "lmms_eval.models.simple.bagel.BagelUMM",
                  "bagel_umm": "lmms_eval.models.simple.bagel.BagelUMM"}

#: the arguments lmms-eval 0.7.3's generation classes take their output folder from
OUTPUT_FOLDER_ARGS = ("output_dir", "output_image_dir")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")


class LmmsGenerator:
    """Draw with a registered lmms-eval model type through the host adapter.

    Args:
        model: the lmms-eval model type (``bagel``, ``mmada``, ...); given on the
            command line as ``generator=lmms:<model type>``.
        batch_size: prompts per ``generate_until`` call (ours; the model's own
            batching argument, if any, is not set by it).
        **model_args: the model's own constructor arguments
            (``generator.pretrained=...``, ``generator.output_dir=...``).
    """

    #: how a load failure names this role and its arguments (unified=lmms: says unified.)
    ROLE = ("generator", "generator.")

    def __init__(self, model: str | None = None, batch_size: int = 1, **model_args: Any) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ArgumentError(
                f"model: expected an lmms-eval model type, given as generator=lmms:<model type> "
                f"(e.g. lmms:bagel); got {model!r}"
            )
        self.model = model.strip()
        self.batch_size = int(as_int("batch_size", batch_size, minimum=1))  # type: ignore[arg-type]
        self.model_args = dict(model_args)
        repair_registration(self.model)
        role, prefix = self.ROLE
        self.lm = host.build_model(self.model, self.model_args, role=role, prefix=prefix)
        # the model's identity: its type, weights and every output-deciding argument
        # (where it saves its files decides nothing about them)
        shown = {k: v for k, v in self.model_args.items() if k not in OUTPUT_FOLDER_ARGS}
        self.name = "lmms-" + host.model_identity(self.model, shown)
        #: its name before its weights were part of it (a store so named is adopted)
        self.legacy_names = tuple("lmms-" + n for n in host.model_legacy_names(self.model, shown))

    def __repr__(self) -> str:
        return f"LmmsGenerator(name={self.name!r})"

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GenerationResult]:
        """One image or :class:`GenerationFailure` per prompt, in order."""
        prompts = list(prompts)
        if len(prompts) != len(seeds):
            raise ValueError(
                f"generate: expected one seed per prompt; got {len(prompts)} prompts and {len(seeds)} seeds"
            )
        results: list[GenerationResult] = []
        for start in range(0, len(prompts), self.batch_size):
            results.extend(self._call(prompts[start:start + self.batch_size]))
        return results

    def _call(self, prompts: list[str]) -> list[GenerationResult]:
        # a task name of its own per call: classes name their files by task and doc id
        # (and wan2_1_t2i reuses a file already there), so doc ids 0..n of two calls
        # must never meet in one folder
        task = f"lmms_genbench_{uuid.uuid4().hex[:12]}"
        try:
            answers = host.generate(self.lm, [(p, {}, []) for p in prompts], task=task, quiet=True)
        except Exception as exc:  # noqa: BLE001 - the batch fails, the run goes on
            return [GenerationFailure(f"{self.model}.generate_until raised {describe_error(exc)}")] * len(prompts)
        return [read_answer(answer, doc_id) for doc_id, answer in enumerate(answers)]


def read_answer(answer: Any, doc_id: int = 0) -> GenerationResult:
    """The first image an lmms-eval generation model answered, loaded, or why there is none.

    ``answer``: the JSON string ``{"text", "images": [paths]}``, a folder holding
    ``{doc_id:04d}_s*.png``, or one image path.
    """
    if not isinstance(answer, str) or not answer.strip():
        return GenerationFailure(f"the model answered {_head(answer)} instead of an image: no image")
    text = answer.strip()
    if text.startswith("{"):
        try:
            payload = json.loads(text)
        except ValueError as exc:
            return GenerationFailure(f"the model answered JSON that does not parse ({exc}): {_head(text)}")
        images = payload.get("images") if isinstance(payload, dict) else None
        if not isinstance(images, list) or not images:
            return GenerationFailure(f"the model answered no image paths (its \"images\" is {_head(images)}); "
                                     f"text {_head(payload.get('text') if isinstance(payload, dict) else payload)}")
        return _load(images[0])
    if os.path.isdir(text):
        found = sorted(glob.glob(os.path.join(glob.escape(text), f"{doc_id:04d}_s*.png")))
        if not found:
            return GenerationFailure(f"the model answered the folder {text} but it holds no {doc_id:04d}_s*.png")
        return _load(found[0])
    if text.lower().endswith(_IMAGE_SUFFIXES):
        return _load(text)
    return GenerationFailure(f"the model answered text, not an image: {_head(text)}")


def _load(path: Any) -> GenerationResult:
    if not isinstance(path, str) or not path:
        return GenerationFailure(f"the model answered an image path that is not a path: {_head(path)}")
    if not os.path.isfile(path):
        return GenerationFailure(f"the model answered the image {path}, which does not exist")
    try:
        with Image.open(path) as opened:
            image = opened.convert("RGB")  # decodes the whole file now, while it is there
    except Exception as exc:  # noqa: BLE001 - any decoder error is this image's failure
        return GenerationFailure(f"the image {path} does not decode: {describe_error(exc)}")
    return check_image(image, False)


def _head(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_REASON_CHARS // 2 else text[: MAX_REASON_CHARS // 2] + "..."


def repair_registration(model: str) -> None:
    """Point ``model`` at the class that exists when lmms-eval registered it under a class path
    that does not import (:data:`REGISTRY_FIXES`); any other registration is left as it is."""
    fixed = REGISTRY_FIXES.get(model)
    if fixed is None:
        return
    import importlib

    from lmms_eval.models import MODEL_REGISTRY_V2
    from lmms_eval.models.registry_v2 import ModelManifest

    def imports(path: str | None) -> bool:
        module, _, name = (path or "").rpartition(".")
        try:
            return hasattr(importlib.import_module(module), name)
        except Exception:  # noqa: BLE001 - a path that does not import is what is repaired
            return False

    try:
        current = MODEL_REGISTRY_V2.get_manifest(model).simple_class_path
    except Exception:  # noqa: BLE001 - not registered at all: leave it to the host's error
        return
    if not imports(current) and imports(fixed):
        MODEL_REGISTRY_V2.register_manifest(ModelManifest(model_id=model, simple_class_path=fixed), overwrite=True)
