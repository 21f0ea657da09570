"""The networks behind GenEval's checks: an OWLv2 detector and a CLIP colour classifier,
injectable as a name, a loaded model, an adapter object or a loader, plus
:func:`evaluate_image` (detect, then judge by :mod:`lmms_genbench.metrics.functional.geneval`'s rules).

Why OWLv2 and CLIP rather than GenEval's Mask2Former: see the rules module's docstring.
Importing this module imports neither torch nor transformers; building a network does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .owlv2_batch import OWLv2Pixels, decode_detections
from .common import ModelCache, cast_modules, check_device, check_dtype, to_rgb_images
from ..functional.geneval import (
    COLOR_TEMPLATES,
    COLORS,
    DEFAULT_COLOR_CLIP,
    DEFAULT_DETECTOR,
    DETECTOR_QUERY,
    Box,
    Detection,
    GenEvalResult,
    GenEvalRules,
    _check_unit,
    evaluate_detections,
    validate_metadata,
)

__all__ = ['CLIPColorClassifier', 'ColorClassifier', 'Detector', 'OWLv2Detector', 'build_color_classifier', 'build_detector', 'clear_geneval_cache', 'evaluate_image', 'evaluate_images', 'get_color_classifier', 'get_detector']


@runtime_checkable
class Detector(Protocol):
    def detect(self, image: Any, classes: Sequence[str]) -> dict[str, list[Detection]]:
        """Raw detections (boxes in pixels of ``image``) for each of ``classes``."""


@runtime_checkable
class ColorClassifier(Protocol):
    def classify(self, image: Any, boxes: Sequence[Box], classname: str) -> list[str]:
        """One of :data:`COLORS` for the crop of each box."""


def _is_module(obj: Any) -> bool:
    # a torch module without importing torch: a loaded network, not a loader
    return hasattr(obj, "parameters") and hasattr(obj, "forward")


def _check_template(name: str, template: Any, keys: tuple[str, ...]) -> str:
    try:
        ok = isinstance(template, str) and bool(
            template.format_map({k: "x" for k in keys})
        )
    except (KeyError, ValueError, IndexError):
        ok = False
    if not ok:
        fields = ", ".join("{" + k + "}" for k in keys)
        raise ValueError(
            f"{name} must be a str.format template using only {fields}, got {template!r}"
        )
    return template


class OWLv2Detector:
    """Open-vocabulary detector through transformers' ``Owlv2ForObjectDetection``.

    Each class is queried with ``query_template`` (default "a photo of a {class}"); its score
    per predicted box is the sigmoid of that query's logit. Boxes (relative to OWLv2's square,
    bottom/right-padded input) are scaled to pixels and clipped to the picture (boxes wholly in
    the padding are dropped), filtered at ``score_floor`` and de-duplicated per class by NMS at ``nms_iou`` (torchvision), then
    returned most confident first.

    ``score_floor`` only trims the output: greedy NMS never lets a lower score suppress a
    higher one, so any rule threshold >= ``score_floor`` sees the same boxes.

    :meth:`detect_batch` runs a batch of pictures, each with its own classes, through one
    vision forward pass; each query's text embedding is computed once and kept (the 553
    GenEval prompts name 80 classes), and the batch's logits and boxes reach the CPU in one
    transfer. :meth:`detect` is a batch of one. Per picture the numbers are those of the
    model's own ``forward`` up to float rounding of the batched matrix products.

    Args:
        model: hub name or local path, or a loaded ``Owlv2ForObjectDetection``.
        processor: its ``Owlv2Processor``; None loads it from ``model`` when that is a name.
        query_template: text query per class, with ``{class}``.
        nms_iou: IoU above which a less confident box of the same class is dropped, in (0, 1].
        score_floor: drop boxes scoring at or below this, in [0, 1).
        device: torch device string.
    """

    def __init__(
        self,
        model: Any = DEFAULT_DETECTOR,
        processor: Any = None,
        *,
        query_template: str = DETECTOR_QUERY,
        nms_iou: float = 0.5,
        score_floor: float = 0.1,
        device: str = "cpu",
    ) -> None:
        self.query_template = _check_template(
            "query_template", query_template, ("class",)
        )
        self.nms_iou = _check_unit("nms_iou", nms_iou, low_open=True, high_closed=True)
        self.score_floor = _check_unit(
            "score_floor", score_floor, low_open=False, high_closed=False
        )
        self.device = check_device(device)
        if isinstance(model, (str, os.PathLike)):
            if not str(model):
                raise ValueError("model must be a non-empty model name or path")
            from transformers import Owlv2ForObjectDetection, Owlv2Processor

            self.name = str(model)
            processor = (
                Owlv2Processor.from_pretrained(self.name)
                if processor is None
                else processor
            )
            model = Owlv2ForObjectDetection.from_pretrained(self.name)
        elif _is_module(model):
            if processor is None:
                raise ValueError(
                    "processor is required when model is a loaded instance (pass its Owlv2Processor)"
                )
            self.name = type(model).__name__
        else:
            raise TypeError(
                f"model must be a name/path or a loaded Owlv2ForObjectDetection, got {type(model).__name__}"
            )
        if not callable(processor):
            raise TypeError(
                f"processor must be an Owlv2Processor, got {type(processor).__name__}"
            )
        self.processor = processor
        self.model = model.to(self.device).eval()
        self._lock = threading.Lock()
        # the parts of Owlv2ForObjectDetection.forward, to batch pictures and keep text embeddings
        self._parts = all(
            hasattr(model, name) for name in ("owlv2", "image_embedder", "class_predictor", "box_predictor")
        )
        self._query_embeds: dict[str, Any] = {}
        self._pixels = OWLv2Pixels(getattr(processor, "image_processor", processor))

    @staticmethod
    def _names(classes: Any) -> list[str]:
        if (
            isinstance(classes, (str, bytes))
            or not isinstance(classes, Sequence)
            or not classes
        ):
            raise ValueError(
                f"classes must be a non-empty list of class names, got {classes!r}"
            )
        for i, c in enumerate(classes):
            if not isinstance(c, str) or not c.strip():
                raise ValueError(f"classes[{i}] must be a non-empty string, got {c!r}")
        return list(dict.fromkeys(classes))

    def detect(self, image: Any, classes: Sequence[str]) -> dict[str, list[Detection]]:
        """Detections of each class in ``image`` (a PIL image or a path), most confident first."""
        if self._parts:
            return self.detect_batch([image], [classes])[0]
        return self._detect_forward(image, self._names(classes))

    def _embed_queries(self, queries: Sequence[str]) -> None:
        """Text embeddings of the queries not seen before, in one text forward pass
        (normalised as ``Owlv2Model.forward`` does before the class head)."""
        import torch

        new = [q for q in dict.fromkeys(queries) if q not in self._query_embeds]
        if not new:
            return
        # OWLv2's text tower has 16 positions: a longer query would not run at all
        tokens = self.processor(text=[new], return_tensors="pt", padding="max_length", truncation=True)
        embeds = self.model.owlv2.get_text_features(
            input_ids=tokens["input_ids"].to(self.device),
            attention_mask=tokens["attention_mask"].to(self.device),
        )
        embeds = getattr(embeds, "pooler_output", embeds)  # transformers 5 returns the model output
        embeds = embeds / torch.linalg.norm(embeds, ord=2, dim=-1, keepdim=True)
        for q, e in zip(new, embeds):
            self._query_embeds[q] = e

    def detect_batch(
        self, images: Sequence[Any], classes: Sequence[Sequence[str]]
    ) -> list[dict[str, list[Detection]]]:
        """:meth:`detect` of each picture with its own classes, in one forward pass."""
        import torch

        if len(images) != len(classes):
            raise ValueError(f"images and classes must pair up, got {len(images)} images and {len(classes)} class lists")
        if not images:
            return []
        names = [self._names(c) for c in classes]
        if not self._parts:
            return [self._detect_forward(img, n) for img, n in zip(images, names)]
        pictures = to_rgb_images(list(images), "images")
        queries = [[self.query_template.format_map({"class": c}) for c in n] for n in names]
        with self._lock, torch.inference_mode():
            self._embed_queries([q for qs in queries for q in qs])
            dtype = next(self.model.parameters()).dtype
            pixels = self._pixels(pictures, self.device)
            feature_map, _ = self.model.image_embedder(pixel_values=pixels.to(dtype))
            b, h, w, d = feature_map.shape
            image_feats = feature_map.reshape(b, h * w, d)
            width = max(len(qs) for qs in queries)
            query_embeds = torch.zeros((b, width, self._query_embeds[queries[0][0]].shape[-1]),
                                       dtype=image_feats.dtype, device=image_feats.device)
            query_mask = torch.zeros((b, width), dtype=torch.bool, device=image_feats.device)
            for i, qs in enumerate(queries):
                query_embeds[i, : len(qs)] = torch.stack([self._query_embeds[q] for q in qs])
                query_mask[i, : len(qs)] = True
            logits, _ = self.model.class_predictor(image_feats, query_embeds, query_mask)
            boxes = self.model.box_predictor(image_feats, feature_map)
            # one transfer for the whole batch; float64 for exact pixel arithmetic
            host = torch.cat([logits.float(), boxes.float()], dim=-1).double().cpu()
        return self._decode(host[..., :width], host[..., width:], [p.size for p in pictures], names)

    def _detect_forward(self, image: Any, names: list[str]) -> dict[str, list[Detection]]:
        """One picture through the model's own ``forward`` (a model without its parts)."""
        import torch

        (img,) = to_rgb_images([image], "image")
        queries = [self.query_template.format_map({"class": c}) for c in names]
        with self._lock, torch.inference_mode():
            # OWLv2's text tower has 16 positions: a longer query would not run at all
            inputs = self.processor(text=[queries], images=img, return_tensors="pt", padding="max_length", truncation=True)
            dtype = next(self.model.parameters()).dtype
            out = self.model(
                input_ids=inputs["input_ids"].to(self.device),
                attention_mask=inputs["attention_mask"].to(self.device),
                pixel_values=inputs["pixel_values"].to(self.device, dtype),
            )
            logits = out.logits.double().cpu()  # 1 x boxes x queries
            boxes = out.pred_boxes.double().cpu()
        return self._decode(logits, boxes, [img.size], [names])[0]

    def _decode(self, logits: Any, boxes: Any, sizes: list[tuple[int, int]], names: list[list[str]]) -> list[dict[str, list[Detection]]]:
        """Detections per picture and class from the batch's CPU float64 logits and boxes."""
        found = decode_detections(logits, boxes, sizes, [len(n) for n in names],
                                  score_floor=self.score_floor, nms_iou=self.nms_iou)
        return [
            {cls: [Detection(box, score) for box, score in zip(*per_query)] for cls, per_query in zip(n, per_pic)}
            for n, per_pic in zip(names, found)
        ]


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


