"""``lmms-genbench plot``: S_δ(g) drift curves and MGG heatmaps from results files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import EXIT_OK, EXIT_USAGE, add_label, add_results, command, say, take_results


def _plottable(path: Path) -> bool:
    from lmms_genbench.analysis.plots import ResultsError, load_results

    try:
        return bool(load_results(path))
    except ResultsError:
        return False


def run(args: argparse.Namespace) -> int:
    """Plot S_δ(g) curves (one panel per mapping, one line per results file) and, for files with
    mgg_<tag>@<g> values, a tag × generation accuracy heatmap. Writes sdp_drift_curves.png and
    sdp_mgg_heatmap.png and prints their paths."""
    from lmms_genbench.analysis.plots import plot_results

    if not take_results("lmms-genbench plot", args, _plottable):
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
    parser = command(subparsers, run, "plot",
                     help="plot S_δ(g) drift curves and MGG heatmaps from lmms-eval results files")
    add_results(parser, "lmms-eval <date>_results.json files, one per model, or folders holding them "
                "(an --output_path: the files with drift or MGG values are taken)")
    parser.add_argument(
        "--out", metavar="DIR", default=None,
        help="output folder (created if missing); default: the first results file's folder",
    )
    add_label(parser, "legend labels, one per results file in order; default: model + model_args "
              "from each file (keys naming a key/token/secret/password are dropped)")
