"""What a GenEval metadata entry may ask, parsed once into frozen records.

An entry is ``{"tag", "include": [{"class", "count", "color"?, "position"?: [relation,
index]}], "exclude"?: [{"class", "count"}]}`` (GenEval's ``evaluation_metadata.jsonl``).
:func:`parse_metadata` checks one and returns a :class:`GenEvalEntry`; the rules take that
record, so a caller that parses once does not pay for the checks again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ....core.args import check_int, is_whole

__all__ = [
    "COLORS",
    "RELATIONS",
    "TAGS",
    "Exclude",
    "GenEvalEntry",
    "Include",
    "check_tag",
    "is_list",
    "parse_metadata",
    "validate_metadata",
]

TAGS = ("single_object", "two_object", "counting", "colors", "position", "color_attr")
COLORS = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white")
RELATIONS = ("left of", "right of", "above", "below")


def is_list(value: Any) -> bool:
    """True for a sequence that is not text (a list, a tuple, a numpy row)."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def check_tag(tag: Any) -> str:
    if tag not in TAGS:
        raise ValueError(f"tag must be one of {TAGS}, got {tag!r}")
    return tag


@dataclass(frozen=True)
class Include:
    """An object the image must show: at least ``count`` of ``cls``, each of ``color`` when
    given, each in ``position = (relation, index)`` to every object of an earlier include."""

    cls: str
    count: int
    color: str | None = None
    position: tuple[str, int] | None = None


@dataclass(frozen=True)
class Exclude:
    """An object the image must not show ``count`` or more times."""

    cls: str
    count: int


@dataclass(frozen=True)
class GenEvalEntry:
    """One checked metadata entry; build it with :func:`parse_metadata`, which checks what
    the constructor takes on trust."""

    tag: str
    include: tuple[Include, ...]
    exclude: tuple[Exclude, ...] = ()

    @property
    def classes(self) -> list[str]:
        """The classes the entry names, each once, includes first (what a detector is asked)."""
        return list(dict.fromkeys([r.cls for r in self.include] + [r.cls for r in self.exclude]))

    @property
    def needs_color(self) -> bool:
        return any(r.color is not None for r in self.include)

    def to_dict(self) -> dict[str, Any]:
        """The normalised mapping :func:`validate_metadata` returns (JSON-ready but for
        ``position``, a tuple)."""
        include = []
        for req in self.include:
            item: dict[str, Any] = {"class": req.cls, "count": req.count}
            if req.color is not None:
                item["color"] = req.color
            if req.position is not None:
                item["position"] = req.position
            include.append(item)
        exclude = [{"class": r.cls, "count": r.count} for r in self.exclude]
        return {"tag": self.tag, "include": include, "exclude": exclude}


def _check_class(where: str, cls: Any) -> str:
    if not isinstance(cls, str) or not cls.strip():
        raise ValueError(f"{where}['class'] must be a non-empty string, got {cls!r}")
    return cls


def _requirement(where: str, req: Any) -> tuple[str, int]:
    if not isinstance(req, Mapping):
        raise TypeError(f"{where} must be a dict, got {type(req).__name__}")
    cls = _check_class(where, req.get("class"))
    return cls, check_int(f"{where}['count']", req.get("count"), minimum=1, what="a positive integer")


def _position(where: str, pos: Any, earlier: int) -> tuple[str, int]:
    if not is_list(pos) or len(pos) != 2:
        raise ValueError(f"{where}['position'] must be [relation, index], got {pos!r}")
    relation, index = pos
    if relation not in RELATIONS:
        raise ValueError(f"{where}['position'][0] must be one of {RELATIONS}, got {relation!r}")
    # GenEval resolves a position against the includes already checked
    if not is_whole(index) or not 0 <= index < earlier:
        raise ValueError(
            f"{where}['position'][1] must be the index of an earlier include "
            f"(0..{earlier - 1}), got {index!r}"
        )
    return relation, int(index)


def _include(i: int, req: Any) -> Include:
    where = f"metadata['include'][{i}]"
    cls, count = _requirement(where, req)
    color = position = None
    if "color" in req:
        color = req["color"]
        if color not in COLORS:
            raise ValueError(f"{where}['color'] must be one of {COLORS}, got {color!r}")
    if "position" in req:
        position = _position(where, req["position"], i)
    return Include(cls, count, color, position)


def parse_metadata(metadata: Mapping[str, Any] | GenEvalEntry) -> GenEvalEntry:
    """Check a GenEval metadata entry and return it as a :class:`GenEvalEntry` (an entry
    passes through as it is). Other keys (``prompt``, ...) are ignored."""
    if isinstance(metadata, GenEvalEntry):
        return metadata
    if not isinstance(metadata, Mapping):
        raise TypeError(
            f"metadata must be a mapping (one GenEval entry), got {type(metadata).__name__}"
        )
    tag = check_tag(metadata.get("tag"))
    include = metadata.get("include")
    if not is_list(include) or not include:
        raise ValueError(f"metadata['include'] must be a non-empty list of dicts, got {include!r}")
    includes = tuple(_include(i, req) for i, req in enumerate(include))
    exclude = metadata.get("exclude", [])
    if not is_list(exclude):
        raise TypeError(f"metadata['exclude'] must be a list of dicts, got {exclude!r}")
    excludes = tuple(Exclude(*_requirement(f"metadata['exclude'][{i}]", req)) for i, req in enumerate(exclude))
    return GenEvalEntry(tag, includes, excludes)


def validate_metadata(metadata: Mapping[str, Any] | GenEvalEntry) -> dict[str, Any]:
    """Check a GenEval metadata entry and return a normalised copy.

    The copy has ``tag``, ``include`` (list of dicts with ``class``, ``count`` and, when given,
    ``color`` and ``position`` as a (relation, index) tuple) and ``exclude`` (list, maybe empty).
    Other keys (``prompt``, ...) are ignored. ``position`` must point at an *earlier* include,
    since GenEval resolves it against the includes already checked.
    """
    return parse_metadata(metadata).to_dict()
