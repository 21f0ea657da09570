"""GenEval's object-level checks, its aggregation, and MGG (Multi-Generation GenEval).

GenEval (Ghosh et al. 2023; djghosh13/geneval, MIT) marks an image correct when a detector
finds what a metadata entry asks for. :mod:`.metadata` parses the entries, :mod:`.rules`
judges one image from its detections, :mod:`.stats` aggregates verdicts into GenEval's
overall and MGG. The rules in full, the two rule sets and every difference from GenEval and
from the Semantic Drift authors' code: ``lmms_genbench/tasks/sdp/README.md``, section
"GenEval's rules, as implemented".

The networks (OWLv2 detector, CLIP colour classifier, ``evaluate_image``) live in
:mod:`lmms_genbench.metrics.networks.detection`, which imports this package and not the other
way round. Importing it imports neither torch nor transformers: the three modules are pure
Python, imported here directly (not lazily) so that the import graph, and a vendored copy,
sees every module a name comes from.
"""

from .metadata import (
    COLORS,
    RELATIONS,
    TAGS,
    Exclude,
    GenEvalEntry,
    Include,
    parse_metadata,
    validate_metadata,
)
from .rules import (
    COLOR_TEMPLATES,
    DEFAULT_COLOR_CLIP,
    DEFAULT_DETECTOR,
    DEFAULT_RULES,
    DETECTOR_QUERY,
    RULE_PRESETS,
    Box,
    ColorFn,
    Detection,
    GenEvalResult,
    GenEvalRules,
    box_iou,
    check_unit,
    evaluate_detections,
    relative_position,
    rules_preset,
    select_detections,
)
from .stats import GenEvalStats

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
    "Box",
    "ColorFn",
    "Detection",
    "Exclude",
    "GenEvalEntry",
    "GenEvalResult",
    "GenEvalRules",
    "GenEvalStats",
    "Include",
    "box_iou",
    "check_unit",
    "evaluate_detections",
    "parse_metadata",
    "relative_position",
    "rules_preset",
    "select_detections",
    "validate_metadata",
]
