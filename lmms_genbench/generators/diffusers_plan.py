"""Naming a diffusers generator, apart from loading it.

:func:`read_request` checks every argument of ``generator=diffusers`` and reads the pipeline
class its ``model_index.json`` names (no weights), normalising each ``generator.<setting>`` to
its parameter's type and leaving out what the pipeline would do anyway (a default, a setting
it ignores). :func:`name_request` turns that into the store's name, the names earlier versions
gave the same drawing (adopted, not redrawn) and the identity written beside the store's
folder. :class:`.diffusers_backend.DiffusersGenerator` loads what a request names.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from ..core.args import ArgumentError, as_choice, as_float, as_int, as_str
from ..core.checkpoint_folders import is_path
from ..core.checkpoints import folder_identity, hub_commit, is_local_folder, recorded_checkpoints
from ..core.deps import require
from ..core.keys import generator_name, name_record
from . import pipeline_rules as rules
from .common import DTYPES, check_device, resolve_dtype
from .pipeline_folder import named_pipeline, read_pipeline_folder
from .weights import legacy_identity

__all__ = ["OFFLOAD", "DiffusersRequest", "Naming", "name_request", "pipeline_class", "read_request"]

#: generator.offload values
OFFLOAD = ("none", "model", "sequential")


@dataclass(frozen=True)
class DiffusersRequest:
    """What ``generator=diffusers`` is asked to draw with, checked; nothing loaded."""

    pretrained: str | None
    revision: str | None
    dtype: str
    device: str
    device_type: str
    steps: int | None
    guidance: float | None
    width: int | None
    height: int | None
    batch_size: int
    negative_prompt: str | None
    offload: str
    #: the class the settings were checked against (None: a hub id not at hand, known once loaded)
    pipeline_cls: type | None
    #: the pipeline's __call__ settings: normalised, without defaults and ignored ones (they key)
    call_settings: dict[str, Any] = field(default_factory=dict)
    #: setting -> why the pipeline ignores it (left out of the key; warned when it loads)
    ignored: dict[str, str] = field(default_factory=dict)
    #: the settings as given, checked again against a class known only once loaded
    given: dict[str, Any] = field(default_factory=dict)

    def with_class(self, cls: type) -> DiffusersRequest:
        """This request with its settings checked against ``cls`` (the class that loaded)."""
        settings, negative, ignored = _settings(cls, self.given, self.negative_prompt)
        return dataclasses.replace(self, pipeline_cls=cls, call_settings=settings, negative_prompt=negative,
                                   ignored=ignored)


def read_request(pretrained: str | None = None, pipeline: Any = None, dtype: str = "auto", device: str = "cuda",
                 steps: int | None = None, guidance: float | None = None, width: int | None = None,
                 height: int | None = None, batch_size: int = 4, negative_prompt: str | None = None,
                 revision: str | None = None, offload: str = "none", **call_settings: Any) -> DiffusersRequest:
    """Every argument of :class:`.diffusers_backend.DiffusersGenerator` checked before any weight
    loads (see its docstring); ``pipeline``: an injected pipeline, whose class the settings are
    checked against. Raises :class:`~lmms_genbench.core.args.ArgumentError` naming the argument."""
    pretrained = as_str("pretrained", pretrained, optional=True)
    if pipeline is None and pretrained is None:
        raise ArgumentError("pretrained: expected a diffusers pipeline id or local path (or pass pipeline=); got None")
    dtype_choice = as_choice("dtype", dtype, DTYPES)
    device = str(as_str("device", device))
    numbers = {"steps": as_int("steps", steps, minimum=1, optional=True),
               "guidance": as_float("guidance", guidance, minimum=0.0, optional=True),
               "width": _pixels("width", width), "height": _pixels("height", height),
               "batch_size": int(as_int("batch_size", batch_size, minimum=1))}  # type: ignore[arg-type]
    negative_prompt = as_str("negative_prompt", negative_prompt, optional=True)
    revision = as_str("revision", revision, optional=True)
    offload = str(as_choice("offload", offload, OFFLOAD))
    torch = require("torch", "the diffusers generator")
    torch_device = check_device(torch, device)
    if offload != "none" and torch_device.type == "cpu":
        raise ArgumentError(f"offload: {offload} moves weights between the CPU and an accelerator; with "
                            f"device={device} they are on the CPU already: give offload=none or an accelerator device")
    cls = type(pipeline) if pipeline is not None else pipeline_class(pretrained, revision)
    request = DiffusersRequest(pretrained, revision, resolve_dtype(torch, dtype_choice, torch_device, pipeline),
                               device, torch_device.type, **numbers, negative_prompt=negative_prompt,
                               offload=offload, pipeline_cls=None, given=dict(call_settings))
    return request.with_class(cls) if cls is not None else request


def _settings(cls: type, given: dict[str, Any], negative: str | None) -> tuple[dict, str | None, dict[str, str]]:
    settings = rules.check_call_settings(cls, given)
    ignored = rules.ignored_settings(cls, {**settings, "negative_prompt": negative})
    for setting in ignored:
        if setting == "negative_prompt":
            negative = None
        else:
            settings.pop(setting, None)
    return settings, negative, ignored


def _pixels(arg: str, value: Any) -> int | None:
    pixels = as_int(arg, value, minimum=8, optional=True)
    if pixels is not None and pixels % 8:
        raise ArgumentError(f"{arg}: expected a multiple of 8 or none; got {value!r}")
    return pixels


def pipeline_class(pretrained: str | None, revision: str | None) -> type | None:
    """The pipeline class named by the checkpoint's ``model_index.json``, read without loading
    weights: a local folder with every component it lists (:func:`.pipeline_folder.read_pipeline_folder`:
    a folder the run could not load stops here, in the plan, as ``lmms-genbench check`` reports
    it), else from the Hugging Face cache or (a hub id not downloaded yet, where going online is
    allowed) that one small file from the Hub. None when a hub id's is not at hand.

    Raises:
        ArgumentError: it names a pipeline that does not draw from text alone (an img2img or
            inpainting pipeline, as the SDXL refiner's does), or one this diffusers lacks.
        FileNotFoundError, ValueError: a local folder the pipeline cannot be loaded from.
    """
    if not pretrained:
        return None
    if is_path(pretrained):
        return read_pipeline_folder(pretrained)
    diffusers = require("diffusers", "the diffusers generator")
    for local_only in (True, False):
        try:
            config = diffusers.DiffusionPipeline.load_config(pretrained, revision=revision,
                                                             local_files_only=local_only)
        except Exception:  # noqa: BLE001, S112 - not there (offline, no such id): known once loaded
            continue
        return named_pipeline(pretrained, config)
    return None


@dataclass(frozen=True)
class Naming:
    """What keys a diffusers generator's drawings in the store."""

    name: str
    #: names earlier versions gave the same drawing (``store.identity.adopt_folder``)
    legacy_names: tuple[str, ...]
    #: written readably beside the store's folder (store/identity.py)
    identity: dict[str, Any]


def name_request(request: DiffusersRequest) -> Naming:
    """The name, the legacy names and the identity of ``request`` (its class known)."""
    cls = request.pipeline_cls
    assert cls is not None, "a request is named once its pipeline class is known"
    local = request.pretrained is not None and is_local_folder(request.pretrained)
    label = cls.__name__ if local else (request.pretrained or cls.__name__)  # a moved folder keeps its images
    weights = f"weights:{folder_identity(request.pretrained)}" if local else None  # type: ignore[arg-type]
    # a Hub id: the commit its revision resolves to in the local cache (None: not downloaded yet)
    commit = None if local or request.pretrained is None else hub_commit(request.pretrained, request.revision)
    settings = _key(request, weights or label, request.call_settings, commit)
    name = generator_name("diffusers", label, settings)
    # earlier keys of the same drawing: sampled weight bytes (before whole-file hashing), a Hub id
    # without its commit, and settings keyed as given (before each was normalised to its type
    # and defaults left out)
    identities = [weights or label] + ([f"weights:{legacy_identity(request.pretrained)}"] if local else [])  # type: ignore[arg-type]
    calls = [request.call_settings]
    try:
        old = rules.legacy_call_settings(cls, request.given)
        calls.append({k: v for k, v in old.items() if k not in request.ignored})
    except ArgumentError:
        pass
    legacy = []
    for identity in identities:
        for call in calls:
            other = generator_name("diffusers", label, _key(request, identity, call))
            if other != name and other not in legacy:
                legacy.append(other)
    source = os.path.abspath(os.path.expanduser(request.pretrained)) if local else request.pretrained  # type: ignore[arg-type]
    record = name_record("diffusers", label, settings)
    record.update(pipeline=cls.__name__, pretrained=source)
    if weights:
        record["weights_sha256"] = weights.split(":", 1)[1]
    if weights or commit:
        found = {"folder": record["weights_sha256"]} if weights else {"commit": commit}
        record["checkpoints"] = recorded_checkpoints({"pretrained": source}, {"pretrained": found}, request.revision)
    if request.ignored:
        record["ignored"] = dict(request.ignored)
    return Naming(name, tuple(legacy), record)


def _key(request: DiffusersRequest, identity: str, call: dict[str, Any], commit: str | None = None) -> dict[str, Any]:
    """The settings that name the drawings (``identity``: a hub id, or a folder's weights;
    ``commit``: a hub id's resolved revision)."""
    settings: dict[str, Any] = {
        "pretrained": identity, "steps": request.steps, "guidance": request.guidance, "width": request.width,
        "height": request.height, "dtype": request.dtype, "negative_prompt": request.negative_prompt,
        # the seeded noise comes from this device's RNG, which differs between CPU and CUDA
        "device": request.device_type,
    }
    # present only when set, so the keys of stores written before they existed stay
    if call:
        settings["call"] = dict(sorted(call.items()))
    if request.revision is not None:
        settings["revision"] = request.revision
    if commit is not None:
        settings["commit"] = commit
    return settings
