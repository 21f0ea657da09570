"""Changes made for the duration of one call, and undone after it whatever happens: the
``call`` rows of :data:`lmms_genbench.hooks.TABLE` (issue 42, item 4).

Each context manager here names the table row it puts in place (``target``); while one is in
place :func:`active` lists it, so :func:`lmms_genbench.hooks.changed` finds call-scoped changes
as it finds the lasting ones, and the table test holds both to the table. Nothing outside
``hooks/`` changes another library's objects (tests/unit/hooks/test_hooks_table.py scans for it).
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from ..core import state

__all__ = ["TARGETS", "active", "attributes", "log_filter", "silent_tqdm", "strict_image_decoding"]

#: the ``call`` rows' targets, by what puts them in place
TARGETS = {
    "silent_tqdm": "lmms_eval.models module tqdm",
    "task_dict": "lmms_eval model task_dict",
    "max_new_tokens": "lmms_eval model max_new_tokens",
    "make_one_request": "lmms_eval.models.chat.vllm.VLLM make_one_request",
    "strict_image_decoding": "PIL.ImageFile.LOAD_TRUNCATED_IMAGES",
    "log_filter": "logging filters of a diffusers pipeline module and transformers.tokenization_utils_base",
    "tokenizers": "diffusers pipeline tokenizer attributes",
}
_ABSENT = object()
_PIL_LOCK = threading.Lock()  # one strict decode at a time: the flag is process-wide
_COUNT_LOCK = threading.Lock()


def _counts() -> Counter:
    return state.slot("calls", Counter)


@contextlib.contextmanager
def _in_place(target: str) -> Iterator[None]:
    counts = _counts()
    with _COUNT_LOCK:
        counts[target] += 1
    try:
        yield
    finally:
        with _COUNT_LOCK:
            counts[target] -= 1
            if counts[target] <= 0:
                del counts[target]


def active() -> set[str]:
    """The call-scoped targets in place now (in any thread)."""
    with _COUNT_LOCK:
        return {t for t, n in _counts().items() if n > 0}


@contextlib.contextmanager
def attributes(obj: Any, values: dict[str, Any], target: str, *, bypass: bool = False) -> Iterator[None]:
    """``obj``'s attributes set to ``values`` for one call, then put back as they were (deleted
    when they were not set on ``obj`` itself). ``bypass``: through ``object.__setattr__`` (a
    diffusers pipeline registers what is set on it in its config)."""
    if not values:
        yield
        return
    setter = object.__setattr__ if bypass else setattr
    saved = {name: vars(obj).get(name, _ABSENT) if hasattr(obj, "__dict__") else getattr(obj, name, _ABSENT)
             for name in values}
    with _in_place(target):
        try:
            for name, value in values.items():
                setter(obj, name, value)
            yield
        finally:
            for name, old in saved.items():
                if old is _ABSENT:
                    with contextlib.suppress(AttributeError):
                        object.__delattr__(obj, name) if bypass else delattr(obj, name)
                else:
                    setter(obj, name, old)


@contextlib.contextmanager
def silent_tqdm(module: Any) -> Iterator[None]:
    """For one call, ``tqdm`` in ``module`` (the one defining an lmms-eval model's method) draws
    nothing: the engine shows its own progress."""
    original = getattr(module, "tqdm", None)
    if not isinstance(original, type):
        yield
        return

    class _Silent(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    with attributes(module, {"tqdm": _Silent}, TARGETS["silent_tqdm"]):
        yield


@contextlib.contextmanager
def strict_image_decoding() -> Iterator[None]:
    """PIL's ``LOAD_TRUNCATED_IMAGES`` off for one decode: lmms-eval sets it globally at import,
    which would score a truncated file as a half-grey picture."""
    from PIL import ImageFile

    with _PIL_LOCK, attributes(ImageFile, {"LOAD_TRUNCATED_IMAGES": False}, TARGETS["strict_image_decoding"]):
        yield


@contextlib.contextmanager
def log_filter(names: Iterable[str], log_filter: Any) -> Iterator[None]:
    """``log_filter`` on the loggers ``names`` for one call (nothing when there are none)."""
    import logging

    loggers = [logging.getLogger(name) for name in names]
    if not loggers:
        yield
        return
    with _in_place(TARGETS["log_filter"]):
        for log in loggers:
            log.addFilter(log_filter)
        try:
            yield
        finally:
            for log in loggers:
                log.removeFilter(log_filter)
