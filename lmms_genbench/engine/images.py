"""Turn whatever a dataset hands us into a plain 8-bit RGB image, or say why not."""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

# Seeds larger than this are downscaled before they are stored: describers and
# encoders resize far below it anyway, and it bounds memory per chain.
DEFAULT_MAX_SIDE = 2048


class BadImageError(ValueError):
    """The input cannot be used as a seed image; the message says why."""


def _strict_decoding():
    # lmms-eval sets PIL's LOAD_TRUNCATED_IMAGES globally at import, which would
    # score a truncated file as a half-grey picture; decode seeds strictly.
    from ..hooks.call import strict_image_decoding

    return strict_image_decoding()


def _open(source: Any) -> Image.Image:
    if isinstance(source, Image.Image):
        return source
    if isinstance(source, dict) and ("bytes" in source or "path" in source):
        if source.get("bytes"):
            return Image.open(io.BytesIO(source["bytes"]))
        return Image.open(source["path"])
    if isinstance(source, (str, os.PathLike)):
        return Image.open(source)
    if isinstance(source, (bytes, bytearray)):
        return Image.open(io.BytesIO(source))
    if isinstance(source, np.ndarray):
        return Image.fromarray(source)
    raise BadImageError(f"unsupported image type {type(source).__name__}")


def _to_rgb(img: Image.Image) -> Image.Image:
    mode = img.mode
    if mode == "RGB":
        return img
    if mode in ("I;16", "I;16B", "I;16L", "I"):
        # 16/32-bit integer: rescale to 8 bits rather than clipping to white
        arr = np.asarray(img, dtype=np.float64)
        lo, hi = float(arr.min()), float(arr.max())
        arr = (arr - lo) / (hi - lo) * 255.0 if hi > lo else np.zeros_like(arr)
        return Image.fromarray(arr.astype(np.uint8), "L").convert("RGB")
    if mode == "F":
        arr = np.asarray(img, dtype=np.float64)
        lo, hi = float(np.nanmin(arr)), float(np.nanmax(arr))
        arr = (arr - lo) / (hi - lo) * 255.0 if hi > lo else np.zeros_like(arr)
        return Image.fromarray(np.nan_to_num(arr).astype(np.uint8), "L").convert("RGB")
    if mode == "P":
        img = img.convert("RGBA")
        mode = "RGBA"
    if mode in ("RGBA", "LA", "PA") or "transparency" in img.info:
        # composite on white: transparent pixels are usually background
        rgba = img.convert("RGBA")
        canvas = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(canvas, rgba).convert("RGB")
    return img.convert("RGB")


def normalize_image(source: Any, max_side: int = DEFAULT_MAX_SIDE) -> Image.Image:
    """Load ``source`` fully and return an RGB image no larger than ``max_side``.

    Raises :class:`BadImageError` for unreadable, truncated, empty or
    oversized-beyond-PIL's-bomb-limit inputs; never returns a partial image.
    """
    try:
        img = _open(source)
        with _strict_decoding():
            img.load()  # forces decoding, so truncation surfaces here
        if img.width < 1 or img.height < 1:
            raise BadImageError(f"empty image {img.width}x{img.height}")
        img = _to_rgb(img)
        if max(img.size) > max_side:
            img = img.copy()
            img.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
        return img
    except BadImageError:
        raise
    except Image.DecompressionBombError as exc:
        raise BadImageError(f"image too large to decode safely: {exc}") from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise BadImageError(f"unreadable image: {type(exc).__name__}: {exc}") from exc


def is_blank(img: Image.Image) -> bool:
    """True when every pixel has the same colour: what safety filters and failed
    decodes return (black, grey or white squares). Scoring one as a real drawing
    would skew every metric."""
    return all(low == high for low, high in img.convert("RGB").getextrema())


def check_utf8(text: str, what: str) -> str:
    """``text`` if it can be stored as UTF-8; raises ValueError naming ``what``
    (lone surrogates come from bytes decoded with ``surrogateescape``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} is not valid UTF-8 text ({exc.reason} at position {exc.start})") from None
    return text
