"""Checks every local generator backend shares: device, dtype, output image, error text.

Used by :mod:`.diffusers_backend`, :mod:`.smoke` and the unified models.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from PIL import Image

from ..core.args import ArgumentError
from ..core.failures import GenerationFailure
from .base import GenerationResult

__all__ = ["DTYPES", "MAX_REASON_CHARS", "check_device", "check_image", "describe_error", "log_info", "resolve_dtype"]

DTYPES = ("auto", "float16", "bfloat16", "float32")

# Long exception texts (tensor dumps, tracebacks from remote code) would bloat
# every per-sample record; the head says what went wrong.
MAX_REASON_CHARS = 500


def check_device(torch: Any, device: str) -> Any:
    """Parse ``device`` and make sure it exists here."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise ArgumentError(
            f"device: expected a torch device such as 'cuda', 'cuda:1', 'mps' or "
            f"'cpu'; got {device!r}"
        ) from None
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"device: {device!r} was requested but CUDA is not available on "
                "this machine; pass device=cpu to run on the CPU explicitly"
            )
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise RuntimeError(
                f"device: {device!r} was requested but only "
                f"{torch.cuda.device_count()} CUDA device(s) are visible"
            )
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(
            f"device: {device!r} was requested but MPS is not available; pass "
            "device=cpu to run on the CPU explicitly"
        )
    return parsed


def resolve_dtype(torch: Any, choice: str, device: Any, pipeline: Any) -> str:
    """Turn ``auto`` into a concrete dtype name (the name must say which)."""
    if pipeline is not None:
        # An injected pipeline already has its weights: the name must report
        # their real dtype, so a contradicting request is an error.
        actual = getattr(pipeline, "dtype", None)
        if actual is None:
            return choice
        actual_name = str(actual).replace("torch.", "")
        if choice not in ("auto", actual_name):
            raise ArgumentError(
                f"dtype: expected 'auto' or the injected pipeline's dtype "
                f"{actual_name!r}; got {choice!r}"
            )
        return actual_name
    if choice != "auto":
        return choice
    if device.type == "cuda":
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    if device.type == "mps":
        return "float16"
    return "float32"


def check_image(image: Any, nsfw_flagged: bool) -> GenerationResult:
    """``image`` if it is a usable PIL image, else a :class:`GenerationFailure` saying why."""
    if nsfw_flagged:
        return GenerationFailure(
            "the pipeline's safety checker flagged the image as NSFW and blanked it"
        )
    if not isinstance(image, Image.Image):
        return GenerationFailure(
            f"pipeline returned a {type(image).__name__}, not a PIL image"
        )
    if _is_all_black(image):
        # Usually fp16 overflow (NaN latents) or a silent safety blank; a black
        # square scored as a real image would skew every metric.
        return GenerationFailure(
            "pipeline returned an all-black image (numeric overflow, e.g. NaNs "
            "in float16, or a safety filter)"
        )
    return image


def _is_all_black(image: Image.Image) -> bool:
    extrema = image.convert("RGB").getextrema()
    return all(high == 0 for _, high in extrema)  # type: ignore[misc]


def describe_error(exc: BaseException) -> str:
    """``"<type>: <message>"``, cut to :data:`MAX_REASON_CHARS` characters."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + "..."


def log_info(logger: logging.Logger, message: str, *args: Any) -> None:
    """``logger.info``, and under lmms-eval (imported already) its own logger too: a run's output
    shows that one at INFO, not Python's ``logging`` (nothing here routes it)."""
    logger.info(message, *args)
    host = getattr(sys.modules.get("lmms_eval.utils"), "eval_logger", None)
    if host is not None:
        host.info(message % args if args else message)