def _call_loader(loader: Callable[[], Any], protocol: type, what: str, method: str) -> Any:
    """Call a zero-argument loader and check it returned a ``protocol`` object."""
    made = loader()
    if not isinstance(made, protocol):
        raise TypeError(f"the {what} loader returned {type(made).__name__}, which has no {method}()")
    return made


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
    if isinstance(spec, (str, os.PathLike)):
        if os.fspath(spec) == "tiny-owlv2":
            from ...smoke.vision import tiny_owlv2

            model, processor = tiny_owlv2(seed=0)
        else:
            model = spec
        return OWLv2Detector(model, processor, device=device, **options)
    if isinstance(spec, Detector):
        return spec
    if _is_module(spec):
        return OWLv2Detector(spec, processor, device=device, **options)
    if callable(spec):
        return _call_loader(spec, Detector, "detector", "detect")
    raise TypeError(
        "spec must be a model name/path, a loaded Owlv2ForObjectDetection, a detector object or a "
        f"zero-argument loader, got {type(spec).__name__}"
    )


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

    if isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec)
        if not text:
            raise ValueError("spec must be a non-empty model name or path")
        key = text if text == "tiny-clip" else f"clip:{text}"
        return CLIPColorClassifier(
            get_image_encoder(key, device=device, batch_size=batch_size, dtype=dtype),
            get_text_encoder(key, device=device, batch_size=batch_size, dtype=dtype),
            templates=templates,
        )
    if isinstance(spec, ColorClassifier):
        return spec
    if _is_module(spec):
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
    if callable(spec):
        return _call_loader(spec, ColorClassifier, "colour classifier", "classify")
    raise TypeError(
        "spec must be a CLIP name/path, a loaded CLIPModel, a colour classifier or a zero-argument "
        f"loader, got {type(spec).__name__}"
    )


