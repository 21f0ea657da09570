"""``lmms-genbench plot``: S_δ(g) drift curves and MGG heatmaps from results files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import EXIT_OK, EXIT_USAGE, command, labels_ok, results_files, say


def _plottable(path: Path) -> bool:
    from lmms_genbench.analysis.plots import ResultsError, load_results

    try:
        return bool(load_results(path))
    except ResultsError:
        return False


def run(args: argparse.Namespace) -> int:
    from lmms_genbench.analysis.plots import plot_results

    args.results = results_files("lmms-genbench plot", args.results, _plottable)
    if args.results is None:
        return EXIT_USAGE
    if not labels_ok("lmms-genbench plot", args):
        return EXIT_USAGE
    # unreadable files come back in report.errors, not as exceptions
    report = plot_results(args.results, out_dir=args.out, labels=args.label)
    say("lmms-genbench plot", report.errors, report.notes)
    for path in report.written:
        print(path)  # stdout holds only the written paths, for scripts
    if not report.written:
        print("lmms-genbench plot: nothing plotted", file=sys.stderr)
    return EXIT_USAGE if report.errors or not report.written else EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers, run, "plot",
        help="plot S_δ(g) drift curves and MGG heatmaps from lmms-eval results files",
        description=(
            "Plot S_δ(g) curves (one panel per mapping, one line per results file) and, "
            "for files with mgg_<tag>@<g> values, a tag × generation accuracy heatmap. "
            "Writes sdp_drift_curves.png and sdp_mgg_heatmap.png and prints their paths."
        ),
    )
    parser.add_argument(
        "results", nargs="+", metavar="RESULTS",
        help="lmms-eval <date>_results.json files, one per model, or folders holding them "
        "(an --output_path: the files with drift or MGG values are taken)",
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
