"""Progress bars on stderr for long work, drawn with tqdm as lmms-eval draws its own.

Scoring 14 categories x 3 iterations of FID, or 400 chains x 20 generations of MCD, takes
minutes; a bar per metric and category says it is moving. Bars are off when the run asks
for less than INFO: lmms-eval's ``--verbosity WARNING`` / ``ERROR`` (lmms-eval copies it to
``$VERBOSITY``), or a level above INFO set on the ``lmms_genbench`` logger.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from .errors import VERBOSITY_ENV

__all__ = ["bars_cleared", "progress", "progress_bar", "progress_enabled", "say"]

PACKAGE_LOGGER = "lmms_genbench"


def progress_enabled() -> bool:
    """Whether bars are drawn: the run's verbosity and our logger allow INFO."""
    verbosity = os.environ.get(VERBOSITY_ENV, "").strip().upper()
    level = logging.getLevelName(verbosity) if verbosity else None
    if isinstance(level, int) and level > logging.INFO:
        return False
    own = logging.getLogger(PACKAGE_LOGGER).level  # NOTSET (0) unless someone set it
    return not own or own <= logging.INFO


def progress(iterable: Iterable[Any] | None = None, *, desc: str, total: int | None = None, unit: str = "it") -> Any:
    """A tqdm bar on stderr (also when stderr is not a terminal, as in lmms-eval's logs),
    or a silent one when :func:`progress_enabled` says no. Use as the iterable, or call
    ``update(n)`` on it; close it (or use ``with``) when done."""
    from tqdm import tqdm

    return tqdm(iterable, desc=desc, total=total, unit=unit, file=sys.stderr, disable=not progress_enabled(),
                dynamic_ncols=True)


def progress_bar(total: int, desc: str, unit: str, enabled: bool = True) -> Any:
    """:func:`progress` as a bar to ``update``, off also when the caller says so (``enabled``)."""
    bar = progress(desc=desc, total=total, unit=unit)
    if not enabled:
        bar.disable = True
    return bar


@contextlib.contextmanager
def bars_cleared() -> Iterator[None]:
    """A message line on stderr never shares a line with a bar: on a terminal the bars are cleared
    while the block writes and drawn again after it (tqdm's ``external_write_mode``); in a log
    file (no terminal: a cleared bar would stay on the message's line, behind a carriage return)
    the open bar's line is ended first, and the bar goes on below the message."""
    if "tqdm" not in sys.modules:  # no bar was ever drawn in this process
        yield
        return
    from tqdm import tqdm

    stream = sys.stderr
    if not getattr(stream, "isatty", lambda: False)():
        if any(not bar.disable for bar in list(getattr(tqdm, "_instances", ()))):
            stream.write("\n")
            stream.flush()
        yield
        return
    with tqdm.external_write_mode(file=stream):
        yield


def say(log: logging.Logger, level: int, message: str, *args: Any) -> None:
    """``log.log(level, message, *args)`` on a line of its own, the bars cleared first."""
    if not log.isEnabledFor(level):
        return
    with bars_cleared():
        log.log(level, message, *args)