_CACHE = ModelCache()


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
    if not isinstance(spec, (str, os.PathLike)):
        return build_detector(
            spec, device=device, nms_iou=nms_iou, score_floor=score_floor
        )
    device = check_device(device)
    key = ("detector", os.fspath(spec), device, nms_iou, score_floor, dtype)

    def load() -> Any:
        detector = build_detector(spec, device=device, nms_iou=nms_iou, score_floor=score_floor)
        cast_modules([detector.model], dtype)
        return detector

    return _CACHE.get(key, load)


def get_color_classifier(
    spec: Any = DEFAULT_COLOR_CLIP, *, device: str = "cpu", batch_size: int = 32, dtype: str = "float32"
) -> Any:
    """:func:`build_color_classifier` for a name, built once per process (thread-safe);
    its CLIP towers are the cached encoders of ``dtype``."""
    dtype = check_dtype(dtype)
    if not isinstance(spec, (str, os.PathLike)):
        return build_color_classifier(spec, device=device, batch_size=batch_size)
    device = check_device(device)
    key = ("color", os.fspath(spec), device, batch_size, dtype)
    return _CACHE.get(
        key, lambda: build_color_classifier(spec, device=device, batch_size=batch_size, dtype=dtype)
    )


def clear_geneval_cache() -> None:
    """Forget cached detectors and colour classifiers."""
    _CACHE.clear()


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
    classes = [
        list(dict.fromkeys([r["class"] for r in meta["include"]] + [r["class"] for r in meta["exclude"]]))
        for meta in metas
    ]
    batch = getattr(detector, "detect_batch", None)
    found = batch(pictures, classes) if callable(batch) else [detector.detect(p, c) for p, c in zip(pictures, classes)]
    results = []
    for img, meta, detections, color in zip(pictures, metas, found, needs_color):
        color_fn = (lambda cls, boxes, img=img: color_classifier.classify(img, boxes, cls)) if color else None
        results.append(evaluate_detections(meta, detections, image_size=img.size, rules=rules, color_fn=color_fn))
    return results
