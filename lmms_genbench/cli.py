"""The ``lmms-genbench`` command.

Subcommands register themselves in :data:`_SUBCOMMANDS` (name -> function adding
its parser); each parser sets ``func`` to a handler taking the parsed arguments and
returning an exit code. Heavy imports happen inside the handlers, so ``--help`` is fast.

Usage::

    lmms-genbench plot RESULTS.json [RESULTS.json ...] [--out DIR] [--label NAME ...]

Exit codes: 0 success, 2 bad usage or an unreadable input file (the other files are
still plotted).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

EXIT_OK = 0
EXIT_USAGE = 2  # argparse's own code for bad usage; also used for unreadable inputs


def _run_plot(args: argparse.Namespace) -> int:
    from lmms_genbench.plots import plot_results

    if args.label is not None and len(args.label) != len(args.results):
        print(
            f"lmms-genbench plot: error: got {len(args.label)} --label value(s) for "
            f"{len(args.results)} results file(s); give one per file, in the same order",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.label is not None and not all(x.strip() for x in args.label):
        print("lmms-genbench plot: error: --label values must not be empty", file=sys.stderr)
        return EXIT_USAGE
    # unreadable files come back in report.errors, not as exceptions
    report = plot_results(args.results, out_dir=args.out, labels=args.label)
    for error in report.errors:
        print(f"lmms-genbench plot: error: {error}", file=sys.stderr)
    for note in report.notes:
        print(f"lmms-genbench plot: {note}", file=sys.stderr)
    for path in report.written:
        print(path)  # stdout holds only the written paths, for scripts
    if not report.written:
        print("lmms-genbench plot: nothing plotted", file=sys.stderr)
    return EXIT_USAGE if report.errors or not report.written else EXIT_OK


def _add_plot(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plot",
        help="plot S_δ(g) drift curves and MGG heatmaps from lmms-eval results files",
        description=(
            "Plot S_δ(g) curves (one panel per mapping, one line per results file) and, "
            "for files with mgg_<tag>@<g> values, a tag × generation accuracy heatmap. "
            "Writes sdp_drift_curves.png and sdp_mgg_heatmap.png and prints their paths."
        ),
    )
    parser.add_argument(
        "results", nargs="+", metavar="RESULTS.json",
        help="lmms-eval <date>_results.json files, one per model",
    )
    parser.add_argument(
        "--out", metavar="DIR", default=None,
        help="output folder (created if missing); default: the first results file's folder",
    )
    parser.add_argument(
        "--label", metavar="NAME", nargs="+", default=None,
        help="legend labels, one per results file in order; default: model + model_args "
        "from each file (keys naming a key/token/secret/password are dropped)",
    )
    parser.set_defaults(func=_run_plot)


def _run_chef_summary(args: argparse.Namespace) -> int:
    from lmms_genbench.chef.summary import write_summary

    if args.label is not None and len(args.label) != len(args.results):
        print(
            f"lmms-genbench chef summary: error: got {len(args.label)} --label value(s) for "
            f"{len(args.results)} results file(s); give one per file, in the same order",
            file=sys.stderr,
        )
        return EXIT_USAGE
    written, errors = write_summary(args.results, args.out, args.label)
    for error in errors:
        print(f"lmms-genbench chef summary: error: {error}", file=sys.stderr)
    for path in written:
        print(path)
    return EXIT_USAGE if errors or not written else EXIT_OK


def _add_chef(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("chef", help="ChEF desiderata: summary scores and figures")
    sub = parser.add_subparsers(dest="chef_command", required=True, metavar="{summary}")
    summary = sub.add_parser(
        "summary",
        help="0-100 desideratum scores and a radar/bar chart from chef_* results files",
        description=(
            "Read lmms-eval results files of chef_* tasks (one model each; files with the same "
            "label are merged), average each desideratum over its scenarios, normalise to 0-100 "
            "and write chef_summary.json, chef_desiderata.png and chef_reliability.png."
        ),
    )
    summary.add_argument("results", nargs="+", metavar="RESULTS.json", help="lmms-eval <date>_results.json files")
    summary.add_argument("--out", metavar="DIR", required=True, help="output folder (created if missing)")
    summary.add_argument(
        "--label", metavar="NAME", nargs="+", default=None,
        help="model label per results file, in order (same label = same model); default: model + model_args",
    )
    summary.set_defaults(func=_run_chef_summary)


#: subcommand name -> function adding its parser (later: "autobench", ...)
_SUBCOMMANDS: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "plot": _add_plot,
    "chef": _add_chef,
}


def build_parser() -> argparse.ArgumentParser:
    """The ``lmms-genbench`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="lmms-genbench", description="lmms-genbench utilities for lmms-eval results"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _SUBCOMMANDS.values():
        add(subparsers)
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
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # --help (0) and usage errors (2) stay an exit code
        return int(exc.code or 0)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
