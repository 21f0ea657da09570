"""The one SIGTERM/SIGINT handler of our runs (issues 43, 52), with the guarantees docs/running.md
gives, whatever the install (wheel or editable) and launcher (``lmms-eval``, ``python -m
lmms_eval``, ``accelerate launch -m lmms_eval``).

Under the lmms-eval command running one of our model types, :func:`keep` puts it in place when
lmms-eval loads our entry point (:func:`lmms_genbench.hooks.entry.command_start`) and leaves it to
the process's end; a ``simple_evaluate`` of our model types from Python gets it from
:func:`handling`, which puts the previous handlers back when that returns. What a signal does is
counted in :mod:`lmms_genbench.core.signals`:

* the first, inside a ``simple_evaluate`` of ours (:func:`handling`: task loading, the model's
  construction, describing, drawing, scoring), raises
  :class:`~lmms_genbench.core.errors.Interrupted` on the main thread wherever the run is; inside a
  describe call it is held until the call returns and its answers are queued for the store.
  Leaving the engine drains the queued store writes; :func:`exit_interrupted` then closes any
  progress bar and ends the process with one line of its own, ``lmms-genbench: interrupted by
  SIGTERM; rerun the same command to resume``, exit status 128 + the signal's number, no
  traceback. Outside one (the command's start-up and task listing, lmms-eval saving the results
  and printing its summary), nothing is queued: the handler ends the process at once the same
  way, so that no ``except`` clause of lmms-eval's can turn it into a traceback and exit 1;
* a second while the run drains is ignored; a third ends the process at once (the same line and
  status; the writes still queued are lost, as after ``kill -9``, and recomputed by the rerun),
  whichever thread the kernel delivered it to: Python runs the handler on the main thread only,
  which a drain may hold blocked, so a thread of ours also counts the signals as the C-level
  handler sees them (``signal.set_wakeup_fd``) and ends the process on the third.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

__all__ = ["SIGNALS", "exit_interrupted", "handler", "handling", "keep"]

#: how long a second thread ending the process waits for the first one's os._exit
_EXIT_WAIT_S = 30.0

SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _stop():
    from ..core.signals import stop

    return stop()


def handler(signum, frame) -> None:
    """The handler (module docstring)."""
    from ..core.errors import Interrupted
    from ..core.signals import arrived, requested

    action = arrived(signum)
    if action == "raise":
        raise Interrupted(signum)
    if action == "exit":
        exit_interrupted(Interrupted(requested() or signum))


handler.lmms_genbench = True


def _install() -> dict | None:
    """Our handler for both signals; the previous ones, or None (not the main thread, or ours already)."""
    if threading.current_thread() is not threading.main_thread():
        return None  # Python delivers signals to the main thread only
    if signal.getsignal(signal.SIGTERM) is handler:
        return None
    before = {s: signal.signal(s, handler) for s in SIGNALS}
    before["wakeup"] = _take_wakeup_fd()
    return before


def _counting_pipe() -> int:
    """The write end of the pipe the counting thread reads (module docstring), made once per process."""
    read, write = os.pipe()
    os.set_blocking(write, False)  # the C-level handler must never block on it
    threading.Thread(target=_deliveries, args=(read,), name="genbench-signals", daemon=True).start()
    return write


def _take_wakeup_fd() -> int | None:
    """Point the process's wakeup fd at the counting thread's pipe; what it was before, or None
    when it is left alone (something else, an asyncio loop, holds it: the Python handler still
    counts, on the main thread)."""
    from ..core import state

    write = state.slot("signal_wakeup", _counting_pipe)
    try:
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except (ValueError, OSError):
        return None
    if previous not in (-1, write):  # not ours to take
        signal.set_wakeup_fd(previous)
        return None
    return previous


def _restore(before: dict) -> None:
    """The handlers and wakeup fd :func:`_install` replaced (main thread)."""
    previous = before.pop("wakeup", None)
    for s, handler_before in before.items():
        signal.signal(s, handler_before)
    if previous is not None:
        signal.set_wakeup_fd(previous)


def _deliveries(read: int) -> None:
    from ..core.errors import Interrupted
    from ..core.signals import HARD_STOP

    while True:
        try:
            data = os.read(read, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum not in SIGNALS or signal.getsignal(signum) is not handler:
                continue
            now = _stop()
            with now.lock:
                now.delivered += 1
                ended = now.delivered >= HARD_STOP
                first = now.signum or signum
            if ended:  # the main thread may be blocked: end the process from here
                exit_interrupted(Interrupted(first), hard=True)


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """Our handler for the duration of the block (a ``simple_evaluate`` of our model types), a
    first signal raised inside it; the previous handlers come back afterwards unless
    :func:`keep` was called."""
    before = _install()
    if before is not None:  # a new run: no signal counted yet
        from ..core import state

        state.put("stop", None)
    now = _stop()
    with now.lock:
        now.inside += 1
    try:
        yield
    finally:
        with now.lock:
            now.inside -= 1
        if before is not None and not now.kept:
            _restore(before)


def keep() -> None:
    """Leave our handler in place to the process's end (the ``lmms-eval`` command), installing it
    now if it is not (a signal while lmms-eval saves the results ends in the same line)."""
    _stop().kept = True
    _install()


def exit_interrupted(exc: BaseException, hard: bool = False) -> None:
    """End the process: progress bars closed, one line, exit status 128 + signum, no traceback.
    ``os._exit``: lmms-eval's worker threads would hold a normal exit, and the store's writes are
    drained already. Once per process: a second caller (the counting thread and the main thread
    on the same third signal) waits for the first one's exit. ``hard``: from the counting thread
    while the main thread may hold the streams: the bars are left, the line goes on a line of its own."""
    from ..core.errors import Interrupted

    if not isinstance(exc, Interrupted):
        exc = Interrupted(signal.SIGINT)  # Ctrl-C before our handler (Python's own KeyboardInterrupt)
    now = _stop()
    with now.lock:
        first, now.exiting = not now.exiting, True
    if not first:
        time.sleep(_EXIT_WAIT_S)
    if hard:
        with contextlib.suppress(Exception):
            os.write(2, ("\n" + exc.line() + "\n").encode("utf-8"))
        os._exit(128 + exc.signum)
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
