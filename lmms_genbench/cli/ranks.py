"""``lmms-genbench ranks``: describer rankings under each generator or scorer, and Kendall's tau-b between them."""

from __future__ import annotations

import argparse
import sys

from ..analysis.results import find_results
from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, add_json, add_results, command, load_runs, write_json


def run(args: argparse.Namespace) -> int:
    """Given runs of several describers under two or more generators or scorers, rank the
    describers by METRIC under each and report Kendall's tau-b between every two rankings
    (GenCeption's Table 4). Runs are placed by their chains' store namespace."""
    from ..analysis.ranks import RanksError, format_ranks, rank_runs

    prog = "lmms-genbench ranks"
    files: list[str] = []
    for path in args.results:
        files += [str(p) for p in find_results(path)]
    runs = load_runs(prog, files)
    if runs is None:
        return EXIT_USAGE
    try:
        stability = rank_runs(runs, args.task, args.metric)
    except RanksError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_FAIL
    print(format_ranks(stability))
    write_json(args.json, stability.to_dict())
    return EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command(subparsers, run, "ranks",
                     help="describer rankings under each generator/scorer and Kendall's tau between them")
    add_results(parser, "results files or folders holding them")
    parser.add_argument("--task", required=True, help="the task to rank on, e.g. mmeception")
    parser.add_argument("--metric", required=True, help="the score to rank by, e.g. gc@3")
    add_json(parser, "rankings")
