"""A local diffusers pipeline folder, read as ``AutoPipelineForText2Image.from_pretrained`` reads it.

:func:`read_pipeline_folder` is the first thing the diffusers generator does with a local
``generator.pretrained`` (``diffusers_plan.pipeline_class``, in its plan, before any weight
loads), and ``lmms-genbench check`` reaches it through that same plan: ``model_index.json``, the
pipeline class it names (one this diffusers has, that draws from text alone), and each
component it lists: its folder, its class in its library, and the files that class is loaded
from (a diffusers model's ``config.json`` and ``diffusion_pytorch_model`` weights, a
transformers model's ``config.json`` and ``model`` weights, a scheduler's
``scheduler_config.json``, a tokenizer's vocabulary, an image processor's config). Nothing
is loaded; a component listed as ``[null, null]`` is optional and skipped.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from ..core.args import ArgumentError
from ..core.checkpoint_folders import (PROCESSOR_FILES, TOKENIZER_FILES, checkpoint_folder, read_config, require_any,
                                weight_files)
from ..core.deps import require

__all__ = ["named_pipeline", "read_pipeline_folder"]


def read_pipeline_folder(pretrained: str | os.PathLike) -> type:
    """The text-to-image pipeline class of local folder ``pretrained``, every component checked.

    Raises:
        FileNotFoundError: the folder, its ``model_index.json``, a component's folder or a file
            that component is loaded from is missing.
        ValueError: a file is not readable JSON, or a component's class does not exist here.
        ArgumentError: the pipeline class is unknown or does not draw from text alone.
    """
    folder = checkpoint_folder(pretrained)
    try:
        config = read_config(folder, "model_index.json")
    except FileNotFoundError:
        raise FileNotFoundError(f"{pretrained} has no model_index.json, so it is not a diffusers pipeline "
                                "folder") from None
    cls = named_pipeline(str(pretrained), config)
    for name, entry in sorted(config.items()):
        if name.startswith("_") or not (isinstance(entry, (list, tuple)) and len(entry) == 2):
            continue  # a pipeline setting (force_zeros_for_empty_prompt), not a component
        library, class_name = entry
        if library is None or class_name is None:
            continue  # an optional component left out
        _read_component(folder, name, str(library), str(class_name))
    return cls


def named_pipeline(pretrained: str, config: dict[str, Any]) -> type:
    """The pipeline class ``model_index.json`` (``config``) of ``pretrained`` names.

    Raises:
        ArgumentError: diffusers lacks it, or it is not a text-to-image pipeline (an img2img or
            inpainting pipeline, as the SDXL refiner's is).
    """
    diffusers = require("diffusers", "the diffusers generator")
    named = str(config.get("_class_name"))
    cls = getattr(diffusers, named, None)
    if cls is None:
        raise ArgumentError(f"pretrained: {pretrained}'s model_index.json names {named}, which diffusers "
                            f"{diffusers.__version__} does not have")
    from diffusers.pipelines.auto_pipeline import AUTO_TEXT2IMAGE_PIPELINES_MAPPING

    if cls not in set(AUTO_TEXT2IMAGE_PIPELINES_MAPPING.values()):
        raise ArgumentError(f"pretrained: {pretrained}'s model_index.json names {named}, which is not a "
                            "text-to-image pipeline (it needs an input image); give a text-to-image checkpoint")
    return cls


def _component_class(library: str, class_name: str) -> type | None:
    """The class a component entry names, found as diffusers finds it: in its library, or in the
    diffusers pipeline module of that name (``["stable_diffusion", "StableDiffusionSafetyChecker"]``)."""
    for module in (library, f"diffusers.pipelines.{library}"):
        try:
            found = getattr(importlib.import_module(module), class_name, None)
        except ImportError:
            continue
        if isinstance(found, type):
            return found
    return None


def _read_component(folder: Path, name: str, library: str, class_name: str) -> None:
    sub = folder / name
    if not sub.is_dir():
        raise FileNotFoundError(f"{folder} has no {name}/ folder, which its model_index.json lists ({library} "
                                f"{class_name})")
    cls = _component_class(library, class_name)
    if cls is None:
        raise ValueError(f"{folder}/model_index.json names {library}.{class_name} for {name}/, which is not "
                         "installed here (no such class)")
    kinds = {c.__module__.split(".")[0] + "." + c.__name__ for c in cls.__mro__}
    if "diffusers.ModelMixin" in kinds:
        read_config(sub)
        weight_files(sub, ("diffusion_pytorch_model",))
    elif "transformers.PreTrainedModel" in kinds:
        read_config(sub)
        weight_files(sub)
    elif "diffusers.SchedulerMixin" in kinds:
        read_config(sub, "scheduler_config.json")
    elif "transformers.PreTrainedTokenizerBase" in kinds:
        require_any(sub, TOKENIZER_FILES, "tokenizer files")
    elif {"transformers.ImageProcessingMixin", "transformers.FeatureExtractionMixin"} & kinds:
        require_any(sub, PROCESSOR_FILES, "image processor config")
