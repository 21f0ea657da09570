"""Errors a person can act on: one line that names the cause and the fix.

lmms-eval 0.7.3 hides such a line twice. It retries ``Task.process_results`` on any
``Exception`` (tenacity: 5 attempts, 2 s apart, then a ``RetryError`` wrapping the
cause), and its command catches every ``Exception`` of an evaluation, prints the
traceback, logs "Error during evaluation" and exits 0. :class:`ActionableError` is a
``SystemExit`` so that it passes both: tenacity retries only ``Exception``, the command
catches only ``Exception``, and Python ends the process by printing the error's one
line to stderr with exit status 1 (no traceback). Python callers catch it by name
(``except ActionableError``); ``except Exception`` does not see it.

With lmms-eval's ``--verbosity DEBUG`` (which lmms-eval copies to ``$VERBOSITY``) the
original traceback is printed first, above the line.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Iterator, Mapping
from typing import Any

from .failures import ProbeFailure

__all__ = ["NETWORK_ERRORS", "VERBOSITY_ENV", "ActionableError", "Interrupted", "printable", "WrongModelError", "describe", "error_chain", "from_exception",
           "load_failure", "network_error", "one_line"]

#: set by lmms-eval from ``--verbosity``; DEBUG prints the cause's traceback too
VERBOSITY_ENV = "VERBOSITY"
_MAX_CHARS = 500
#: class names (the error's or a base's) meaning the network or the server failed, before or during a
#: transfer (requests', httpx's and the standard library's; matched by name: the clients move them)
NETWORK_ERRORS = ("ConnectionError", "ConnectError", "ReadError", "RemoteProtocolError", "TimeoutException",
                  "TimeoutError")


#: characters never shown raw: C0 controls (NUL, ESC starting terminal escape sequences, ...),
#: DEL, C1 controls, and the bidirectional overrides and isolates that reorder what is shown
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    """``text`` with control characters, escape sequences and bidi overrides written as escapes
    (``\\x1b``, ``\\u202e``): what a describer or an endpoint answered never drives a terminal or
    reorders a page. Newlines and tabs are kept."""
    return _UNPRINTABLE.sub(lambda m: ascii(m.group(0))[1:-1], str(text))


def one_line(text: object, limit: int = _MAX_CHARS) -> str:
    """``text`` on one line (whitespace runs collapsed, control characters escaped), at most
    ``limit`` characters."""
    flat = " ".join(printable(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def describe(exc: BaseException) -> str:
    """``Type: first line of the message`` of an exception."""
    lines = str(exc).strip().splitlines()
    return one_line(f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__, 300)


class _ExitLine(str):
    """The error's line; made text (as Python does to print it when the error ends the
    process) it first closes the progress bars still open, which would otherwise redraw
    themselves below it when the unwound frames are freed."""

    def __str__(self) -> str:
        tqdm = sys.modules.get("tqdm")  # never imported here: only bars that exist
        for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ())):
            try:
                bar.close()
            except Exception:  # a bar that cannot redraw must not hide the error
                pass
        return str.__str__(self)


class ActionableError(SystemExit):
    """A failure with its cause and its fix, shown as one line.

    Attributes:
        cause: what went wrong, naming the argument, file or network involved.
        fix: what to change.
    """

    def __init__(self, cause: str, fix: str) -> None:
        self.cause = one_line(cause)
        self.fix = one_line(fix)
        super().__init__(_ExitLine(f"lmms-genbench: error: {self.cause}. Fix: {self.fix}"))

    @property
    def message(self) -> str:
        """``<cause>. Fix: <fix>``, without the program name."""
        return f"{self.cause}. Fix: {self.fix}"


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT during one of our runs: raised on the main thread by the run's handler,
    so ``with`` blocks drain queued store writes on the way out; the run then ends with
    :meth:`line` and exit status ``128 + signum`` (:mod:`lmms_genbench.hooks.run`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = int(signum)

    @property
    def name(self) -> str:
        import signal

        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    def line(self) -> str:
        return f"lmms-genbench: interrupted by {self.name}; rerun the same command to resume"


class WrongModelError(ActionableError):
    """A task ran with a ``--model`` whose answers it cannot read: the run stops at the
    first such doc (``process_results``), before any score pretends to mean something."""

    def __init__(self, model: str, tasks: str, got: str, how: str = "") -> None:
        super().__init__(f"{got}; {tasks} must run with --model {model}", f"run them with --model {model}{how}")
        self.model = model


def model_arg_error(model: str, cause: str, fix: str) -> ActionableError:
    """A wrong ``--model_args`` value of ``--model <model>``: one line, exit 1 (lmms-eval prints
    an Exception and exits 0)."""
    return ActionableError(f"--model {model}: {cause}", fix)


def from_exception(exc: BaseException, cause: str, fix: str) -> ActionableError:
    """An :class:`ActionableError` for ``exc`` (chained to it): ``cause (Type: message)``.

    An ``ActionableError`` is returned unchanged, so nested boundaries keep the first
    (most precise) line. Under ``--verbosity DEBUG`` the original traceback is printed."""
    if isinstance(exc, ActionableError):
        return exc
    if os.environ.get(VERBOSITY_ENV, "").upper() == "DEBUG":
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    error = ActionableError(f"{cause} ({describe(exc)})", fix)
    error.__cause__ = exc
    return error


#: arguments that name a model's weights, in the order lmms-eval's classes read them
WEIGHT_ARGS = ("pretrained", "model_version", "model", "path")


def error_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, its causes and contexts, and a tenacity RetryError's last error, each once."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        error = todo.pop(0)
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        yield error
        last = getattr(error, "last_attempt", None)  # tenacity.RetryError
        if last is not None and callable(getattr(last, "exception", None)):
            todo.append(last.exception())
        todo += [error.__cause__, error.__context__]


def network_error(exc: BaseException) -> BaseException | None:
    """The first error in :func:`error_chain` that is a network failure, or None."""
    return next((e for e in error_chain(exc) if any(c.__name__ in NETWORK_ERRORS for c in type(e).__mro__)), None)


def load_failure(
    exc: BaseException, role: str, name: str, args: Mapping[str, Any], prefix: str = "", otherwise: str = ""
) -> ActionableError:
    """The one line for a model (``role`` ``name`` built with ``args``) that did not load:
    it names the weights argument as the user spells it (``prefix``: ``describer.``) and,
    for a local path that does not exist, says so. ``otherwise``: another way out."""
    otherwise = f", or {otherwise}" if otherwise else ""
    weight = next((key for key in WEIGHT_ARGS if args.get(key) not in (None, "")), None)
    if any(isinstance(e, ProbeFailure) for e in error_chain(exc)):  # it loaded: what failed is drawing
        given = f" with {prefix}{weight}={args[weight]}" if weight else ""
        return from_exception(
            exc, f"the {role} {name} loaded{given} but did not draw its probe picture",
            f"change what its error names among the {prefix}<arg> values (size, steps, settings){otherwise}",
        )
    if weight is None:
        return from_exception(
            exc, f"the {role} {name} did not load",
            f"check its {prefix}<arg>=... values and name its weights with {prefix}pretrained=<a local "
            f"folder or hub id>{otherwise}",
        )
    value = str(args[weight])
    if value.startswith(("/", ".", "~")) and not os.path.exists(os.path.expanduser(value)):
        return from_exception(
            exc, f"the {role} {name} did not load: its weights {prefix}{weight}={value} do not exist",
            f"give {prefix}{weight}=<an existing checkpoint folder or a hub id>{otherwise}",
        )
    network = network_error(exc)
    if network is not None and not os.path.isdir(os.path.expanduser(value)):
        endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
        return from_exception(
            exc, f"the {role} {name} did not load with {prefix}{weight}={value}: the Hugging Face Hub at "
                 f"{endpoint} could not be reached or stopped answering ({describe(network)})",
            f"check the network or proxy (HF_ENDPOINT names the Hub or a mirror) and rerun the same command "
            f"(what is stored is reused), or run offline (HF_HUB_OFFLINE=1) from a cache that holds the "
            f"weights{otherwise}",
        )
    return from_exception(
        exc, f"the {role} {name} did not load with {prefix}{weight}={value}",
        f"check {prefix}{weight} and the other {prefix}<arg> values (a hub id needs its weights "
        f"downloaded: offline runs read only the Hugging Face cache; API models need their key in the "
        f"environment){otherwise}",
    )
