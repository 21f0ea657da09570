"""A preflight's findings: one :class:`Problem` per thing a run needs and lacks, and how a
list of them ends a run (:func:`as_error`): all at once, one line each, exit 1."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.errors import ActionableError, one_line

__all__ = ["Problem", "as_error", "format_problems"]


@dataclass(frozen=True)
class Problem:
    """One thing the run needs and lacks.

    Attributes:
        cause: what is wrong, naming the argument, id, file or variable.
        fix: what to change.
        hub: the name of a Hub resource (``describer.pretrained=org/name``, ``dataset org/data``)
            when the problem is only that the Hub could not be asked (unreachable or offline
            without a cached copy): such problems are told as one line naming the Hub.
    """

    cause: str
    fix: str
    hub: str = ""

    def line(self) -> str:
        return one_line(f"{self.cause}. Fix: {self.fix}", 700)


def format_problems(problems: Sequence[Problem]) -> list[str]:
    """The numbered lines a list of problems is printed as."""
    return [f"  {i}. {p.line()}" for i, p in enumerate(problems, 1)]


def as_error(problems: Sequence[Problem], prog: str = "lmms-genbench") -> ActionableError:
    """The error that ends a run with ``problems`` (at least one): a single problem is its own
    line; several are printed as a numbered list on stderr first, then one closing line."""
    if len(problems) == 1:
        return ActionableError(problems[0].cause, problems[0].fix)
    print(f"{prog}: preflight found {len(problems)} problems before loading any weights:", file=sys.stderr)
    for line in format_problems(problems):
        print(line, file=sys.stderr)
    return ActionableError(
        f"preflight found {len(problems)} problems, listed above",
        "fix each as its line says, then rerun; `lmms-genbench check <the same lmms-eval arguments>` checks "
        "again in seconds without loading anything",
    )
