"""GenEval's object-level checks, its aggregation, and MGG (Multi-Generation GenEval).

GenEval (Ghosh et al. 2023; repository djghosh13/geneval, MIT) marks an image correct when a
detector finds what a metadata entry asks for. The rules below re-implement
``evaluation/evaluate_images.py`` (``evaluate``, ``evaluate_image``, ``relative_position``,
``compute_iou``) and ``evaluation/summary_scores.py`` of that repository, read for this
purpose (no code copied). A metadata entry is
``{"tag", "include": [{"class", "count", "color"?, "position"?: [relation, index]}],
"exclude"?: [{"class", "count"}]}``.

GenEval's rules, as implemented by :func:`evaluate_detections`:

1. Kept detections, per class (:func:`select_detections`): sort by score (highest first), keep
   scores strictly above the threshold (the rule set's ``threshold``, or its
   ``counting_threshold`` for *every* class when the tag is ``counting``; see "Thresholds"
   below), keep the first ``max_objects`` (16), then greedy NMS with GenEval's IoU
   (areas counted with GenEval's ``+1`` pixel convention), suppressing a box when its IoU with
   a kept one is >= ``nms_iou``. GenEval's default ``max_overlap`` is 1.0, which switches NMS
   off, and so is ours.
2. ``include`` (all must hold): the first ``count`` kept boxes of the class are the "found"
   objects; fewer than ``count`` kept boxes fails. So an include asks for *at least* ``count``.
3. ``color``: the colour predicted for each found object's crop (only those ``count`` most
   confident ones) must equal the requested colour for all ``count`` of them.
4. ``position`` ``[relation, index]``: every found object must stand in ``relation`` to every
   found object of ``include[index]``; if that earlier include failed (count, colour or its
   own position) the check fails with "no target". Relation of box A to box B
   (:func:`relative_position`): centre offset ``o = c_A - c_B`` (pixels, y downwards); per axis
   shrink it towards 0 by ``0.1 * (size_A + size_B)`` (width for x, height for y), not past 0;
   if both shrunk components are below 1e-3 in magnitude there is no relation; else divide
   the shrunk offset by the Euclidean norm of the *unshrunk* offset ``|o|`` giving (dx, dy),
   and report "left of" if dx < -0.5, "right of" if dx > 0.5, "above" if dy < -0.5,
   "below" if dy > 0.5 (a diagonal offset can give two relations).
5. ``exclude`` (any one fails the image): ``count`` or more kept boxes of the class. GenEval's
   ``counting`` entries carry ``exclude: [{class, count: N + 1}]`` next to
   ``include: [{class, count: N}]``, which together mean *exactly* N; the exactness comes from
   the metadata, as in GenEval, not from the tag.
6. Aggregation (:class:`GenEvalStats`): accuracy per tag = correct / images of that tag;
   overall = plain mean over the tags present (GenEval's six). MGG (Semantic Drift Protocol):
   the same overall per generation, then the plain mean over generations.

Thresholds (:data:`RULE_PRESETS`; the default, :data:`DEFAULT_RULES`, is ``"owlv2"``):

* ``"owlv2"`` (default; ``GenEvalRules()``): 0.1 for every tag, counting included, as the
  Semantic Drift authors ran OWLv2 for MGG. GenEval chose 0.3 and 0.9 for Mask2Former's
  scores; OWLv2's sigmoid scores for clearly visible objects are often 0.2-0.7, so with
  GenEval's numbers a correct count (0.9) or a small coloured object (0.3) rarely passes
  and MGG would be biased low and not comparable with the paper's.
* ``"geneval"``: GenEval's own 0.3 and 0.9 (for comparison with GenEval's numbers, or with a
  detector calibrated like Mask2Former).

Both keep every other rule above (the cap of 16, which GenEval's counts of at most 5 never
reach, no rule-level NMS, position threshold 0.1).

Where this adapter differs from GenEval (on purpose, because the detector differs):
GenEval detects with Mask2Former (mmdet) over the 80 COCO classes and classifies colour with
open_clip ViT-L/14 on the crop after painting everything outside the instance mask grey
(#999). Here the detector is OWLv2 (open vocabulary, boxes only), queried with
``"a photo of a {class}"`` for the classes a prompt names; a class's score is the sigmoid of
its own query logit, independent of the other queries (transformers' post-processing would
instead give each box only its best query). OWLv2 predicts one box per image patch, so
:class:`OWLv2Detector` first removes near-duplicates with its own NMS (IoU 0.5, our choice)
and clips boxes to the picture (dropping those wholly in OWLv2's square padding);
GenEval's rule-level NMS stays off. :func:`evaluate_detections` also clips boxes to the
picture, a no-op for in-picture boxes such as Mask2Former's. Colour is CLIP zero-shot
(default ``openai/clip-vit-large-patch14``, the weights of open_clip's ViT-L-14 "openai") on
the plain box crop, with GenEval's 10 colours and its three prompt templates averaged.

The Semantic Drift authors' MGG code (``semantic-drift/mgg.py``, read for comparison) uses the
detector ``google/owlv2-large-patch14-ensemble`` (:data:`DEFAULT_DETECTOR` here too) and one
threshold 0.1 for every tag (the default ``"owlv2"`` rules here too). It deviates from GenEval
in ways this module does not follow:

* one query "a photo of a {color} {class}" per include: colour is judged by the detector,
  no colour classifier;
* no cap of 16, no NMS, and OWLv2's argmax-label post-processing (a box counts for one
  query only);
* position compares the shrunk offset in *pixels* with +-0.5 (no division by ``|o|``), so any
  shrunk offset beyond half a pixel on the minor axis adds a relation: B at (10, 10) and A
  at (110, 18), both 20 x 20, is "right of" for GenEval but also "below" for that code;
* position passes when each object has the relation to *any* target object (GenEval: all),
  and uses every detection above threshold rather than the ``count`` most confident;
* a leftover ``if idx == 4: break`` scores only the first 4 prompts of each generation;
* its printed "overall" pools all images (micro average) instead of the mean over tags; only the
  text-first generations 1, 3, ..., 19 are scored.

The networks (OWLv2 detector, CLIP colour classifier, ``evaluate_image``) live in
:mod:`lmms_genbench.metrics.networks.detection`, which imports this module and not the
other way round. Importing this module imports neither torch nor transformers.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.registry import lookup
from ...core.args import check_int, is_whole

__all__ = [
    "COLORS",
    "COLOR_TEMPLATES",
    "DEFAULT_COLOR_CLIP",
    "DEFAULT_DETECTOR",
    "DEFAULT_RULES",
    "DETECTOR_QUERY",
    "RELATIONS",
    "RULE_PRESETS",
    "TAGS",
    "Detection",
    "GenEvalResult",
    "GenEvalRules",
    "GenEvalStats",
    "box_iou",
    "evaluate_detections",
    "relative_position",
    "rules_preset",
    "select_detections",
    "validate_metadata",
]

TAGS = ("single_object", "two_object", "counting", "colors", "position", "color_attr")
COLORS = (
    "red",
    "orange",
    "yellow",
    "green",
    "blue",
    "purple",
    "pink",
    "brown",
    "black",
    "white",
)
RELATIONS = ("left of", "right of", "above", "below")
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


# --------------------------------------------------------------------------- settings and data
def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_unit(name: str, value: Any, *, low_open: bool, high_closed: bool) -> float:
    if not _is_real(value) or not math.isfinite(value):
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
    holds GenEval's ``evaluate_images.py`` defaults (see the module docstring).

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
        _check_unit("threshold", self.threshold, low_open=False, high_closed=False)
        _check_unit(
            "counting_threshold",
            self.counting_threshold,
            low_open=False,
            high_closed=False,
        )
        _check_unit("nms_iou", self.nms_iou, low_open=True, high_closed=True)
        m = self.max_objects
        if m is not None:
            check_int("max_objects", m, minimum=1, what="a positive integer or None")
        p = self.position_threshold
        if not _is_real(p) or not math.isfinite(p) or p < 0:
            raise ValueError(
                f"position_threshold must be a finite number >= 0, got {p!r}"
            )

    def confidence_threshold(self, tag: str) -> float:
        """The score threshold for images of ``tag`` (one of :data:`TAGS`)."""
        _check_tag(tag)
        return self.counting_threshold if tag == "counting" else self.threshold


#: named rule sets (module docstring, "Thresholds"); a task picks one by name
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
            raise ValueError(
                f"box must be 4 numbers (x1, y1, x2, y2) in pixels, got {box!r}"
            )
        if any(not _is_real(v) or not math.isfinite(v) for v in values):
            raise ValueError(f"box must hold finite numbers, got {box!r}")
        x1, y1, x2, y2 = (float(v) for v in values)
        if x2 < x1 or y2 < y1:
            raise ValueError(
                f"box must have x2 >= x1 and y2 >= y1 (x1, y1, x2, y2), got {box!r}"
            )
        object.__setattr__(self, "box", (x1, y1, x2, y2))
        s = self.score
        if not _is_real(s) or not (0.0 <= s <= 1.0):
            raise ValueError(f"score must be a number in [0, 1], got {s!r}")
        object.__setattr__(self, "score", float(s))
        if self.color is not None and self.color not in COLORS:
            raise ValueError(
                f"color must be None or one of {COLORS}, got {self.color!r}"
            )


@dataclass(frozen=True)
class GenEvalResult:
    """Verdict on one image: ``correct``, ``reason`` ("" when correct, else the failures
    joined by "; "), the ``tag``, and the detections ``kept`` per class by the rules."""

    tag: str
    correct: bool
    reason: str
    kept: Mapping[str, tuple[Detection, ...]] = field(default_factory=dict)


# --------------------------------------------------------------------------- validation
def _check_tag(tag: Any) -> str:
    if tag not in TAGS:
        raise ValueError(f"tag must be one of {TAGS}, got {tag!r}")
    return tag


def _check_count(where: str, count: Any) -> int:
    check_int(f"{where}['count']", count, minimum=1, what="a positive integer")
    return count


def _check_class(where: str, cls: Any) -> str:
    if not isinstance(cls, str) or not cls.strip():
        raise ValueError(f"{where}['class'] must be a non-empty string, got {cls!r}")
    return cls


def validate_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Check a GenEval metadata entry and return a normalised copy.

    The copy has ``tag``, ``include`` (list of dicts with ``class``, ``count`` and, when given,
    ``color`` and ``position`` as a (relation, index) tuple) and ``exclude`` (list, maybe empty).
    Other keys (``prompt``, ...) are ignored. ``position`` must point at an *earlier* include,
    since GenEval resolves it against the includes already checked.
    """
    if not isinstance(metadata, Mapping):
        raise TypeError(
            f"metadata must be a mapping (one GenEval entry), got {type(metadata).__name__}"
        )
    tag = _check_tag(metadata.get("tag"))
    include = metadata.get("include")
    if (
        isinstance(include, (str, bytes))
        or not isinstance(include, Sequence)
        or not include
    ):
        raise ValueError(
            f"metadata['include'] must be a non-empty list of dicts, got {include!r}"
        )
    out_inc: list[dict[str, Any]] = []
    for i, req in enumerate(include):
        where = f"metadata['include'][{i}]"
        if not isinstance(req, Mapping):
            raise TypeError(f"{where} must be a dict, got {type(req).__name__}")
        item: dict[str, Any] = {
            "class": _check_class(where, req.get("class")),
            "count": _check_count(where, req.get("count")),
        }
        if "color" in req:
            if req["color"] not in COLORS:
                raise ValueError(
                    f"{where}['color'] must be one of {COLORS}, got {req['color']!r}"
                )
            item["color"] = req["color"]
        if "position" in req:
            pos = req["position"]
            if (
                isinstance(pos, (str, bytes))
                or not isinstance(pos, Sequence)
                or len(pos) != 2
            ):
                raise ValueError(
                    f"{where}['position'] must be [relation, index], got {pos!r}"
                )
            relation, index = pos
            if relation not in RELATIONS:
                raise ValueError(
                    f"{where}['position'][0] must be one of {RELATIONS}, got {relation!r}"
                )
            if (
                isinstance(index, bool)
                or not isinstance(index, int)
                or not (0 <= index < i)
            ):
                raise ValueError(
                    f"{where}['position'][1] must be the index of an earlier include (0..{i - 1}), got {index!r}"
                )
            item["position"] = (relation, index)
        out_inc.append(item)
    exclude = metadata.get("exclude", [])
    if isinstance(exclude, (str, bytes)) or not isinstance(exclude, Sequence):
        raise TypeError(f"metadata['exclude'] must be a list of dicts, got {exclude!r}")
    out_exc = []
    for i, req in enumerate(exclude):
        where = f"metadata['exclude'][{i}]"
        if not isinstance(req, Mapping):
            raise TypeError(f"{where} must be a dict, got {type(req).__name__}")
        out_exc.append(
            {
                "class": _check_class(where, req.get("class")),
                "count": _check_count(where, req.get("count")),
            }
        )
    return {"tag": tag, "include": out_inc, "exclude": out_exc}


