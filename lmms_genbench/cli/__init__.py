"""The ``lmms-genbench`` command.

One module per command in this package, each with ``add_parser(subparsers)``; its parser
(:func:`.common.command`) sets ``func`` to a handler taking the parsed arguments and returning
an exit code from :mod:`.common`'s one table; the handler's docstring is its ``--help``
description. Arguments several commands share are declared in :mod:`.common`. :data:`COMMANDS` lists them. Heavy imports happen inside the
handlers, so ``--help`` is fast.

Usage::

    lmms-genbench check --model M --model_args ARGS --tasks T [any other lmms-eval argument]
    lmms-genbench plot RESULTS [RESULTS ...] [--out DIR] [--label NAME ...]
    lmms-genbench sdp resample --seed N [--per-source 200] --out pairs.jsonl
    lmms-genbench sdp fetch-geneval [--out FILE]
    lmms-genbench chef summary RESULTS [RESULTS ...] --out DIR
    lmms-genbench report RESULTS [RESULTS ...] -o report.html [--label NAME ...]
    lmms-genbench compare RESULTS_A RESULTS_B [--task T] [--metric M ...] [--json FILE]
    lmms-genbench ranks RESULTS [RESULTS ...] --task T --metric M [--json FILE]
    lmms-genbench store verify FOLDER [--repair]
    lmms-genbench store merge STORE [STORE ...] -o NEW_STORE
    lmms-genbench upstream export TREE

RESULTS is an lmms-eval ``*_results.json`` file or a folder (an ``--output_path``):
lmms-eval writes ``<output_path>/<model>/<date>_results.json``, and ``<model>`` is empty
when ``--model_args`` names no ``pretrained=``/``model=`` (``preset=smoke``), so a folder
is searched at any depth and only the files the command can use are taken.

Exit codes: 0 success, 1 a failure (one line on stderr: the cause, and the fix where
there is one), 2 bad usage or an unreadable input file (the other files are still
plotted). ``lmms-genbench --debug ...`` shows the traceback of a failure instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module

from ..core.errors import ActionableError, describe
from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE

__all__ = ["COMMANDS", "EXIT_FAIL", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]


#: every ``lmms-genbench`` command, in ``--help`` order: each is a module of this package
COMMANDS = ("check", "plot", "sdp", "autobench", "chef", "report", "compare", "ranks", "store", "upstream")


def build_parser() -> argparse.ArgumentParser:
    """The ``lmms-genbench`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="lmms-genbench", description="lmms-genbench utilities for lmms-eval results"
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        import_module(f"{__name__}.{name}").add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lmms-genbench``.

    Args:
        argv: arguments without the program name; None reads ``sys.argv[1:]``.

    Returns:
        the exit code (argparse's usage errors, exit 2, are returned, not raised).
    """
    parser = build_parser()
    try:
        # check takes a whole lmms-eval command line: the arguments it does not read are ignored
        args, extra = parser.parse_known_args(None if argv is None else list(argv))
        if extra and getattr(args, "extra", None) is None:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help (0) and usage errors (2) stay an exit code
        return int(exc.code or 0)
    prog = " ".join(["lmms-genbench", *(a for a in (args.command, *_actions(args)) if a)])
    try:
        return args.func(args)
    except ActionableError as exc:
        if args.debug:
            raise
        print(f"{prog}: error: {exc.message}", file=sys.stderr)
    except Exception as exc:  # one line, not a traceback: --debug shows it
        if args.debug:
            raise
        print(f"{prog}: error: {describe(exc)} (lmms-genbench --debug shows the traceback)", file=sys.stderr)
    return EXIT_FAIL


def _actions(args: argparse.Namespace) -> list[str]:
    """The second-level subcommand, as each group names its destination."""
    return [getattr(args, d) for d in ("action", "chef_command", "autobench_command") if getattr(args, d, None)]
