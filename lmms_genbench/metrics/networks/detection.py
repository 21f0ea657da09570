"""The networks behind GenEval's checks: an OWLv2 detector (:mod:`.owlv2`) and a CLIP colour
classifier, injectable as a name, a loaded model, an adapter object or a loader, plus
:func:`evaluate_image` (detect, then judge by :mod:`lmms_genbench.metrics.functional.geneval`'s rules).

Why OWLv2 and CLIP rather than GenEval's Mask2Former: see the rules module's docstring.
Importing this module imports neither torch nor transformers; building a network does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .owlv2 import OWLv2Detector, _check_template
from .loading import cached_network, clear_networks, is_module, is_name, ready_or_loaded
from .common import cast_modules, check_device, check_dtype, to_rgb_images
from ..functional.geneval import (
    COLOR_TEMPLATES,
    COLORS,
    DEFAULT_COLOR_CLIP,
    DEFAULT_DETECTOR,
    Box,
    Detection,
    GenEvalResult,
    GenEvalRules,
    evaluate_detections,
    validate_metadata,
)

__all__ = ['CLIPColorClassifier', 'ColorClassifier', 'Detector', 'OWLv2Detector', 'build_color_classifier', 'build_detector', 'clear_geneval_cache', 'detect_all', 'evaluate_image', 'evaluate_images', 'get_color_classifier', 'get_detector', 'queried_classes']


@runtime_checkable
class Detector(Protocol):
    def detect(self, image: Any, classes: Sequence[str]) -> dict[str, list[Detection]]:
        """Raw detections (boxes in pixels of ``image``) for each of ``classes``."""


@runtime_checkable
class ColorClassifier(Protocol):
    def classify(self, image: Any, boxes: Sequence[Box], classname: str) -> list[str]:
        """One of :data:`COLORS` for the crop of each box."""


class CLIPColorClassifier:
    """GenEval's colour classifier: CLIP zero-shot over :data:`COLORS` on each box crop.

    A colour's text embedding is the L2-normalised mean of its L2-normalised template
    embeddings (one set per class name, cached); the crop's predicted colour is the
    colour of highest cosine similarity. Uses the package's CLIP encoders.

    Args:
        image_encoder: a :class:`~lmms_genbench.metrics.networks.encoders.CLIPImageEncoder` (or any
            object whose ``encode(images)`` returns N x D embeddings).
        text_encoder: the matching :class:`~lmms_genbench.metrics.networks.encoders.CLIPTextEncoder`.
        templates: prompts with ``{color}`` and ``{class}`` (default GenEval's three).
    """

    def __init__(
        self,
        image_encoder: Any,
        text_encoder: Any,
        *,
        templates: Sequence[str] = COLOR_TEMPLATES,
    ) -> None:
        for name, enc in (
            ("image_encoder", image_encoder),
            ("text_encoder", text_encoder),
        ):
            if isinstance(enc, (str, bytes, os.PathLike)) or not callable(
                getattr(enc, "encode", None)
            ):
                raise TypeError(
                    f"{name} must be an encoder with encode(), got {type(enc).__name__}"
                )
        if (
            isinstance(templates, str)
            or not isinstance(templates, Sequence)
            or not templates
        ):
            raise ValueError(
                f"templates must be a non-empty list of strings, got {templates!r}"
            )
        self.templates = tuple(
            _check_template(f"templates[{i}]", t, ("color", "class"))
            for i, t in enumerate(templates)
        )
        self.image_encoder = image_encoder
        self.text_encoder = text_encoder
        self._classifiers: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _classifier(self, classname: str) -> Any:
        with self._lock:
            if classname not in self._classifiers:
                texts = [
                    t.format_map({"color": c, "class": classname})
                    for c in COLORS
                    for t in self.templates
                ]
                emb = (
                    self.text_encoder.encode(texts)
                    .float()
                    .reshape(len(COLORS), len(self.templates), -1)
                )
                emb = emb / emb.norm(dim=-1, keepdim=True)
                mean = emb.mean(dim=1)
                self._classifiers[classname] = mean / mean.norm(dim=-1, keepdim=True)
            return self._classifiers[classname]

    def classify(
        self, image: Any, boxes: Sequence[Sequence[float]], classname: str
    ) -> list[str]:
        """The colour of each box's crop of ``image`` (PIL image or path)."""
        if not isinstance(classname, str) or not classname.strip():
            raise ValueError(f"classname must be a non-empty string, got {classname!r}")
        if isinstance(boxes, (str, bytes)) or not isinstance(boxes, Sequence):
            raise TypeError(
                f"boxes must be a list of (x1, y1, x2, y2), got {type(boxes).__name__}"
            )
        if not boxes:
            return []
        (img,) = to_rgb_images([image], "image")
        crops = []
        for box in boxes:
            x1, y1, x2, y2 = Detection(tuple(box), 0.0).box
            # at least one pixel, so a degenerate box still gives an image to encode
            crops.append(img.crop((x1, y1, max(x2, x1 + 1), max(y2, y1 + 1))))
        feats = self.image_encoder.encode(crops).float()
        feats = feats / feats.norm(dim=-1, keepdim=True)
        best = (feats @ self._classifier(classname).T).argmax(dim=-1)
        return [COLORS[i] for i in best.tolist()]


# --------------------------------------------------------------------------- factories
DetectorSpec = str | os.PathLike | Detector | Callable[[], Any]
ColorSpec = str | os.PathLike | ColorClassifier | Callable[[], Any]


def build_detector(
    spec: Any = DEFAULT_DETECTOR,
    *,
    processor: Any = None,
    device: str = "cpu",
    **options: Any,
) -> Any:
    """A detector with ``detect(image, classes)``.

    Args:
        spec: ``"tiny-owlv2"`` (random weights, tests); a hub name or path of an OWLv2
            checkpoint; a loaded ``Owlv2ForObjectDetection`` (with ``processor``); an object
            with ``detect`` (returned unchanged); or a zero-argument loader returning one.
        processor: the ``Owlv2Processor`` of a loaded model.
        device: torch device string.
        options: :class:`OWLv2Detector` keywords (``nms_iou``, ``score_floor``, ``query_template``).
    """
    if is_name(spec):
        if os.fspath(spec) == "tiny-owlv2":
            from ...smoke.vision import tiny_owlv2

            model, processor = tiny_owlv2(seed=0)
        else:
            model = spec
        return OWLv2Detector(model, processor, device=device, **options)
    if is_module(spec) and not isinstance(spec, Detector):  # a loaded Owlv2ForObjectDetection
        return OWLv2Detector(spec, processor, device=device, **options)
    return ready_or_loaded(spec, lambda made: isinstance(made, Detector), "detector", "detect")


def build_color_classifier(
    spec: Any = DEFAULT_COLOR_CLIP,
    *,
    image_processor: Any = None,
    tokenizer: Any = None,
    device: str = "cpu",
    batch_size: int = 32,
    templates: Sequence[str] = COLOR_TEMPLATES,
    dtype: str = "float32",
) -> Any:
    """A colour classifier with ``classify(image, boxes, classname)``.

    Args:
        spec: ``"tiny-clip"`` (random weights, tests); a CLIP hub name or path (loaded through
            the package's cached CLIP encoders); a loaded ``CLIPModel`` (with
            ``image_processor`` and ``tokenizer``); an object with ``classify`` (returned
            unchanged); or a zero-argument loader returning one.
        image_processor, tokenizer: those of a loaded ``CLIPModel``.
        device: torch device string.
        batch_size: crops / prompts per forward pass.
        templates: colour prompts with ``{color}`` and ``{class}``.
        dtype: weight dtype of the CLIP towers loaded by name.
    """
    from .encoders import (
        CLIPImageEncoder,
        CLIPTextEncoder,
        get_image_encoder,
        get_text_encoder,
    )

    if is_name(spec):
        text = os.fspath(spec)
        if not text:
            raise ValueError("spec must be a non-empty model name or path")
        key = text if text == "tiny-clip" else f"clip:{text}"
        return CLIPColorClassifier(
            get_image_encoder(key, device=device, batch_size=batch_size, dtype=dtype),
            get_text_encoder(key, device=device, batch_size=batch_size, dtype=dtype),
            templates=templates,
        )
    if is_module(spec) and not isinstance(spec, ColorClassifier):  # a loaded CLIPModel
        if image_processor is None or tokenizer is None:
            raise ValueError(
                "image_processor and tokenizer are required when spec is a loaded CLIPModel"
            )
        return CLIPColorClassifier(
            CLIPImageEncoder(
                spec, image_processor, device=device, batch_size=batch_size
            ),
            CLIPTextEncoder(spec, tokenizer, device=device, batch_size=batch_size),
            templates=templates,
        )
    return ready_or_loaded(spec, lambda made: isinstance(made, ColorClassifier), "colour classifier", "classify")


def get_detector(
    spec: Any = DEFAULT_DETECTOR,
    *,
    device: str = "cpu",
    nms_iou: float = 0.5,
    score_floor: float = 0.1,
    dtype: str = "float32",
) -> Any:
    """:func:`build_detector` for a name, loaded once per process per settings (thread-safe);
    objects and loaders go straight to :func:`build_detector`. ``dtype``: the weights'
    (``"float32"``, ``"bfloat16"``, ``"float16"``)."""
    dtype = check_dtype(dtype)
    if not is_name(spec):
        return build_detector(
            spec, device=device, nms_iou=nms_iou, score_floor=score_floor
        )
    device = check_device(device)
    key = ("detector", os.fspath(spec), device, nms_iou, score_floor, dtype)

    def load() -> Any:
        detector = build_detector(spec, device=device, nms_iou=nms_iou, score_floor=score_floor)
        cast_modules([detector.model], dtype)
        return detector

    return cached_network(key, load)


def get_color_classifier(
    spec: Any = DEFAULT_COLOR_CLIP, *, device: str = "cpu", batch_size: int = 32, dtype: str = "float32"
) -> Any:
    """:func:`build_color_classifier` for a name, built once per process (thread-safe);
    its CLIP towers are the cached encoders of ``dtype``."""
    dtype = check_dtype(dtype)
    if not is_name(spec):
        return build_color_classifier(spec, device=device, batch_size=batch_size)
    device = check_device(device)
    key = ("color", os.fspath(spec), device, batch_size, dtype)
    return cached_network(
        key, lambda: build_color_classifier(spec, device=device, batch_size=batch_size, dtype=dtype)
    )


def clear_geneval_cache() -> None:
    """Forget cached detectors and colour classifiers (the encoders and FID extractors stay)."""
    clear_networks("detector", "color")


# --------------------------------------------------------------------------- one image end to end
def _open_image(image: Any) -> Any:
    from PIL import Image, ImageOps

    if isinstance(image, (str, os.PathLike)):
        with Image.open(image) as im:
            # GenEval reads the file honouring its EXIF orientation
            return ImageOps.exif_transpose(im).convert("RGB")
    if isinstance(image, Image.Image):
        return image.convert("RGB")
    raise TypeError(
        f"image must be a PIL.Image.Image or a path, got {type(image).__name__}"
    )


def evaluate_image(
    image: Any,
    metadata: Mapping[str, Any],
    *,
    detector: Any,
    color_classifier: Any = None,
    rules: GenEvalRules | None = None,
) -> GenEvalResult:
    """Detect the classes ``metadata`` names in ``image`` and judge it by GenEval's rules.

    Args:
        image: PIL image or path.
        metadata: one GenEval entry.
        detector: an object with ``detect(image, classes)`` (see :func:`build_detector`).
        color_classifier: an object with ``classify(image, boxes, classname)``; required when
            an include asks for a colour.
        rules: settings; None = the default rule set (``GenEvalRules()``, ``"owlv2"``).
    """
    meta = validate_metadata(metadata)
    if not isinstance(detector, Detector):
        raise TypeError(
            f"detector must have detect(image, classes), got {type(detector).__name__}"
        )
    needs_color = any("color" in req for req in meta["include"])
    if needs_color and not isinstance(color_classifier, ColorClassifier):
        raise ValueError(
            "metadata asks for a colour: color_classifier must have classify(image, boxes, classname), "
            f"got {type(color_classifier).__name__}"
        )
    img = _open_image(image)
    classes = list(
        dict.fromkeys(
            [r["class"] for r in meta["include"]]
            + [r["class"] for r in meta["exclude"]]
        )
    )
    detections = detector.detect(img, classes)
    color_fn = (
        (lambda cls, boxes: color_classifier.classify(img, boxes, cls))
        if needs_color
        else None
    )
    return evaluate_detections(
        meta, detections, image_size=img.size, rules=rules, color_fn=color_fn
    )


def queried_classes(meta: Mapping[str, Any]) -> list[str]:
    """The classes a (validated) metadata entry asks the detector for: included, then
    excluded, each once."""
    return list(dict.fromkeys([r["class"] for r in meta["include"]] + [r["class"] for r in meta["exclude"]]))


def detect_all(detector: Any, pictures: Sequence[Any], classes: Sequence[Sequence[str]]) -> list[Any]:
    """Each picture's detections of its classes: one ``detect_batch`` call where the detector
    has one (:class:`OWLv2Detector`), else ``detect`` per picture."""
    batch = getattr(detector, "detect_batch", None)
    return batch(pictures, classes) if callable(batch) else [detector.detect(p, c) for p, c in zip(pictures, classes)]


def evaluate_images(
    images: Sequence[Any],
    metadata: Sequence[Mapping[str, Any]],
    *,
    detector: Any,
    color_classifier: Any = None,
    rules: GenEvalRules | None = None,
) -> list[GenEvalResult]:
    """:func:`evaluate_image` of each picture with its own metadata entry; a detector with
    ``detect_batch`` (:class:`OWLv2Detector`) sees the whole list in one call."""
    if len(images) != len(metadata):
        raise ValueError(f"images and metadata must pair up, got {len(images)} and {len(metadata)}")
    if not isinstance(detector, Detector):
        raise TypeError(
            f"detector must have detect(image, classes), got {type(detector).__name__}"
        )
    metas = [validate_metadata(m) for m in metadata]
    needs_color = [any("color" in req for req in meta["include"]) for meta in metas]
    if any(needs_color) and not isinstance(color_classifier, ColorClassifier):
        raise ValueError(
            "metadata asks for a colour: color_classifier must have classify(image, boxes, classname), "
            f"got {type(color_classifier).__name__}"
        )
    pictures = [_open_image(image) for image in images]
    found = detect_all(detector, pictures, [queried_classes(meta) for meta in metas])
    results = []
    for img, meta, detections, color in zip(pictures, metas, found, needs_color):
        color_fn = (lambda cls, boxes, img=img: color_classifier.classify(img, boxes, cls)) if color else None
        results.append(evaluate_detections(meta, detections, image_size=img.size, rules=rules, color_fn=color_fn))
    return results
