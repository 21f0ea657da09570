"""``lmms-genbench report``: one self-contained HTML page of one or more runs."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_OK, EXIT_USAGE, add_label, add_results, command, positive, say, take_results


def run(args: argparse.Namespace) -> int:
    """Write one HTML page (no network needed; images embedded as thumbnails) with the headline
    scores and their intervals, S(t) / S_δ(g) curves, per-category tables, the failed docs and a
    gallery of every chain, one column or card per run. Chains need lmms-eval's --log_samples."""
    from lmms_genbench.analysis.report import write_report

    prog = "lmms-genbench report"
    if not take_results(prog, args, lambda f: True):
        return EXIT_USAGE
    result = write_report(args.results, args.out, args.label, thumb_px=args.thumb, page_size=args.page_size,
                          title=args.title)
    say(prog, result.errors, result.notes)
    if result.path is None:
        print(f"{prog}: nothing written (no readable results file)", file=sys.stderr)
        return EXIT_USAGE
    print(result.path)
    print(f"{prog}: {result.runs} run(s), {result.chains} chain(s), {result.images} image(s), "
          f"{result.bytes / 1e6:.1f} MB in {result.seconds:.1f} s", file=sys.stderr)
    return EXIT_USAGE if result.errors else EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command(subparsers, run, "report",
                     help="one self-contained HTML page of one or more runs: scores, curves, tables, "
                     "failed docs, chains")
    add_results(parser, "lmms-eval <date>_results.json files, one per model, or folders holding them")
    parser.add_argument("-o", "--out", metavar="FILE", required=True, help="the HTML file to write")
    add_label(parser, "one label per results file, in order; default: model + model_args")
    parser.add_argument("--title", default=None, help="the page's title")
    parser.add_argument("--thumb", type=positive, default=128, metavar="PX",
                        help="longest side of the gallery thumbnails in pixels (default 128)")
    parser.add_argument("--page-size", type=positive, default=20, metavar="N",
                        help="chains per gallery page (default 20; the page can change it)")
