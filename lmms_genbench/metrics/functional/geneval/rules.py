"""GenEval's rules: one image's detections and metadata entry -> correct or not, with why.

A re-implementation of ``evaluation/evaluate_images.py`` of djghosh13/geneval (MIT), read for
this purpose (no code copied). The rules step by step, the rule sets and where this adapter
and the Semantic Drift authors' code differ from GenEval: ``lmms_genbench/tasks/sdp/README.md``,
section "GenEval's rules, as implemented".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ....core.args import check_int, is_number, is_whole
from ....core.registry import lookup
from .metadata import COLORS, GenEvalEntry, Include, check_tag, is_list, parse_metadata

__all__ = [
    "COLOR_TEMPLATES",
    "DEFAULT_COLOR_CLIP",
    "DEFAULT_DETECTOR",
    "DEFAULT_RULES",
    "DETECTOR_QUERY",
    "RULE_PRESETS",
    "Box",
    "ColorFn",
    "Detection",
    "GenEvalResult",
    "GenEvalRules",
    "box_iou",
    "check_unit",
    "evaluate_detections",
    "relative_position",
    "rules_preset",
    "select_detections",
]

#: GenEval's colour prompts; the class embedding of a colour is the mean over them
COLOR_TEMPLATES = (
    "a photo of a {color} {class}",
    "a photo of a {color}-colored {class}",
    "a photo of a {color} object",
)
DETECTOR_QUERY = "a photo of a {class}"
#: the paper's detector (the Semantic Drift authors' MGG code); the one default everywhere
DEFAULT_DETECTOR = "google/owlv2-large-patch14-ensemble"
DEFAULT_COLOR_CLIP = "openai/clip-vit-large-patch14"

Box = tuple[float, float, float, float]
#: ``color_fn(class, boxes) -> one of COLORS per box``
ColorFn = Callable[[str, Sequence[Box]], Sequence[str]]


# --------------------------------------------------------------------------- settings and records
def check_unit(name: str, value: Any, *, low_open: bool, high_closed: bool) -> float:
    """``value`` as a float in [0, 1], each end open or closed as asked, else ValueError."""
    if not is_number(value) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    low_ok = value > 0 if low_open else value >= 0
    high_ok = value <= 1 if high_closed else value < 1
    if not (low_ok and high_ok):
        span = f"{'(' if low_open else '['}0, 1{']' if high_closed else ')'}"
        raise ValueError(f"{name} must be in {span}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class GenEvalRules:
    """Settings of GenEval's rules. The defaults are the ``"owlv2"`` rule set (thresholds
    calibrated for OWLv2 as the Semantic Drift authors ran it); ``RULE_PRESETS["geneval"]``
    holds GenEval's ``evaluate_images.py`` defaults (SDP README, "Thresholds").

    Attributes:
        threshold: keep detections scoring strictly above this (OWLv2 0.1; GenEval 0.3).
        counting_threshold: the same for images of tag ``counting`` (OWLv2 0.1; GenEval 0.9).
        max_objects: at most this many detections per class, the most confident
            (GenEval 16); None for no cap.
        nms_iou: suppress a detection whose IoU with a more confident kept one is >= this;
            1.0 (GenEval's ``max_overlap`` default) switches NMS off.
        position_threshold: the centre offset is shrunk by this times the summed box sizes
            (GenEval 0.1).
    """

    threshold: float = 0.1
    counting_threshold: float = 0.1
    max_objects: int | None = 16
    nms_iou: float = 1.0
    position_threshold: float = 0.1

    def __post_init__(self) -> None:
        check_unit("threshold", self.threshold, low_open=False, high_closed=False)
        check_unit("counting_threshold", self.counting_threshold, low_open=False, high_closed=False)
        check_unit("nms_iou", self.nms_iou, low_open=True, high_closed=True)
        if self.max_objects is not None:
            check_int("max_objects", self.max_objects, minimum=1, what="a positive integer or None")
        p = self.position_threshold
        if not is_number(p) or not math.isfinite(p) or p < 0:
            raise ValueError(f"position_threshold must be a finite number >= 0, got {p!r}")

    def confidence_threshold(self, tag: str) -> float:
        """The score threshold for images of ``tag`` (one of :data:`TAGS`)."""
        check_tag(tag)
        return self.counting_threshold if tag == "counting" else self.threshold


#: named rule sets (SDP README, "Thresholds"); a task picks one by name
RULE_PRESETS: Mapping[str, GenEvalRules] = {
    "owlv2": GenEvalRules(),
    "geneval": GenEvalRules(threshold=0.3, counting_threshold=0.9),
}
DEFAULT_RULES = "owlv2"


def rules_preset(name: Any, what: str = "rules") -> GenEvalRules:
    """The rule set called ``name`` in :data:`RULE_PRESETS`; ``what`` names the setting in
    the error an unknown name raises."""
    return lookup(RULE_PRESETS, name, what)


@dataclass(frozen=True)
class Detection:
    """One detected object: ``box`` (x1, y1, x2, y2) in pixels, ``score`` in [0, 1], and
    optionally ``color`` (one of :data:`COLORS`), the colour predicted for its crop."""

    box: Box
    score: float
    color: str | None = None

    def __post_init__(self) -> None:
        box = self.box
        try:  # any 4 reals: a tuple, a list, a numpy row
            values = tuple(box) if not isinstance(box, (str, bytes)) else ()
        except TypeError:
            values = ()
        if len(values) != 4:
            raise ValueError(f"box must be 4 numbers (x1, y1, x2, y2) in pixels, got {box!r}")
        if any(not is_number(v) or not math.isfinite(v) for v in values):
            raise ValueError(f"box must hold finite numbers, got {box!r}")
        x1, y1, x2, y2 = (float(v) for v in values)
        if x2 < x1 or y2 < y1:
            raise ValueError(f"box must have x2 >= x1 and y2 >= y1 (x1, y1, x2, y2), got {box!r}")
        object.__setattr__(self, "box", (x1, y1, x2, y2))
        s = self.score
        if not is_number(s) or not (0.0 <= s <= 1.0):
            raise ValueError(f"score must be a number in [0, 1], got {s!r}")
        object.__setattr__(self, "score", float(s))
        if self.color is not None and self.color not in COLORS:
            raise ValueError(f"color must be None or one of {COLORS}, got {self.color!r}")


@dataclass(frozen=True)
class GenEvalResult:
    """Verdict on one image: ``correct``, ``reason`` ("" when correct, else the failures
    joined by "; "), the ``tag``, and the detections ``kept`` per class by the rules."""

    tag: str
    correct: bool
    reason: str
    kept: Mapping[str, tuple[Detection, ...]] = field(default_factory=dict)


def _check_image_size(image_size: Any) -> tuple[int, int]:
    if not is_list(image_size) or len(image_size) != 2 or any(not is_whole(v) or v < 1 for v in image_size):
        raise ValueError(f"image_size must be (width, height), two positive integers, got {image_size!r}")
    return int(image_size[0]), int(image_size[1])


def _check_detection_list(dets: Any, name: str) -> None:
    if not is_list(dets):
        raise TypeError(f"{name} must be a list of Detection, got {type(dets).__name__}")
    for j, det in enumerate(dets):
        if not isinstance(det, Detection):
            raise TypeError(f"{name}[{j}] must be a Detection, got {type(det).__name__}")


def _clipped_detections(detections: Any, width: int, height: int) -> dict[str, list[Detection]]:
    """The detections checked, their boxes clipped to the picture: a no-op for in-picture
    boxes (Mask2Former's); OWLv2's can reach into its square padding."""
    if not isinstance(detections, Mapping):
        raise TypeError(
            f"detections must be a mapping class -> list of Detection, got {type(detections).__name__}"
        )
    out: dict[str, list[Detection]] = {}
    for cls, dets in detections.items():
        if not isinstance(cls, str):
            raise TypeError(f"detections keys must be class names (str), got {cls!r}")
        _check_detection_list(dets, f"detections[{cls!r}]")
        out[cls] = []
        for d in dets:
            x1, y1, x2, y2 = (min(max(v, 0.0), limit) for v, limit in zip(d.box, (width, height) * 2))
            out[cls].append(Detection((x1, y1, x2, y2), d.score, d.color))
    return out


# --------------------------------------------------------------------------- rules
def box_iou(box_a: Sequence[float], box_b: Sequence[float]) -> float:
    """IoU as GenEval computes it: areas count pixels inclusively (``x2 - x1 + 1``)."""

    def area(x1: float, y1: float, x2: float, y2: float) -> float:
        return max(x2 - x1 + 1, 0) * max(y2 - y1 + 1, 0)

    inter = area(
        max(box_a[0], box_b[0]),
        max(box_a[1], box_b[1]),
        min(box_a[2], box_b[2]),
        min(box_a[3], box_b[3]),
    )
    union = area(*box_a[:4]) + area(*box_b[:4]) - inter
    return inter / union if union else 0.0


def select_detections(
    detections: Sequence[Detection],
    *,
    threshold: float,
    max_objects: int | None = 16,
    nms_iou: float = 1.0,
) -> list[Detection]:
    """GenEval's kept detections of one class: sorted by score, ``score > threshold``, the
    first ``max_objects``, then greedy NMS at ``nms_iou`` (1.0 = off). Ties keep input order."""
    check_unit("threshold", threshold, low_open=False, high_closed=False)
    GenEvalRules(max_objects=max_objects, nms_iou=nms_iou)  # validates both
    _check_detection_list(detections, "detections")
    ordered = sorted(detections, key=lambda d: -d.score)
    ordered = [d for d in ordered if d.score > threshold]
    if max_objects is not None:
        ordered = ordered[:max_objects]  # GenEval caps before NMS
    kept: list[Detection] = []
    while ordered:
        best = ordered.pop(0)
        kept.append(best)
        if nms_iou < 1.0:
            ordered = [d for d in ordered if box_iou(best.box, d.box) < nms_iou]
    return kept


def relative_position(
    box_a: Sequence[float], box_b: Sequence[float], position_threshold: float = 0.1
) -> frozenset[str]:
    """Relations of box A to box B by GenEval's rule (SDP README, rule 4)."""
    ax1, ay1, ax2, ay2 = box_a[:4]
    bx1, by1, bx2, by2 = box_b[:4]
    ox = (ax1 + ax2) / 2 - (bx1 + bx2) / 2
    oy = (ay1 + ay2) / 2 - (by1 + by2) / 2
    # shrink towards 0 by a share of the boxes' sizes, never past 0
    rx = math.copysign(max(abs(ox) - position_threshold * (abs(ax2 - ax1) + abs(bx2 - bx1)), 0.0), ox)
    ry = math.copysign(max(abs(oy) - position_threshold * (abs(ay2 - ay1) + abs(by2 - by1)), 0.0), oy)
    if abs(rx) < 1e-3 and abs(ry) < 1e-3:
        return frozenset()
    norm = math.hypot(ox, oy)  # of the unshrunk offset, as GenEval does
    dx, dy = rx / norm, ry / norm
    rels = set()
    if dx < -0.5:
        rels.add("left of")
    if dx > 0.5:
        rels.add("right of")
    if dy < -0.5:
        rels.add("above")
    if dy > 0.5:
        rels.add("below")
    return frozenset(rels)


def _found_colors(cls: str, found: Sequence[Detection], color_fn: ColorFn | None) -> list[str]:
    if color_fn is None:
        return [d.color for d in found]  # type: ignore[misc]  # checked up front
    colors = list(color_fn(cls, [d.box for d in found]))
    if len(colors) != len(found) or any(c not in COLORS for c in colors):
        raise ValueError(
            f"color_fn must return one of {COLORS} per box ({len(found)} for {cls!r}), got {colors!r}"
        )
    return colors


def _color_failure(req: Include, found: Sequence[Detection], color_fn: ColorFn | None) -> str:
    """Why the ``count`` found objects are not all of the asked colour, or ""."""
    colors = _found_colors(req.cls, found, color_fn)
    hits = colors.count(req.color)
    if hits >= req.count:
        return ""
    seen = ", ".join(f"{colors.count(c)} {c}" for c in COLORS if c in colors)
    return f"expected {req.color} {req.cls} >= {req.count}, found {hits} {req.color} ({seen})"


def _position_failure(
    req: Include, found: Sequence[Detection], targets: Sequence[Detection] | None, target_cls: str,
    position_threshold: float,
) -> str:
    """Why not every found object stands in the relation to every target object, or ""."""
    relation = req.position[0]
    if targets is None:
        return f"no target for {req.cls} to be {relation}"
    for obj in found:
        for target in targets:
            rels = relative_position(obj.box, target.box, position_threshold)
            if relation not in rels:
                got = " and ".join(sorted(rels)) or "no relation to"
                return f"expected {req.cls} {relation} {target_cls}, found {got} {target_cls}"
    return ""


def evaluate_detections(
    metadata: Mapping[str, Any] | GenEvalEntry,
    detections: Mapping[str, Sequence[Detection]],
    *,
    image_size: tuple[int, int],
    rules: GenEvalRules | None = None,
    color_fn: ColorFn | None = None,
) -> GenEvalResult:
    """Judge one image from its detections by GenEval's rules (SDP README, rules 1-5).

    Args:
        metadata: one GenEval entry, a mapping or a :class:`GenEvalEntry` (see
            :func:`parse_metadata`).
        detections: class name -> raw detections of that class (any order; the rules sort,
            threshold, cap and suppress them). Classes absent count as not detected.
        image_size: (width, height) in pixels; boxes are clipped to it.
        rules: settings; None = the default rule set (``GenEvalRules()``, ``"owlv2"``).
        color_fn: ``color_fn(class, boxes) -> colours`` predicting one of :data:`COLORS` per
            box; called only on the boxes GenEval classifies (the ``count`` most confident of
            an include with ``color``). When None, ``Detection.color`` is used, and every
            detection of a class whose colour is asked must carry one.
    """
    entry = parse_metadata(metadata)
    rules = GenEvalRules() if rules is None else rules
    if not isinstance(rules, GenEvalRules):
        raise TypeError(f"rules must be a GenEvalRules or None, got {type(rules).__name__}")
    width, height = _check_image_size(image_size)
    dets = _clipped_detections(detections, width, height)
    if color_fn is not None and not callable(color_fn):
        raise TypeError(f"color_fn must be callable or None, got {type(color_fn).__name__}")
    for req in entry.include:
        if color_fn is None and req.color is not None and any(d.color is None for d in dets.get(req.cls, [])):
            raise ValueError(
                f"the metadata asks for a {req.color} {req.cls}: pass color_fn, or a color "
                f"on every Detection of {req.cls!r}"
            )

    threshold = rules.confidence_threshold(entry.tag)
    kept = {
        cls: select_detections(ds, threshold=threshold, max_objects=rules.max_objects, nms_iou=rules.nms_iou)
        for cls, ds in dets.items()
    }
    reasons: list[str] = []
    groups: list[list[Detection] | None] = []  # found objects of each include, None if it failed
    for req in entry.include:
        found = kept.get(req.cls, [])[: req.count]
        failure = "" if len(found) >= req.count else f"expected {req.cls} >= {req.count}, found {len(found)}"
        if not failure and req.color is not None:
            failure = _color_failure(req, found, color_fn)
        if not failure and req.position is not None:
            index = req.position[1]
            target_cls = entry.include[index].cls
            failure = _position_failure(req, found, groups[index], target_cls, rules.position_threshold)
        if failure:
            reasons.append(failure)
        groups.append(None if failure else found)
    for req in entry.exclude:
        n = len(kept.get(req.cls, []))
        if n >= req.count:
            reasons.append(f"expected {req.cls} < {req.count}, found {n}")
    return GenEvalResult(
        tag=entry.tag,
        correct=not reasons,
        reason="; ".join(reasons),
        kept={cls: tuple(ds) for cls, ds in kept.items()},
    )
