"""``lmms-genbench compare``: B - A per headline score of two runs, with paired bootstrap intervals."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, add_json, command, load_runs, write_json


def run(args: argparse.Namespace) -> int:
    """Match the docs of two lmms-eval runs (run with --log_samples) by id and report, per
    headline score, B - A with a paired bootstrap 95% interval and p-value. Refuses runs that
    did not use the same docs, protocol or scorer."""
    from ..analysis.compare import (
        CompareError,
        comparable_tasks,
        compare_runs,
        format_comparison,
    )

    prog = "lmms-genbench compare"
    runs = load_runs(prog, [args.a, args.b])
    if runs is None:
        return EXIT_USAGE
    a, b = runs
    try:
        tasks = comparable_tasks(a, b, args.task)
        comparisons = [
            compare_runs(a, b, task, resamples=args.resamples, seed=args.seed, metrics=args.metric)
            for task in tasks
        ]
    except CompareError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_FAIL
    print("\n\n".join(format_comparison(c) for c in comparisons))
    write_json(args.json, [c.to_dict() for c in comparisons])
    return EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command(subparsers, run, "compare",
                     help="B - A for each headline score of two runs on the same docs, with paired bootstrap intervals")
    parser.add_argument("a", metavar="RESULTS_A", help="lmms-eval <date>_results.json of run A (or its folder)")
    parser.add_argument("b", metavar="RESULTS_B", help="the same for run B")
    parser.add_argument("--task", default=None, help="one task (default: every task both runs have)")
    parser.add_argument("--metric", nargs="+", default=None, help="metrics to compare (default: every headline score)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    add_json(parser, "comparison")
