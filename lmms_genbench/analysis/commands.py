"""``lmms-genbench compare`` and ``lmms-genbench ranks``: parsers and handlers.

Exit codes as :mod:`lmms_genbench.cli`: 0 done, 1 the runs cannot be compared or ranked
(one line saying what differs), 2 bad usage or an unreadable results file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _load(prog: str, paths: list[str]):
    from .runs import RunError, load_run

    runs = []
    for path in paths:
        try:
            runs.append(load_run(path))
        except RunError as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return None
    return runs


def _write_json(path: str | None, payload) -> None:
    if path:
        from ..core.keys import atomic_write

        blob = json.dumps(payload, indent=2, allow_nan=False).encode("utf-8")
        atomic_write(Path(path), lambda fh: fh.write(blob))
        print(f"written {path}", file=sys.stderr)


def _run_compare(args: argparse.Namespace) -> int:
    from .compare import CompareError, comparable_tasks, compare_runs, format_comparison

    prog = "lmms-genbench compare"
    runs = _load(prog, [args.a, args.b])
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
    _write_json(args.json, [c.to_dict() for c in comparisons])
    return EXIT_OK


def _run_ranks(args: argparse.Namespace) -> int:
    from .ranks import RanksError, format_ranks, rank_runs

    prog = "lmms-genbench ranks"
    files: list[str] = []
    from .runs import find_results

    for path in args.results:
        files += [str(p) for p in find_results(path)]
    runs = _load(prog, files)
    if runs is None:
        return EXIT_USAGE
    try:
        stability = rank_runs(runs, args.task, args.metric)
    except RanksError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_FAIL
    print(format_ranks(stability))
    _write_json(args.json, stability.to_dict())
    return EXIT_OK


def add_compare(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="B - A for each headline score of two runs on the same docs, with paired bootstrap intervals",
        description=(
            "Match the docs of two lmms-eval runs (run with --log_samples) by id and report, per "
            "headline score, B - A with a paired bootstrap 95%% interval and p-value. Refuses runs "
            "that did not use the same docs, protocol or scorer."
        ),
    )
    parser.add_argument("a", metavar="RESULTS_A", help="lmms-eval <date>_results.json of run A (or its folder)")
    parser.add_argument("b", metavar="RESULTS_B", help="the same for run B")
    parser.add_argument("--task", default=None, help="one task (default: every task both runs have)")
    parser.add_argument("--metric", nargs="+", default=None, help="metrics to compare (default: every headline score)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--json", metavar="FILE", default=None, help="also write the comparison as JSON")
    parser.set_defaults(func=_run_compare)


def add_ranks(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ranks",
        help="describer rankings under each generator/scorer and Kendall's tau between them",
        description=(
            "Given runs of several describers under two or more generators or scorers, rank the "
            "describers by METRIC under each and report Kendall's tau-b between every two rankings "
            "(GenCeption's Table 4). Runs are placed by their chains' store namespace."
        ),
    )
    parser.add_argument("results", nargs="+", metavar="RESULTS", help="results files or folders holding them")
    parser.add_argument("--task", required=True, help="the task to rank on, e.g. mmeception")
    parser.add_argument("--metric", required=True, help="the score to rank by, e.g. gc@3")
    parser.add_argument("--json", metavar="FILE", default=None, help="also write the rankings as JSON")
    parser.set_defaults(func=_run_ranks)
