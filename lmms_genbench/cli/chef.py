"""``lmms-genbench chef summary``: 0-100 desideratum scores and figures from chef_* results."""

from __future__ import annotations

import argparse

from .common import EXIT_OK, EXIT_USAGE, add_label, add_results, command, group, say, take_results, task_names


def run_summary(args: argparse.Namespace) -> int:
    """Read lmms-eval results files of chef_* tasks (one model each; files with the same label
    are merged), average each desideratum over its scenarios, normalise to 0-100 and write
    chef_summary.json, chef_desiderata.png and chef_reliability.png."""
    from lmms_genbench.analysis.chef_summary import write_summary

    prog = "lmms-genbench chef summary"
    if not take_results(prog, args, lambda f: any(t.startswith("chef_") for t in task_names(f))):
        return EXIT_USAGE
    written, errors, notes = write_summary(args.results, args.out, args.label)
    say(prog, errors, notes)
    for path in written:
        print(path)
    return EXIT_USAGE if errors or not written else EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    sub = group(subparsers, "chef", dest="chef_command", metavar="{summary}",
                help="ChEF desiderata: summary scores and figures")
    summary = command(sub, run_summary, "summary",
                      help="0-100 desideratum scores and a radar/bar chart from chef_* results files")
    add_results(summary, "lmms-eval <date>_results.json files, or folders holding them (the files "
                "with chef_* tasks are taken)")
    summary.add_argument("--out", metavar="DIR", required=True, help="output folder (created if missing)")
    add_label(summary, "model label per results file, in order (same label = same model); default: model + model_args")
