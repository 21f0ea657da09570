"""What every encoder shares: batching, a settable device and batch size, the lock, and
the checks of what ``encode`` takes (images for :class:`ImageEncoder`, strings for
:class:`TextEncoder`). The network families subclass these (``vit``, ``dino``, ``clip``,
``sentence``); :mod:`.encoders` builds them from a spec.

A cached encoder can be shared by threads (lmms-eval's workers, a scorer's threads over
blocks): forward passes of one network run at once (inference only reads the weights),
while what has state (a tokenizer's settings, the counters) holds the encoder's lock.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from .common import check_batch_size, check_device, to_rgb_images

__all__ = ["ImageEncoder", "TextEncoder", "encoder_logger"]

#: the encoders' one logger, named as it was when they lived in one module (logging
#: configurations and filters name it)
encoder_logger = logging.getLogger("lmms_genbench.metrics.networks.encoders")


def _transformers_major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def _load_image_processor(name: str) -> Any:
    from transformers import AutoImageProcessor

    # PIL backend = the pixels GenCeption's (transformers 4) code produced; v5 would pick torchvision
    if _transformers_major() >= 5:
        return AutoImageProcessor.from_pretrained(name, backend="pil")
    return AutoImageProcessor.from_pretrained(name, use_fast=False)


def _model_dtype(model: Any) -> Any:
    try:
        return next(model.parameters()).dtype
    except (StopIteration, AttributeError):
        return None


class _BatchedEncoder:
    """Common batching, device and locking logic. Subclasses implement ``_encode_batch``."""

    modality: str = ""
    # False where the backend batches by itself (sentence-transformers sorts texts
    # by length first; slicing here before that pads mixed lengths)
    slices_batches: bool = True

    def __init__(self, device: str, batch_size: int) -> None:
        self._device = check_device(device)
        self._batch_size = check_batch_size(batch_size)
        self._lock = threading.RLock()

    def _take(self, name: str, model: Any) -> None:
        """Keep ``model`` (a torch module), on this encoder's device, in eval mode."""
        self.name = name
        self.model = model.to(self._device).eval()

    # what ``device`` moves and ``dtype`` casts
    def _modules(self) -> list[Any]:
        model = getattr(self, "model", None)
        return [] if model is None else [model]

    @property
    def device(self) -> str:
        return self._device

    @device.setter
    def device(self, value: str) -> None:
        value = check_device(value)
        with self._lock:
            for module in self._modules():
                module.to(value)
            self._device = value

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        self._batch_size = check_batch_size(value)

    @property
    def dim(self) -> int:
        """Embedding dimension D."""
        raise NotImplementedError

    def _check_items(self, items: Sequence[Any]) -> None:
        raise NotImplementedError

    def _encode_batch(self, batch: Sequence[Any], counts: dict[str, int]) -> Any:
        """Embeddings of one batch; adds what it cut to ``counts`` (text encoders)."""
        raise NotImplementedError

    def encode(self, items: Sequence[Any]) -> Any:
        """Embeddings of ``items`` as a float32 CPU tensor N x D, computed ``batch_size`` at a time."""
        return self.encode_with_counts(items)[0]

    def encode_with_counts(self, items: Sequence[Any]) -> tuple[Any, dict[str, int]]:
        """:meth:`encode`, and this call's own counts (``truncated``, ``chunked`` texts):
        the lifetime counters of a shared encoder cannot tell calls of several threads apart."""
        import torch

        self._check_items(items)
        if len(items) == 0:
            return torch.zeros((0, self.dim), dtype=torch.float32), {}
        outputs = []
        counts: dict[str, int] = {}
        step = self._batch_size if self.slices_batches else len(items)
        with torch.inference_mode():
            for start in range(0, len(items), step):
                emb = self._encode_batch(items[start : start + step], counts)
                outputs.append(emb.detach().to("cpu", torch.float32))
        return torch.cat(outputs, dim=0), counts

    def __call__(self, items: Sequence[Any]) -> Any:
        return self.encode(items)

    def with_options(self, *, batch_size: int, **options: Any) -> Any:
        """This encoder's network (shared, with its lock) under other call options:
        ``batch_size``, and for CLIP text ``long_text``. Counters start from this
        encoder's and are the new object's own from then on."""
        view = copy.copy(self)
        view._batch_size = check_batch_size(batch_size)
        for key, value in options.items():
            view._set_option(key, value)
        return view

    def _set_option(self, key: str, value: Any) -> None:
        raise TypeError(f"{type(self).__name__} has no option {key!r}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={getattr(self, 'name', '?')!r}, device={self._device!r}, batch_size={self._batch_size})"


class ImageEncoder(_BatchedEncoder):
    """Base class of image encoders: ``encode`` takes PIL images or image paths (converted to RGB).

    A subclass names its ``default_model`` and turns ``(model, processor)`` into ``(name,
    loaded model, processor)`` in ``_resolve`` (:func:`.loading.resolve_model` does the work).

    Args:
        model: hub name or local path, or a loaded model (which ones: the subclass says);
            None: ``default_model``.
        processor: image processor, or a name/path to load one; None: the subclass's default.
        device: torch device string.
        batch_size: images per forward pass.
    """

    modality = "image"
    default_model: str = ""

    def __init__(
        self,
        model: Any = None,
        processor: Any = None,
        *,
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        super().__init__(device, batch_size)
        name, loaded, processor = self._resolve(self.default_model if model is None else model, processor)
        self._set_processor(processor)
        self._take(name, loaded)

    def _resolve(self, model: Any, processor: Any) -> tuple[str, Any, Any]:
        raise NotImplementedError

    def _check_items(self, items: Sequence[Any]) -> None:
        from PIL import Image

        if isinstance(items, (str, bytes, os.PathLike)) or not isinstance(
            items, Sequence
        ):
            raise TypeError(
                f"images must be a sequence of PIL images or paths, got {type(items).__name__}"
            )
        for i, item in enumerate(items):
            if not isinstance(item, (Image.Image, str, os.PathLike)):
                raise TypeError(
                    f"images[{i}] must be a PIL.Image.Image or a path, got {type(item).__name__}"
                )

    def _set_processor(self, processor: Any) -> None:
        """An image processor object, or a name/path to load one."""
        if isinstance(processor, (str, os.PathLike)):
            processor = _load_image_processor(str(processor))
        if not callable(processor):
            raise TypeError(f"processor must be an image processor, got {type(processor).__name__}")
        self.processor = processor

    def _pixel_values(self, batch: Sequence[Any]) -> Any:
        images = to_rgb_images(batch, "images")
        pixel_values = self.processor(images=images, return_tensors="pt")["pixel_values"]
        return pixel_values.to(self._device, dtype=_model_dtype(self.model))


class TextEncoder(_BatchedEncoder):
    """Base class of text encoders: ``encode`` takes a sequence of strings."""

    modality = "text"

    def _check_items(self, items: Sequence[Any]) -> None:
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise TypeError(
                f"texts must be a sequence of strings (wrap a single text in a list), got {type(items).__name__}"
            )
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise TypeError(f"texts[{i}] must be a str, got {type(item).__name__}")

