"""MGG's networks behind the store's feature cache (:mod:`.stored`): the OWLv2 detector's
detections of an image and the colour CLIP's answer for a crop set, so a rerun over a complete
store loads neither.

Stored per item (:class:`~lmms_genbench.store.features.FeatureStore` files):

* a detection: item = sha256 of (the image file's sha256, the classes queried), under the
  detector's identity (spec, weights, device type, dtype, ``nms_iou``, ``score_floor``, the query
  template, torch/transformers/torchvision versions); the array is one float64 row per
  detection (query index, x1, y1, x2, y2, score, colour index or -1) in the detector's order, and
  the extras hold the classes and the picture's size (the rules clip to it), so a stored block
  needs no decoding;
* a colour call (one image's boxes of one class, one CLIP call over their crops): item = sha256
  of (file sha256, class, the boxes' exact floats), under the colour CLIP's identity (spec,
  weights, device type, dtype, batch size: the crops' chunks, the templates and colours); the
  array is the colours' indices.

Rules are not part of any key: the detector's ``score_floor`` only trims its output, the rules
threshold it afterwards, and a colour call is keyed by the boxes the rules kept.

Bit for bit as :mod:`.stored`: a detector call over a block is served only when every item of
it was stored by an earlier pass, else the block is decoded and detected whole, as without the
cache; a colour call (one image) likewise. ``LMMS_GENBENCH_FEATURE_CACHE=0`` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...store import LAYOUTS, held
from .stored import FeatureSource, StoredNetwork, _version, network_identity

__all__ = ["DETECTOR_OPTIONS", "StoredGenEval"]

#: the detector's options MGG runs it at (``networks.detection.get_detector``'s defaults)
DETECTOR_OPTIONS = {"nms_iou": 0.5, "score_floor": 0.1}


def _picture(image: Any) -> Any:
    """An image as the detector and colour CLIP see it: a path decoded as the scorer's blocks
    decode it (:func:`~lmms_genbench.store.held.load_rgb`), then RGB as ``evaluate_images``."""
    if isinstance(image, (str, os.PathLike)):
        image = held.load_rgb(image)
    return image.convert("RGB")


def _boxes_key(boxes: Sequence[Sequence[float]]) -> str:
    return ";".join(",".join(float(v).hex() for v in box) for box in boxes)


def _item(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


class _LazyColors:
    """The colour classifier, loaded at its first call (a classifier is a ``classify``)."""

    def __init__(self, network: StoredNetwork, source: FeatureSource) -> None:
        self._network, self._source = network, source

    def classify(self, image: Any, boxes: Sequence[Sequence[float]], classname: str) -> list[str]:
        self._source._count(0, 1)
        return self._network.network().classify(image, boxes, classname)


class StoredGenEval:
    """Detect and judge a block of images (:meth:`evaluate`), networks loaded at the first miss."""

    def __init__(self, source: FeatureSource, settings: Any) -> None:
        from ..functional.geneval import COLOR_TEMPLATES, COLORS, DETECTOR_QUERY

        device, dtype = settings.device, settings.dtype
        self.source = source

        def detector() -> Any:
            from ..networks import detection  # at call time: tests replace the factories

            return detection.get_detector(settings.detector, device=device, dtype=dtype, **DETECTOR_OPTIONS)

        def colors() -> Any:
            from ..networks import detection

            return detection.get_color_classifier(settings.color_classifier, device=device,
                                                  batch_size=settings.batch_size, dtype=dtype)

        self.detector = source.network(settings.detector, network_identity(
            "detector", settings.detector, device=device, dtype=dtype, query_template=DETECTOR_QUERY,
            torchvision=_version("torchvision"), **DETECTOR_OPTIONS), detector, "image")
        self.colors = source.network(settings.color_classifier, network_identity(
            "color", settings.color_classifier, device=device, dtype=dtype, batch_size=settings.batch_size,
            templates=list(COLOR_TEMPLATES), colors=list(COLORS)), colors, "image")
        self._colors = COLORS

    # ------------------------------------------------------------------ one block
    def evaluate(self, images: Sequence[Any], metas: Sequence[Mapping[str, Any]], rules: Any) -> list[Any]:
        """``evaluate_images`` of the block (paths when the cache is on, else pictures)."""
        from ..functional.geneval import evaluate_detections, validate_metadata
        from ..networks.detection import detect_all, evaluate_images, queried_classes

        store = self.detector.store
        if store is None or not all(isinstance(x, (str, os.PathLike)) for x in images):
            pictures = [_picture(x) for x in images]
            self.source._count(0, len(images))
            return evaluate_images(pictures, metas, detector=_LazyDetector(self.detector),
                                   color_classifier=_LazyColors(self.colors, self.source), rules=rules)
        metas = [validate_metadata(m) for m in metas]
        classes = [queried_classes(m) for m in metas]
        files = [self.source.file_key(p) for p in images]
        items = [_item("detections", f, json.dumps(c)) for f, c in zip(files, classes)]
        found = {} if self.source._wrote_any(store, items) else store.get_many(items, *LAYOUTS["detector"][:2])
        pictures: list[Any] = [None] * len(images)
        if all(k in found for k in items):
            detections = [self._decode(*found[k]) for k in items]
            sizes = [tuple(found[k][1]["size"]) for k in items]
            self.source._count(len(items), 0)
        else:
            pictures = [_picture(p) for p in images]
            detections = detect_all(self.detector.network(), pictures, classes)
            sizes = [p.size for p in pictures]
            for key, dets, size in zip(items, detections, sizes):
                if not store.put(key, *self._encode(dets, size)):
                    self.source.unwritable(store)
                    break
            self.source._wrote(store, items)
            self.source._count(0, len(items))
        results = []
        for i, (meta, dets, size) in enumerate(zip(metas, detections, sizes)):
            color = any("color" in req for req in meta["include"])
            color_fn = self._color_fn(images[i], files[i], pictures, i) if color else None
            results.append(evaluate_detections(meta, dets, image_size=size, rules=rules, color_fn=color_fn))
        return results

    # ------------------------------------------------------------------ colours
    def _color_fn(self, path: Any, file: str, pictures: list[Any], i: int) -> Any:
        def classify(cls: str, boxes: Sequence[Sequence[float]]) -> list[str]:
            if not boxes:  # nothing to crop: the classifier answers [] without its network
                return []
            store = self.colors.store
            key = _item("colors", file, cls, _boxes_key(boxes))
            if store is not None and not self.source._wrote_any(store, [key]):
                found = store.get(key, LAYOUTS["color"][0], (len(boxes),))
                if found is not None:
                    self.source._count(1, 0)
                    return [self._colors[int(c)] for c in found[0]]
            if pictures[i] is None:
                pictures[i] = _picture(path)
            answer = self.colors.network().classify(pictures[i], boxes, cls)
            if store is not None:
                index = np.asarray([self._colors.index(c) if c in self._colors else -1 for c in answer], np.int16)
                if (index >= 0).all():
                    if not store.put(key, index):
                        self.source.unwritable(store)
                    self.source._wrote(store, [key])
            self.source._count(0, 1)
            return answer

        return classify

    # ------------------------------------------------------------------ detections <-> rows
    def _encode(self, detections: Mapping[str, Sequence[Any]], size: tuple[int, int]) -> tuple[np.ndarray, dict]:
        names = list(detections)
        rows = [[q, *d.box, d.score, -1 if d.color is None else self._colors.index(d.color)]
                for q, cls in enumerate(names) for d in detections[cls]]
        array = np.asarray(rows, dtype=np.float64).reshape(len(rows), 7)
        return array, {"classes": names, "size": list(size)}

    def _decode(self, array: np.ndarray, extras: Mapping[str, Any]) -> dict[str, list[Any]]:
        from ..functional.geneval import Detection

        out: dict[str, list[Any]] = {cls: [] for cls in extras["classes"]}
        names = list(out)
        for q, x1, y1, x2, y2, score, color in array.tolist():
            out[names[int(q)]].append(Detection((x1, y1, x2, y2), score, None if color < 0 else self._colors[int(color)]))
        return out


class _LazyDetector:
    """The detector, loaded at its first call (a detector is a ``detect``)."""

    def __init__(self, network: StoredNetwork) -> None:
        self._network = network

    def detect(self, image: Any, classes: Sequence[str]) -> Any:
        return self._network.network().detect(image, classes)

    def detect_batch(self, images: Sequence[Any], classes: Sequence[Sequence[str]]) -> Any:
        from ..networks.detection import detect_all

        return detect_all(self._network.network(), images, classes)
