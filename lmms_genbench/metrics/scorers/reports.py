"""What outlives one scoring call: the memo of reports, and the tasks that produced no score.

lmms-eval aggregates each metric of a task separately over the same items; the
:class:`ReportCache` lets every metric read one report. A task whose chains gave no score is
said at once and again as the last lines of the process (lmms-eval prints its table after
the aggregation, which would bury the warning).
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

from ...core import state

__all__ = ["ReportCache", "no_score"]

logger = logging.getLogger(__name__)


class ReportCache:
    """LRU memo of reports. lmms-eval calls the aggregation once per metric on the same
    items; the chains are scored once and every metric reads the same report.

    The lock is held while a report is computed, so concurrent calls for the same
    key wait for it instead of scoring twice.
    """

    def __init__(self, size: int = 4) -> None:
        self._lock = threading.Lock()
        self._reports: OrderedDict[Hashable, dict[str, Any]] = OrderedDict()
        self._size = size

    def get(self, key: Hashable, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        with self._lock:
            if key in self._reports:
                self._reports.move_to_end(key)
                return self._reports[key]
            report = compute()
            self._reports[key] = report
            while len(self._reports) > self._size:
                self._reports.popitem(last=False)
            return report

    def clear(self) -> None:
        with self._lock:
            self._reports.clear()


_NO_SCORE_LOCK = threading.Lock()


def no_score(task: str, docs: int, reasons: Mapping[str, Any], report: Path) -> None:
    """Warn that ``task`` scored none of its ``docs`` (the first reasons, where each failed
    doc is listed), and repeat it at exit."""
    shown = "; ".join(f"{reason} ({n})" for reason, n in list(reasons.items())[:3]) or "no chain was scorable"
    line = f"lmms-genbench: {task} produced no score: 0 of {docs} docs scored ({shown}); each failed doc is in {report}"
    logger.warning(line)
    with _NO_SCORE_LOCK:
        lines = state.slot("no_score", list)  # the tasks that produced no score in this process
        if not lines:
            # lmms-eval prints its table after the aggregation: say it again last (once, after a reset too)
            atexit.unregister(_print_no_score)
            atexit.register(_print_no_score)
        if line not in lines:
            lines.append(line)


def _print_no_score() -> None:
    for line in state.value("no_score", ()):
        print(line, file=sys.stderr)
