"""Slowed store writes for the signal tests (tests/e2e/test_signals_e2e.py), as strace's rename
delay slowed them in issue 43's retest: with this folder first on PYTHONPATH, Python imports this
module at start-up, and each ``os.replace`` onto a path under ``$GENBENCH_SLOW_WRITES_UNDER``
(every store write: core/keys.py's atomic_write) sleeps ``$GENBENCH_SLOW_WRITES_S`` (0.3 s) first.
Without the variable nothing changes."""

import os
import time

_UNDER = os.environ.get("GENBENCH_SLOW_WRITES_UNDER")

if _UNDER:
    _DELAY = float(os.environ.get("GENBENCH_SLOW_WRITES_S", "0.3"))
    _replace = os.replace

    def _slow_replace(src, dst, *args, **kwargs):
        if os.fspath(dst).startswith(_UNDER):
            time.sleep(_DELAY)
        return _replace(src, dst, *args, **kwargs)

    os.replace = _slow_replace
