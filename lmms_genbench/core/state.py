"""The process-wide state that remains, all of it here, each slot with why it outlives a call.

Everything else leaves a call in what it returns or lives on an object. A slot's value is made
by its owner's ``make()`` at first use and kept until :func:`reset`, which returns the process
to its import-time state (no slot holds anything): tests call it. The owners keep their own
public functions (``store.held.clear()``, ``metrics.networks.loading.clear_networks()``, ...)
and read and write through :func:`slot`, :func:`value` and :func:`put`.
``tests/unit/test_architecture.py`` checks that no other module holds process-wide state.
Imports only the standard library: the ``.pth`` start-up watcher may import its users.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from types import MappingProxyType
from typing import Any, TypeVar

__all__ = ["SLOTS", "put", "remember", "reset", "slot", "value"]

T = TypeVar("T")

#: every slot, by name: who owns it and why it is process-wide
SLOTS = MappingProxyType({
    "held_images": "store.held: the images the writer stored in this process, so that a scorer in the "
                   "same process (lmms-eval --model cycle scores right after drawing) need not decode them",
    "run": "hooks.run: the one run of ours in progress; lmms-eval's wrapped methods, called from its "
           "own code with no way to pass it, ask whether they run inside it",
    "ours_by_file": "hooks.scope: which source files are our task folders', read once per file: asked "
                    "on every wrapped lmms-eval call",
    "no_score": "metrics.scorers.reports: the 'produced no score' lines, said again as the process's "
                "last lines (lmms-eval prints its table after the aggregation)",
    "networks": "metrics.networks.loading: the one cache of loaded networks, each loaded once per "
                "process however many scorers and tasks ask for it",
    "network_views": "metrics.networks.loading: views of those networks per call options, so callers "
                     "asking the same share one object and its counters",
    "fid_resizer": "metrics.networks.inception: clean-fid's resize kernel, built once at first use",
    "chef_pools": "chef.recipe: ChEF's in-context example pools, registered by a task's process_docs and "
                  "read by its doc_to_text, which lmms-eval calls apart with only the doc",
    "secrets": "core.secrets: keys given in --model_args (describer.api_key=...), masked by value in every "
               "log line, report and results file of the process, as the environment's keys are",
    "stop": "core.signals: the signals received and whether the first is held back; written by the one "
            "SIGTERM/SIGINT handler (hooks.signals), which Python runs between any two lines of the main thread",
    "signal_wakeup": "hooks.signals: the pipe of the one thread that counts SIGTERM/SIGINT as the C-level handler "
                     "sees them (signal.set_wakeup_fd), so that a third ends the process while the main thread is blocked",
    "calls": "hooks.call: how many of each call-scoped change are in place now (any thread), so that "
             "hooks.changed() finds them as it finds the lasting ones",
    "facts": "what the installed libraries and our own files say, read once: diffusers' dtype argument, "
             "our task YAMLs (preflight), the smoke describer's token budget (models.cycle)",
})

_LOCK = threading.Lock()  # guards _VALUES; never held while a value is made
_MAKING = MappingProxyType({name: threading.Lock() for name in SLOTS})  # one maker per slot at a time
_VALUES: dict[str, Any] = {}


def _known(name: str) -> None:
    if name not in SLOTS:
        raise KeyError(f"no process-wide slot {name!r}: the slots are listed in lmms_genbench.core.state.SLOTS")


def slot(name: str, make: Callable[[], T]) -> T:
    """The value of slot ``name``, made by ``make()`` at its first use since import or
    :func:`reset` (thread-safe: made once; a ``make()`` that raises leaves the slot empty)."""
    _known(name)
    with _LOCK:
        if name in _VALUES:
            return _VALUES[name]
    with _MAKING[name]:
        with _LOCK:
            if name in _VALUES:  # made by the caller this one waited for
                return _VALUES[name]
        made = make()
        with _LOCK:
            return _VALUES.setdefault(name, made)


def value(name: str, default: Any = None) -> Any:
    """The value of slot ``name``, or ``default`` when it holds none."""
    _known(name)
    with _LOCK:
        return _VALUES.get(name, default)


def put(name: str, new: Any) -> Any:
    """Set slot ``name`` to ``new`` (None empties it); returns the value it held before."""
    _known(name)
    with _LOCK:
        old = _VALUES.pop(name, None)
        if new is not None:
            _VALUES[name] = new
        return old


_REMEMBERING = threading.RLock()  # one fact made at a time (a fact may read another): each made once


def remember(key: Hashable, compute: Callable[[], T]) -> T:
    """A fact read once per process (until :func:`reset`): ``compute()``'s value under ``key``,
    computed once even when threads ask at the same time (scoring's workers: a warning said once)."""
    facts = slot("facts", dict)
    if key not in facts:
        with _REMEMBERING:
            if key not in facts:
                facts[key] = compute()
    return facts[key]


def reset() -> None:
    """Return the process to its import-time state: every slot empty (tests)."""
    with _LOCK:
        _VALUES.clear()