def _check_image_size(image_size: Any) -> tuple[int, int]:
    if (
        isinstance(image_size, (str, bytes))
        or not isinstance(image_size, Sequence)
        or len(image_size) != 2
        or any(
            not is_whole(v) or v < 1 for v in image_size
        )
    ):
        raise ValueError(
            f"image_size must be (width, height), two positive integers, got {image_size!r}"
        )
    return int(image_size[0]), int(image_size[1])


def _clip_box(box: Box, width: int, height: int) -> Box:
    x1, y1, x2, y2 = box
    return (
        min(max(x1, 0.0), width),
        min(max(y1, 0.0), height),
        min(max(x2, 0.0), width),
        min(max(y2, 0.0), height),
    )


def _check_detections(
    detections: Any, width: int, height: int
) -> dict[str, list[Detection]]:
    if not isinstance(detections, Mapping):
        raise TypeError(
            f"detections must be a mapping class -> list of Detection, got {type(detections).__name__}"
        )
    out: dict[str, list[Detection]] = {}
    for cls, dets in detections.items():
        if not isinstance(cls, str):
            raise TypeError(f"detections keys must be class names (str), got {cls!r}")
        _check_detection_list(dets, f"detections[{cls!r}]")
        # clipping is a no-op for in-picture boxes (Mask2Former's); OWLv2 can reach into its padding
        out[cls] = [
            Detection(_clip_box(d.box, width, height), d.score, d.color) for d in dets
        ]
    return out


