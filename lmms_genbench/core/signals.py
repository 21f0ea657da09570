"""The stop a signal asked for, shared by the one SIGTERM/SIGINT handler
(:mod:`lmms_genbench.hooks.signals`, which installs it) and the code that runs a protocol.

The handler counts signals here (:func:`arrived`): the first asks the run to stop (raised at
once as :class:`~lmms_genbench.core.errors.Interrupted` inside a run's evaluation, or, inside
:func:`deferred`, at the next :func:`checkpoint`; outside one, where nothing is queued to drain,
it ends the process at once); later ones while the run drains are ignored, except that the third
ends the process at once. A describe call runs :func:`deferred`, so that answers an API already sent back
are stored before the run stops. Nothing here touches the process's signal handlers.

``$LMMS_GENBENCH_INTERRUPT_AT`` (tests only): ``<phase>[*<n>][:SIGINT][:thread]`` makes the run send
itself ``n`` signals (SIGTERM unless named; the first at once, the others 0.3 s apart, to a worker
thread with ``:thread``, as the kernel may deliver them) when it reaches ``phase`` (:data:`PHASES`:
:func:`interrupt_at`), so a test stops a phase without racing it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from . import state
from .errors import Interrupted

__all__ = ["INTERRUPT_AT_ENV", "PHASES", "Stop", "arrived", "checkpoint", "deferred", "interrupt_at", "requested", "stop"]

INTERRUPT_AT_ENV = "LMMS_GENBENCH_INTERRUPT_AT"
#: the signal count that ends the process at once, drained or not
HARD_STOP = 3
#: the moments of a run ``$LMMS_GENBENCH_INTERRUPT_AT`` names, in order: the lmms-eval command's
#: start (our entry point), task loading (the first TaskManager), simple_evaluate, our model's
#: construction, describing, drawing, scoring, lmms-eval saving the results, its closing summary
#: (the last one is sent by tests/support/slow_writes/sitecustomize.py, after the summary line)
PHASES = ("startup", "tasks", "start", "model", "describe", "draw", "score", "save", "summary")


@dataclass
class Stop:
    """Signals received so far in this process and whether the first is held back."""

    signum: int | None = None
    count: int = 0
    deferring: int = 0  # describe calls running inside deferred()
    raised: bool = False
    kept: bool = False  # the handler stays to the process's end (the lmms-eval command)
    inside: int = 0  # evaluations of ours running (hooks.signals.handling): a first signal raises there
    delivered: int = 0  # signals as the C-level handler saw them, whichever thread (hooks.signals)
    exiting: bool = False  # one thread is ending the process: the others wait for it
    # reentrant: the handler runs on the main thread, possibly while that thread holds it
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)


def stop() -> Stop:
    """This process's :class:`Stop`."""
    return state.slot("stop", Stop)


def arrived(signum: int) -> str:
    """Count a signal; what the handler does with it: ``"raise"`` (the first, inside an
    evaluation of ours and outside a deferred call), ``"defer"`` (the first, inside one: raised
    at the next checkpoint), ``"ignore"`` (a later one while the run drains) or ``"exit"`` (the
    third, or the first outside an evaluation of ours (start-up, saving, the closing summary),
    where nothing is queued to drain and lmms-eval's own ``except`` clauses could catch it)."""
    now = stop()
    with now.lock:
        now.count += 1
        if now.count == 1:
            now.signum = int(signum)
            if not now.inside:
                return "exit"
            if now.deferring:
                return "defer"
            now.raised = True
            return "raise"
        return "exit" if now.count >= HARD_STOP else "ignore"


def requested() -> int | None:
    """The first signal's number, when one arrived."""
    return stop().signum


def checkpoint() -> None:
    """Raise :class:`Interrupted` for a signal held back by :func:`deferred` (once)."""
    now = stop()
    with now.lock:
        if now.signum is None or now.raised or now.deferring:
            return
        now.raised = True
        signum = now.signum
    raise Interrupted(signum)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A call whose results are worth keeping (a describe call: an API's answers that came
    back): a first signal inside it is held until it returns; the caller stores what it got and
    then calls :func:`checkpoint`."""
    now = stop()
    with now.lock:
        now.deferring += 1
    try:
        yield
    finally:
        with now.lock:
            now.deferring -= 1


def interrupt_at(phase: str) -> None:
    """Tests only: send this process the signals ``$LMMS_GENBENCH_INTERRUPT_AT`` names when it
    reaches ``phase`` (the module docstring), once per process."""
    wanted = os.environ.get(INTERRUPT_AT_ENV, "")
    name, *how = wanted.split(":")
    how = {h.lower() for h in how}
    name, _, times = name.partition("*")
    sent = state.slot("facts", dict)
    if name != phase or sent.get(("interrupt_at", phase)):
        return
    sent[("interrupt_at", phase)] = True
    signum = signal.SIGINT if "sigint" in how else signal.SIGTERM
    count = int(times or 1)

    def send_rest() -> None:  # while the first one's drain runs
        for _ in range(count - 1):
            time.sleep(0.3)
            if "thread" in how:  # to this worker thread: the main thread is not woken by the kernel
                signal.pthread_kill(threading.get_ident(), signum)
            else:
                os.kill(os.getpid(), signum)

    if count > 1:
        threading.Thread(target=send_rest, name="genbench-interrupt-at", daemon=True).start()
    # the first from this thread: on the main thread the handler runs right here, so the phase is
    # stopped at this very point (from another thread, wherever the main thread is)
    os.kill(os.getpid(), signum)
