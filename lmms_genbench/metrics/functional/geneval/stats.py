"""GenEval's aggregation and MGG: counts (correct, total) per (generation, tag).

Accuracy per tag = correct / images of that tag; GenEval's overall = the plain mean over the
tags present (GenEval's ``summary_scores.py``). MGG (Semantic Drift Protocol): the same overall
per generation, then the plain mean over generations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ....core.args import check_int
from .metadata import TAGS, check_tag
from .rules import GenEvalResult

__all__ = ["GenEvalStats"]


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
        return check_int("generation", generation, minimum=0)

    def add(self, tag: str, correct: bool, *, generation: int = 0) -> None:
        """Count one image of ``tag`` in ``generation``."""
        check_tag(tag)
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
        check_tag(tag)
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