def _check_detection_list(dets: Any, name: str) -> None:
    if isinstance(dets, (str, bytes)) or not isinstance(dets, Sequence):
        raise TypeError(f"{name} must be a list of Detection, got {type(dets).__name__}")
    for j, det in enumerate(dets):
        if not isinstance(det, Detection):
            raise TypeError(f"{name}[{j}] must be a Detection, got {type(det).__name__}")


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
    _check_unit("threshold", threshold, low_open=False, high_closed=False)
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
    """Relations of box A to box B by GenEval's rule (see the module docstring, item 4)."""
    ax1, ay1, ax2, ay2 = box_a[:4]
    bx1, by1, bx2, by2 = box_b[:4]
    ox = (ax1 + ax2) / 2 - (bx1 + bx2) / 2
    oy = (ay1 + ay2) / 2 - (by1 + by2) / 2
    # shrink towards 0 by a share of the boxes' sizes, never past 0
    rx = math.copysign(
        max(abs(ox) - position_threshold * (abs(ax2 - ax1) + abs(bx2 - bx1)), 0.0), ox
    )
    ry = math.copysign(
        max(abs(oy) - position_threshold * (abs(ay2 - ay1) + abs(by2 - by1)), 0.0), oy
    )
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


ColorFn = Callable[[str, Sequence[Box]], Sequence[str]]


