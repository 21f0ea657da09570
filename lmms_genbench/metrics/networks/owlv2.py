"""GenEval's OWLv2 detector, :class:`OWLv2Detector`: batched pictures through one vision pass,
cached query embeddings, batched pre- and post-processing (:mod:`.owlv2_batch`). Built and cached
by :mod:`.detection`'s factories, which re-export it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from .loading import is_module
from .common import check_device, to_rgb_images
from .owlv2_batch import OWLv2Pixels, decode_detections
from ..functional.geneval import DEFAULT_DETECTOR, DETECTOR_QUERY, Detection, check_unit

__all__ = ["OWLv2Detector"]


def _decoded(box: tuple[float, float, float, float], score: float) -> Detection:
    """``Detection(box, score)`` for what :func:`.owlv2_batch.decode_detections` returns, without
    re-checking it: 4 finite Python floats clipped to the picture with x1 < x2 and y1 < y2, a
    float score in (score_floor, 1] (a NaN fails every comparison there and is dropped). The
    checks cost more per object than decoding it; a test holds the two equal."""
    det = object.__new__(Detection)
    object.__setattr__(det, "box", box)
    object.__setattr__(det, "score", score)
    object.__setattr__(det, "color", None)
    return det


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
        self.nms_iou = check_unit("nms_iou", nms_iou, low_open=True, high_closed=True)
        self.score_floor = check_unit(
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
        elif is_module(model):
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
        # the same embeddings as one matrix (and a zero row last, for padding) with each query's row
        self._query_rows: tuple[dict[str, int], Any] = ({}, None)
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

    def _query_matrix(self) -> tuple[dict[str, int], Any]:
        """The known query embeddings stacked (rebuilt when queries were added or forgotten)."""
        import torch

        rows, matrix = self._query_rows
        if matrix is None or len(rows) != len(self._query_embeds) or any(q not in rows for q in self._query_embeds):
            embeds = list(self._query_embeds.values())
            matrix = torch.cat([torch.stack(embeds), torch.zeros_like(embeds[0])[None]])
            self._query_rows = rows, matrix = {q: i for i, q in enumerate(self._query_embeds)}, matrix
        return rows, matrix

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
            # one gather for the batch's queries; padding reads the zero row, masked as before
            rows, matrix = self._query_matrix()
            pad = len(rows)
            index = torch.tensor([[rows[q] for q in qs] + [pad] * (width - len(qs)) for qs in queries])
            query_embeds = matrix[index.to(matrix.device)].to(image_feats.dtype)
            query_mask = (index < pad).to(image_feats.device)
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
            {cls: [_decoded(box, score) for box, score in zip(*per_query)] for cls, per_query in zip(n, per_pic)}
            for n, per_pic in zip(names, found)
        ]
