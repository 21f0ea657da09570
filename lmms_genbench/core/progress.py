"""Progress bars on stderr for long work, quiet under lmms-eval's ``--verbosity ERROR``.

lmms-eval copies ``--verbosity`` to ``$VERBOSITY``; at ``ERROR`` or ``CRITICAL`` a
user asked for errors only, so no bar is drawn. Otherwise the bar is tqdm's (as
lmms-eval's own), with its rate and time left.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .errors import VERBOSITY_ENV

__all__ = ["QUIET_LEVELS", "progress_bar", "quiet"]

#: verbosity levels at which no bar is drawn
QUIET_LEVELS = ("ERROR", "CRITICAL")


def quiet() -> bool:
    """Whether ``$VERBOSITY`` asks for errors only."""
    return os.environ.get(VERBOSITY_ENV, "").strip().upper() in QUIET_LEVELS


def progress_bar(total: int, desc: str, unit: str, enabled: bool = True) -> Any:
    """A tqdm bar on stderr, disabled when ``enabled`` is false or :func:`quiet`.

    It is drawn even when stderr is not a terminal (lmms-eval's logs show their
    bars too); a disabled bar accepts the same calls and prints nothing.
    """
    from tqdm import tqdm  # imported when a bar is made, not with this module

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled or quiet(),
                file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