def _found_colors(
    cls: str, found: Sequence[Detection], color_fn: ColorFn | None
) -> list[str]:
    if color_fn is None:
        return [d.color for d in found]  # type: ignore[misc]  # checked up front
    colors = list(color_fn(cls, [d.box for d in found]))
    if len(colors) != len(found) or any(c not in COLORS for c in colors):
        raise ValueError(
            f"color_fn must return one of {COLORS} per box ({len(found)} for {cls!r}), got {colors!r}"
        )
    return colors


def evaluate_detections(
    metadata: Mapping[str, Any],
    detections: Mapping[str, Sequence[Detection]],
    *,
    image_size: tuple[int, int],
    rules: GenEvalRules | None = None,
    color_fn: ColorFn | None = None,
) -> GenEvalResult:
    """Judge one image from its detections by GenEval's rules (module docstring, items 1-5).

    Args:
        metadata: one GenEval entry (see :func:`validate_metadata`).
        detections: class name -> raw detections of that class (any order; the rules sort,
            threshold, cap and suppress them). Classes absent count as not detected.
        image_size: (width, height) in pixels; boxes are clipped to it.
        rules: settings; None = the default rule set (``GenEvalRules()``, ``"owlv2"``).
        color_fn: ``color_fn(class, boxes) -> colours`` predicting one of :data:`COLORS` per
            box; called only on the boxes GenEval classifies (the ``count`` most confident of
            an include with ``color``). When None, ``Detection.color`` is used, and every
            detection of a class whose colour is asked must carry one.
    """
    meta = validate_metadata(metadata)
    rules = GenEvalRules() if rules is None else rules
    if not isinstance(rules, GenEvalRules):
        raise TypeError(
            f"rules must be a GenEvalRules or None, got {type(rules).__name__}"
        )
    width, height = _check_image_size(image_size)
    dets = _check_detections(detections, width, height)
    if color_fn is not None and not callable(color_fn):
        raise TypeError(
            f"color_fn must be callable or None, got {type(color_fn).__name__}"
        )
    if color_fn is None:
        for req in meta["include"]:
            if "color" in req and any(
                d.color is None for d in dets.get(req["class"], [])
            ):
                raise ValueError(
                    f"the metadata asks for a {req['color']} {req['class']}: pass color_fn, or a color "
                    f"on every Detection of {req['class']!r}"
                )

    threshold = rules.confidence_threshold(meta["tag"])
    kept = {
        cls: select_detections(
            ds,
            threshold=threshold,
            max_objects=rules.max_objects,
            nms_iou=rules.nms_iou,
        )
        for cls, ds in dets.items()
    }
    reasons: list[str] = []
    groups: list[
        list[Detection] | None
    ] = []  # found objects of each include, None if it failed
    for req in meta["include"]:
        cls, count = req["class"], req["count"]
        found = kept.get(cls, [])[:count]
        ok = len(found) >= count
        if not ok:
            reasons.append(f"expected {cls} >= {count}, found {len(found)}")
        if ok and "color" in req:
            colors = _found_colors(cls, found, color_fn)
            hits = colors.count(req["color"])
            if hits < count:
                ok = False
                seen = ", ".join(
                    f"{colors.count(c)} {c}" for c in COLORS if c in colors
                )
                reasons.append(
                    f"expected {req['color']} {cls} >= {count}, found {hits} {req['color']} ({seen})"
                )
        if ok and "position" in req:
            relation, index = req["position"]
            targets = groups[index]
            if targets is None:
                ok = False
                reasons.append(f"no target for {cls} to be {relation}")
            else:
                target_cls = meta["include"][index]["class"]
                for obj in found:  # every found object against every target object
                    for target in targets:
                        rels = relative_position(
                            obj.box, target.box, rules.position_threshold
                        )
                        if relation not in rels:
                            ok = False
                            got = " and ".join(sorted(rels)) or "no relation to"
                            reasons.append(
                                f"expected {cls} {relation} {target_cls}, found {got} {target_cls}"
                            )
                            break
                    if not ok:
                        break
        groups.append(found if ok else None)
    for req in meta["exclude"]:
        n = len(kept.get(req["class"], []))
        if n >= req["count"]:
            reasons.append(f"expected {req['class']} < {req['count']}, found {n}")
    return GenEvalResult(
        tag=meta["tag"],
        correct=not reasons,
        reason="; ".join(reasons),
        kept={cls: tuple(ds) for cls, ds in kept.items()},
    )


