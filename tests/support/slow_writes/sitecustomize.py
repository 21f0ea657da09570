"""Slowed store writes for the signal tests (tests/e2e/test_signals_e2e.py), as strace's rename
delay slowed them in issue 43's retest, and a signal after the closing summary line (below): with
this folder first on PYTHONPATH, Python imports this module at start-up, and each ``os.replace``
onto a path under ``$GENBENCH_SLOW_WRITES_UNDER`` (every store write: core/keys.py's atomic_write)
sleeps ``$GENBENCH_SLOW_WRITES_S`` (0.3 s) first. Without the variables nothing changes."""

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

# The signal tests' last phase, lmms-eval's closing summary (tests/e2e/test_installs_e2e.py): with
# $GENBENCH_SIGNAL_AFTER_PRINT set, the process sends itself $GENBENCH_SIGNAL_AFTER_PRINT_SIGNAL
# (SIGTERM unless named) right after printing a line that starts with it (lmms-eval's summary
# line, "cycle (...)"), before the tables that follow.
_AFTER = os.environ.get("GENBENCH_SIGNAL_AFTER_PRINT")

if _AFTER:
    import builtins
    import signal

    _print = builtins.print

    def _print_then_signal(*args, **kwargs):
        _print(*args, **kwargs)
        if args and isinstance(args[0], str) and args[0].startswith(_AFTER):
            os.kill(os.getpid(), signal.Signals[os.environ.get("GENBENCH_SIGNAL_AFTER_PRINT_SIGNAL", "SIGTERM")])

    builtins.print = _print_then_signal
