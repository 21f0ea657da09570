"""Scorer settings every scorer shares: where they come from and what of them keys a report.

The task's ``generation_kwargs.scorer`` mapping is the start (its ``preset`` picks one of the
scorer's ``PRESETS``); the ``LMMS_GENBENCH_*`` environment overrides the networks, device,
batch size and dtype. A report's key hashes the settings that decide its numbers.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from ...core.errors import ActionableError, from_exception
from ...core.keys import stable_hash

__all__ = [
    "BOOTSTRAP_DEFAULTS",
    "ENV_BATCH",
    "ENV_DEVICE",
    "ENV_DTYPE",
    "KEY_DEFAULTS",
    "OPERATIONAL_SETTINGS",
    "bootstrap_settings",
    "default_device",
    "network_failure",
    "resolve_device_and_batch",
    "resolve_dtype",
    "settings_dict",
    "settings_key",
]

# Scoring settings shared by every scorer, overridable at run time.
ENV_DEVICE = "LMMS_GENBENCH_SCORER_DEVICE"
ENV_BATCH = "LMMS_GENBENCH_SCORER_BATCH"
ENV_DTYPE = "LMMS_GENBENCH_SCORER_DTYPE"
#: settings that change how fast a report is computed, not what it says: not in its key
OPERATIONAL_SETTINGS = ("device", "batch_size")
#: settings that do change the numbers but were added later: at these values they stay out
#: of the key, so reports written before them keep their names (a bfloat16 report gets its own)
KEY_DEFAULTS = {"dtype": "float32"}
#: the intervals' bootstrap, unless the task's ``generation_kwargs.scorer.bootstrap`` says otherwise
BOOTSTRAP_DEFAULTS = {"resamples": 1000, "seed": 0, "level": 0.95}


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_device_and_batch(defaults: Mapping[str, Any]) -> tuple[str, int]:
    """``(device, batch_size)``: the environment, else the task's ``defaults``, else
    CUDA if available / 32."""
    device = os.environ.get(ENV_DEVICE) or defaults.get("device") or default_device()
    batch = os.environ.get(ENV_BATCH, defaults.get("batch_size", 32))
    try:
        batch = int(batch)
    except (TypeError, ValueError):
        raise ValueError(f"{ENV_BATCH} must be an integer, got {batch!r}") from None
    if batch < 1:
        raise ValueError(f"{ENV_BATCH} must be >= 1, got {batch}")
    return str(device), batch


def resolve_dtype(defaults: Mapping[str, Any]) -> str:
    """The scorer networks' weight dtype: the environment, else the task's, else float32
    (canonical name: ``bf16`` -> ``bfloat16``)."""
    from ..networks.common import check_dtype

    value = os.environ.get(ENV_DTYPE) or defaults.get("dtype") or "float32"
    return check_dtype(value, f"the scorer dtype (generation_kwargs.scorer.dtype or {ENV_DTYPE})")


def bootstrap_settings(scorer: Mapping[str, Any]) -> dict[str, Any]:
    """The intervals' bootstrap: :data:`BOOTSTRAP_DEFAULTS` overridden by the task's
    ``generation_kwargs.scorer.bootstrap`` mapping (``resamples`` (0: no intervals), ``seed``,
    ``level``)."""
    given = scorer.get("bootstrap") or {}
    if not isinstance(given, Mapping) or set(given) - set(BOOTSTRAP_DEFAULTS):
        raise ValueError(
            f"generation_kwargs.scorer.bootstrap must be a mapping with keys among "
            f"{sorted(BOOTSTRAP_DEFAULTS)}, got {given!r}"
        )
    out = {**BOOTSTRAP_DEFAULTS, **given}
    for key in ("resamples", "seed"):
        if isinstance(out[key], bool) or not isinstance(out[key], int) or out[key] < 0:
            raise ValueError(f"generation_kwargs.scorer.bootstrap.{key} must be an integer >= 0, got {out[key]!r}")
    if isinstance(out["level"], bool) or not isinstance(out["level"], (int, float)) or not 0 < out["level"] < 1:
        raise ValueError(f"generation_kwargs.scorer.bootstrap.level must lie between 0 and 1, got {out['level']!r}")
    return out


def settings_dict(resolved: Any) -> dict[str, Any]:
    """Resolved settings (a dataclass or a mapping) as a plain dict; ``{}`` for anything else."""
    if dataclasses.is_dataclass(resolved) and not isinstance(resolved, type):
        return dataclasses.asdict(resolved)
    return dict(resolved) if isinstance(resolved, Mapping) else {}


def settings_key(resolved: Any) -> str:
    """Short hash of the settings that decide a report's numbers (not device or batch size)."""
    shown = {
        k: v for k, v in settings_dict(resolved).items()
        if k not in OPERATIONAL_SETTINGS and not (k in KEY_DEFAULTS and v == KEY_DEFAULTS[k])
    }
    return stable_hash(shown, 8, ensure_ascii=True)


def network_failure(exc: Exception, scorer: str, resolved: Any, task: str) -> ActionableError:
    """One line naming the setting (and the variable that set it) whose network failed."""
    values = settings_dict(resolved)
    text = str(exc)
    culprit = next(
        ((k, v) for k, v in values.items()
         if k not in OPERATIONAL_SETTINGS and isinstance(v, str) and len(v) > 2 and v in text),
        None,
    )
    offline = "or score offline with the smoke networks (--model_args preset=smoke, or generation_kwargs.scorer: {preset: smoke})"
    if culprit is None:
        return from_exception(
            exc, f"the {scorer} scorer of {task} failed",
            f"check generation_kwargs.scorer and the LMMS_GENBENCH_* variables, {offline}",
        )
    name, value = culprit
    env = sorted(k for k, v in os.environ.items() if k.startswith("LMMS_GENBENCH_") and v == value)
    where = f"{env[0]}={value}" if env else f"generation_kwargs.scorer {name}={value}"
    return from_exception(
        exc, f"the {scorer} scorer of {task} could not load its {name} network {value!r} (set by {where})",
        f"point {env[0] if env else f'generation_kwargs.scorer.{name}'} at a network that loads here "
        f"(a local folder, or a hub id whose weights are downloaded){', or unset it' if env else ''}, {offline}",
    )