# --------------------------------------------------------------------------- aggregation
class GenEvalStats:
    """Counts (correct, total) per (generation, tag): mergeable sufficient statistics.

    Plain GenEval uses one generation (0). For MGG, add each image under its generation:
    :meth:`overall` of a generation is the mean of its tag accuracies and :meth:`mgg` the
    mean of those over generations. Tags without images are left out of the mean, as in
    GenEval's ``summary_scores.py`` (see :meth:`missing_tags`).
    """

    def __init__(self) -> None:
        self._counts: dict[tuple[int, str], list[int]] = {}

    @staticmethod
    def _check_generation(generation: Any) -> int:
        if (
            isinstance(generation, bool)
            or not isinstance(generation, int)
            or generation < 0
        ):
            raise ValueError(f"generation must be an integer >= 0, got {generation!r}")
        return generation

    def add(self, tag: str, correct: bool, *, generation: int = 0) -> None:
        """Count one image of ``tag`` in ``generation``."""
        _check_tag(tag)
        if not isinstance(correct, bool):
            raise TypeError(f"correct must be a bool, got {correct!r}")
        cell = self._counts.setdefault(
            (self._check_generation(generation), tag), [0, 0]
        )
        cell[0] += int(correct)
        cell[1] += 1

    def add_result(self, result: GenEvalResult, *, generation: int = 0) -> None:
        if not isinstance(result, GenEvalResult):
            raise TypeError(
                f"result must be a GenEvalResult, got {type(result).__name__}"
            )
        self.add(result.tag, result.correct, generation=generation)

    def add_counts(
        self, tag: str, correct: int, total: int, *, generation: int = 0
    ) -> None:
        """Add ``correct`` of ``total`` images at once (e.g. counts from another worker)."""
        _check_tag(tag)
        for name, v in (("correct", correct), ("total", total)):
            check_int(name, v, minimum=0)
        if correct > total:
            raise ValueError(
                f"correct must be <= total, got correct={correct}, total={total}"
            )
        cell = self._counts.setdefault(
            (self._check_generation(generation), tag), [0, 0]
        )
        cell[0] += correct
        cell[1] += total

    def merge(self, *others: GenEvalStats) -> GenEvalStats:
        """A new object holding the counts of ``self`` and ``others`` added."""
        out = GenEvalStats()
        for stats in (self, *others):
            if not isinstance(stats, GenEvalStats):
                raise TypeError(
                    f"can only merge GenEvalStats, got {type(stats).__name__}"
                )
            for (g, t), (c, n) in stats._counts.items():
                out.add_counts(t, c, n, generation=g)
        return out

    __add__ = merge

    @property
    def counts(self) -> dict[tuple[int, str], tuple[int, int]]:
        """(generation, tag) -> (correct, total)."""
        return {k: (v[0], v[1]) for k, v in sorted(self._counts.items())}

    @property
    def generations(self) -> list[int]:
        return sorted({g for g, _ in self._counts})

    def tag_accuracy(self, generation: int = 0) -> dict[str, float]:
        """Tag -> accuracy in ``generation``, for the tags with images, in :data:`TAGS` order."""
        g = self._check_generation(generation)
        out = {}
        for tag in TAGS:
            correct, total = self._counts.get((g, tag), (0, 0))
            if total:
                out[tag] = correct / total
        return out

    def missing_tags(self, generation: int = 0) -> list[str]:
        acc = self.tag_accuracy(generation)
        return [t for t in TAGS if t not in acc]

    def overall(self, generation: int = 0) -> float:
        """Mean of the tag accuracies of ``generation`` (GenEval's overall score)."""
        acc = self.tag_accuracy(generation)
        if not acc:
            raise ValueError(
                f"generation {generation} has no images (generations present: {self.generations})"
            )
        return sum(acc.values()) / len(acc)

    def mgg(self, generations: Iterable[int] | None = None) -> float:
        """MGG: mean over ``generations`` (default: all present) of :meth:`overall`."""
        gens = (
            self.generations
            if generations is None
            else [self._check_generation(g) for g in generations]
        )
        if not gens:
            raise ValueError(
                "no generations to average: add images first or pass generations"
            )
        return sum(self.overall(g) for g in gens) / len(gens)

    def summary(self) -> dict[str, Any]:
        """``{"per_generation": {g: {"tags": {...}, "overall": x}}, "mgg": y}``."""
        per = {
            g: {"tags": self.tag_accuracy(g), "overall": self.overall(g)}
            for g in self.generations
        }
        return {"per_generation": per, "mgg": self.mgg() if per else None}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; :meth:`from_dict` reads it back."""
        return {
            "counts": [
                {"generation": g, "tag": t, "correct": c, "total": n}
                for (g, t), (c, n) in self.counts.items()
            ]
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GenEvalStats:
        if not isinstance(data, Mapping) or not isinstance(data.get("counts"), list):
            raise TypeError(
                f"data must be a dict with a 'counts' list (from to_dict), got {data!r}"
            )
        out = cls()
        for row in data["counts"]:
            out.add_counts(
                row["tag"], row["correct"], row["total"], generation=row["generation"]
            )
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GenEvalStats) and self.counts == other.counts

    def __repr__(self) -> str:
        return f"GenEvalStats({self.counts!r})"
