"""The one SIGTERM/SIGINT handler of our runs (issue 43), from our model's construction to the
process's end, with the guarantees docs/running.md gives.

:func:`handling` puts it in place for a ``simple_evaluate`` of our model types (before the model
is built) and puts the previous handlers back when that returns; under the ``lmms-eval`` command
:func:`keep` leaves it in place to the process's end (lmms-eval saves the results after
``simple_evaluate``). What a signal does is counted in :mod:`lmms_genbench.core.signals`:

* the first raises :class:`~lmms_genbench.core.errors.Interrupted` on the main thread wherever
  the run is (start-up, describing, drawing, scoring); inside a describe call it is held until the
  call returns and its answers are queued for the store. Leaving the engine drains the queued
  store writes; :func:`exit_interrupted` then closes any progress bar and ends the process with
  one line of its own, ``lmms-genbench: interrupted by SIGTERM; rerun the same command to
  resume``, exit status 128 + the signal's number, no traceback;
* a second while the run drains is ignored; a third ends the process at once (the same line and
  status; the writes still queued are lost, as after ``kill -9``, and recomputed by the rerun).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

__all__ = ["SIGNALS", "exit_interrupted", "handler", "handling", "keep"]

SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _stop():
    from ..core.signals import stop

    return stop()


def handler(signum, frame) -> None:
    """The handler (module docstring)."""
    from ..core.errors import Interrupted
    from ..core.signals import arrived

    action = arrived(signum)
    if action == "raise":
        raise Interrupted(signum)
    if action == "exit":
        exit_interrupted(Interrupted(signum))


handler.lmms_genbench = True


def _install() -> dict | None:
    """Our handler for both signals; the previous ones, or None (not the main thread, or ours already)."""
    if threading.current_thread() is not threading.main_thread():
        return None  # Python delivers signals to the main thread only
    if signal.getsignal(signal.SIGTERM) is handler:
        return None
    return {s: signal.signal(s, handler) for s in SIGNALS}


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """Our handler for the duration of the block (a ``simple_evaluate`` of our model types); the
    previous handlers come back afterwards unless :func:`keep` was called."""
    before = _install()
    if before is not None:  # a new run: no signal counted yet
        from ..core import state

        state.put("stop", None)
    try:
        yield
    finally:
        if before is not None and not _stop().kept:
            for s, previous in before.items():
                signal.signal(s, previous)


def keep() -> None:
    """Leave our handler in place to the process's end (the ``lmms-eval`` command), installing it
    now if it is not (a signal while lmms-eval saves the results ends in the same line)."""
    _stop().kept = True
    _install()


def exit_interrupted(exc: BaseException) -> None:
    """End the process: progress bars closed, one line, exit status 128 + signum, no traceback.
    ``os._exit``: lmms-eval's worker threads would hold a normal exit, and the store's writes are
    drained already."""
    from ..core.errors import Interrupted

    if not isinstance(exc, Interrupted):
        exc = Interrupted(signal.SIGINT)  # Ctrl-C before our handler (Python's own KeyboardInterrupt)
    tqdm = sys.modules.get("tqdm")  # never imported here: only bars that exist
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ())):
        with contextlib.suppress(Exception):
            bar.close()  # a bar left open would glue the line to its own
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):
        os.write(2, (exc.line() + "\n").encode("utf-8"))
    os._exit(128 + exc.signum)
