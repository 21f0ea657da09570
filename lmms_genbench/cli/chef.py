"""``lmms-genbench chef summary``: 0-100 desideratum scores and figures from chef_* results."""

from __future__ import annotations

import argparse

from .common import (
    EXIT_OK,
    EXIT_USAGE,
    command,
    labels_ok,
    results_files,
    say,
    task_names,
)


def run_summary(args: argparse.Namespace) -> int:
    from lmms_genbench.chef.summary import write_summary

    prog = "lmms-genbench chef summary"
    args.results = results_files(prog, args.results, lambda f: any(t.startswith("chef_") for t in task_names(f)))
    if args.results is None:
        return EXIT_USAGE
    if not labels_ok(prog, args):
        return EXIT_USAGE
    written, errors, notes = write_summary(args.results, args.out, args.label)
    say(prog, errors, notes)
    for path in written:
        print(path)
    return EXIT_USAGE if errors or not written else EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("chef", help="ChEF desiderata: summary scores and figures")
    sub = parser.add_subparsers(dest="chef_command", required=True, metavar="{summary}")
    summary = command(
        sub, run_summary, "summary",
        help="0-100 desideratum scores and a radar/bar chart from chef_* results files",
        description=(
            "Read lmms-eval results files of chef_* tasks (one model each; files with the same "
            "label are merged), average each desideratum over its scenarios, normalise to 0-100 "
            "and write chef_summary.json, chef_desiderata.png and chef_reliability.png."
        ),
    )
    summary.add_argument("results", nargs="+", metavar="RESULTS",
                         help="lmms-eval <date>_results.json files, or folders holding them (the files "
                         "with chef_* tasks are taken)")
    summary.add_argument("--out", metavar="DIR", required=True, help="output folder (created if missing)")
    summary.add_argument(
        "--label", metavar="NAME", nargs="+", default=None,
        help="model label per results file, in order (same label = same model); default: model + model_args",
    )
