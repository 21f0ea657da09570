"""The ``lmms-genbench`` command.

Subcommands register themselves in :data:`_SUBCOMMANDS` (name -> function adding
its parser); each parser sets ``func`` to a handler taking the parsed arguments and
returning an exit code. Heavy imports happen inside the handlers, so ``--help`` is fast.

Usage::

    lmms-genbench plot RESULTS [RESULTS ...] [--out DIR] [--label NAME ...]
    lmms-genbench sdp resample --seed N [--per-source 200] --out pairs.jsonl
    lmms-genbench sdp fetch-geneval [--out FILE]
    lmms-genbench chef summary RESULTS [RESULTS ...] --out DIR
    lmms-genbench report RESULTS [RESULTS ...] -o report.html [--label NAME ...]
    lmms-genbench compare RESULTS_A RESULTS_B [--task T] [--metric M ...] [--json FILE]
    lmms-genbench ranks RESULTS [RESULTS ...] --task T --metric M [--json FILE]
    lmms-genbench store verify FOLDER [--repair]
    lmms-genbench store merge STORE [STORE ...] -o NEW_STORE

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
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from lmms_genbench.core.errors import ActionableError, describe

EXIT_OK = 0
EXIT_FAIL = 1  # the command ran and failed (network, data): one line on stderr
EXIT_USAGE = 2  # argparse's own code for bad usage; also used for unreadable inputs
RESULTS_GLOB = "*_results.json"  # lmms-eval's <date>_results.json


def _results_files(prog: str, paths: Sequence[str], usable: Callable[[Path], bool]) -> list[str] | None:
    """``paths`` with each folder replaced by the results files under it (any depth,
    sorted) that ``usable`` accepts; a file is kept as given (its errors are the
    command's to report). None, after printing why, when a folder holds none."""
    files: list[str] = []
    for path in paths:
        if not Path(path).is_dir():
            files.append(path)
            continue
        found = sorted(Path(path).rglob(RESULTS_GLOB))
        picked = [str(f) for f in found if usable(f)]
        if not picked:
            print(f"{prog}: error: no usable {RESULTS_GLOB} under {path} ({len(found)} results file(s) found); "
                  "give the --output_path of an lmms-eval run of these tasks, or the files", file=sys.stderr)
            return None
        if len(picked) < len(found):
            print(f"{prog}: {path}: using {len(picked)} of {len(found)} results files "
                  "(the others hold none of these tasks)", file=sys.stderr)
        files.extend(picked)
    return files


def _task_names(path: Path) -> list[str]:
    """The task names of a results file; none when it cannot be read."""
    try:
        results = json.loads(path.read_text(encoding="utf-8")).get("results")
    except (OSError, ValueError, AttributeError):
        return []
    return [str(t) for t in results] if isinstance(results, dict) else []


def _labels_ok(prog: str, args: argparse.Namespace) -> bool:
    """``--label``: one non-empty value per results file, or none; prints why not."""
    if args.label is None:
        return True
    if len(args.label) != len(args.results):
        print(
            f"{prog}: error: got {len(args.label)} --label value(s) for "
            f"{len(args.results)} results file(s); give one per file, in the same order",
            file=sys.stderr,
        )
        return False
    if not all(x.strip() for x in args.label):
        print(f"{prog}: error: --label values must not be empty", file=sys.stderr)
        return False
    return True


def _plottable(path: Path) -> bool:
    from lmms_genbench.plots import ResultsError, load_results

    try:
        return bool(load_results(path))
    except ResultsError:
        return False


def _run_plot(args: argparse.Namespace) -> int:
    from lmms_genbench.plots import plot_results

    args.results = _results_files("lmms-genbench plot", args.results, _plottable)
    if args.results is None:
        return EXIT_USAGE
    if not _labels_ok("lmms-genbench plot", args):
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
    parser.set_defaults(func=_run_plot)


def _run_sdp_resample(args: argparse.Namespace) -> int:
    import json

    from lmms_genbench.core.keys import atomic_write
    from lmms_genbench.data.sdp import resample_nd400

    rows = resample_nd400(seed=args.seed, per_source=args.per_source)
    blob = "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")
    atomic_write(Path(args.out), lambda fh: fh.write(blob))
    print(args.out)
    print(
        f"lmms-genbench sdp: {len(rows)} pairs; run sdp_nocaps on them with "
        f"LMMS_GENBENCH_ND400_PAIRS={args.out}",
        file=sys.stderr,
    )
    return EXIT_OK


def _run_sdp_fetch_geneval(args: argparse.Namespace) -> int:
    import httpx

    from lmms_genbench.data.sdp import GENEVAL_URL, default_geneval_path, fetch_geneval_metadata

    try:
        target = fetch_geneval_metadata(args.out or default_geneval_path())
    except (httpx.HTTPError, OSError, RuntimeError, ValueError) as exc:
        raise ActionableError(
            f"could not fetch GenEval's metadata from {GENEVAL_URL} ({describe(exc)})",
            "check the network (or HTTPS_PROXY), or download evaluation_metadata.jsonl yourself and "
            "point LMMS_GENBENCH_GENEVAL_METADATA at it",
        ) from exc
    print(target)
    return EXIT_OK


def _add_sdp(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sdp", help="data for the semantic drift tasks (sdp_nocaps, sdp_geneval)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    resample = actions.add_parser(
        "resample",
        help="draw another Nocaps+Docci400-style pair list from DOCCI and NoCaps with a seed",
        description=(
            "Draw --per-source DOCCI (google/docci, config docci, test: example_id) and NoCaps "
            "(HuggingFaceM4/NoCaps, validation: image_file_name, as nd400 names them) ids without "
            "replacement from sorted ids with numpy's default_rng(seed), and write them as JSON "
            "lines {source, image_id}. sdp_nocaps uses the file when LMMS_GENBENCH_ND400_PAIRS "
            "points at it."
        ),
    )
    resample.add_argument("--seed", type=int, required=True, help="random seed (integer)")
    resample.add_argument("--per-source", type=int, default=200, help="pairs drawn from each source (default 200)")
    resample.add_argument("--out", required=True, metavar="FILE", help="output .jsonl")
    resample.set_defaults(func=_run_sdp_resample)
    fetch = actions.add_parser(
        "fetch-geneval",
        help="download GenEval's evaluation_metadata.jsonl (MIT) for sdp_geneval",
        description=(
            "Download prompts/evaluation_metadata.jsonl of djghosh13/geneval, check its 553 "
            "entries and tag counts, and write it where sdp_geneval looks by default "
            "($LMMS_GENBENCH_CACHE or ~/.cache/lmms_genbench, then geneval/)."
        ),
    )
    fetch.add_argument("--out", default=None, metavar="FILE", help="target file (default: sdp_geneval's default path)")
    fetch.set_defaults(func=_run_sdp_fetch_geneval)


def _run_store_verify(args: argparse.Namespace) -> int:
    from lmms_genbench.engine.verify import verify_store

    root = Path(args.folder).expanduser()
    if not root.is_dir():
        print(f"lmms-genbench store verify: error: {root} is not a folder. Fix: give the artifact store's "
              "folder (model_args artifacts=, or $LMMS_GENBENCH_ARTIFACTS)", file=sys.stderr)
        return EXIT_USAGE
    chains = bad = busy = hops = 0
    for folder, check in verify_store(root, repair=args.repair):
        chains += 1
        if check is None:
            busy += 1
            print(f"{folder}: held by a running run, not checked")
            continue
        hops += check.valid
        if check.problem:
            bad += 1
            moved = f"; moved aside to {check.quarantine}" if check.quarantine else ""
            print(f"{folder}: {check.problem}{moved}")
    verdict = "repaired" if args.repair else "refused"
    print(f"{chains} chains, {hops} hops verified, {bad} chains with {verdict} hops, {busy} held by a running run")
    return EXIT_OK if args.repair or not bad else EXIT_FAIL


def _run_store_merge(args: argparse.Namespace) -> int:
    from lmms_genbench.engine.merge import MergeConflict, merge_stores

    try:
        report = merge_stores([Path(s).expanduser() for s in args.stores], Path(args.out).expanduser())
    except ValueError as exc:
        print(f"lmms-genbench store merge: error: {exc}. Fix: give artifact store folders to merge and a new "
              "or empty folder as -o", file=sys.stderr)
        return EXIT_USAGE
    except MergeConflict as exc:
        for conflict in exc.conflicts:
            print(f"conflict: {conflict}")
        print(f"lmms-genbench store merge: error: {len(exc.conflicts)} chain(s) or file(s) differ between the "
              f"stores (first: {exc.conflicts[0]}); nothing was written. Fix: the stores were computed with "
              "different models or settings under the same names; keep one store's chain (move the other's "
              "folder away) or rerun that chain, then merge again", file=sys.stderr)
        return EXIT_FAIL
    for line in report.left_out:
        print(f"left out (not verified): {line}")
    print(f"{report.chains} chains, {report.hops} hops merged into {args.out} ({report.hops_shared} hops found "
          f"in several stores, same hash), {report.files} other files, {report.runs_lines} runs.jsonl lines; "
          f"{report.reports_left_out} scorer reports left out (a scoring run writes them)")
    return EXIT_OK


def _add_store(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("store", help="check and merge artifact stores")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    verify = actions.add_parser(
        "verify",
        help="report hops that are missing, truncated, undecodable, edited or drawn from another input",
        description=(
            "Verify every chain under FOLDER against its hops.jsonl records (each hop's sha256 and its "
            "input's). Exit 0 when every hop is sound, 1 when some are not. --repair moves refused hops, "
            "and every later hop of their chain, to quarantine/<time>/ in the chain's folder, so the next "
            "run recomputes them; hops written before records existed are checked by decoding and recorded."
        ),
    )
    verify.add_argument("folder", metavar="FOLDER", help="the artifact store, or any folder inside it")
    verify.add_argument("--repair", action="store_true", help="quarantine refused hops (the next run recomputes them)")
    verify.set_defaults(func=_run_store_verify)
    merge = actions.add_parser(
        "merge",
        help="merge stores of independent jobs (shard=i/n, per-node stores) by content hash",
        description=(
            "Merge the artifact stores STORE ... into the new folder NEW_STORE. Only verified hops are merged "
            "(refused ones are listed and left out); a hop stored in several stores must have the same sha256, "
            "or the merge names each conflicting chain, hop and both hashes, writes nothing and exits 1. "
            "Run it when no job writes to the stores; then score with one run over NEW_STORE (it computes "
            "nothing)."
        ),
    )
    merge.add_argument("stores", nargs="+", metavar="STORE", help="artifact store folders (model_args artifacts=)")
    merge.add_argument("-o", "--out", required=True, metavar="NEW_STORE", help="a new or empty folder")
    merge.set_defaults(func=_run_store_merge)


def _add_autobench(subparsers: argparse._SubParsersAction) -> None:
    from lmms_genbench.autobench.command import add_parser

    add_parser(subparsers)


def _run_chef_summary(args: argparse.Namespace) -> int:
    from lmms_genbench.chef.summary import write_summary

    prog = "lmms-genbench chef summary"
    args.results = _results_files(prog, args.results, lambda f: any(t.startswith("chef_") for t in _task_names(f)))
    if args.results is None:
        return EXIT_USAGE
    if not _labels_ok(prog, args):
        return EXIT_USAGE
    written, errors, notes = write_summary(args.results, args.out, args.label)
    for error in errors:
        print(f"{prog}: error: {error}", file=sys.stderr)
    for note in notes:
        print(f"{prog}: {note}", file=sys.stderr)
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
    summary.add_argument("results", nargs="+", metavar="RESULTS",
                         help="lmms-eval <date>_results.json files, or folders holding them (the files "
                         "with chef_* tasks are taken)")
    summary.add_argument("--out", metavar="DIR", required=True, help="output folder (created if missing)")
    summary.add_argument(
        "--label", metavar="NAME", nargs="+", default=None,
        help="model label per results file, in order (same label = same model); default: model + model_args",
    )
    summary.set_defaults(func=_run_chef_summary)


def _run_report(args: argparse.Namespace) -> int:
    from lmms_genbench.analysis.report import write_report

    prog = "lmms-genbench report"
    args.results = _results_files(prog, args.results, lambda f: True)
    if args.results is None or not _labels_ok(prog, args):
        return EXIT_USAGE
    result = write_report(args.results, args.out, args.label, thumb_px=args.thumb, page_size=args.page_size,
                          title=args.title)
    for error in result.errors:
        print(f"{prog}: error: {error}", file=sys.stderr)
    for note in result.notes:
        print(f"{prog}: {note}", file=sys.stderr)
    if result.path is None:
        print(f"{prog}: nothing written (no readable results file)", file=sys.stderr)
        return EXIT_USAGE
    print(result.path)
    print(f"{prog}: {result.runs} run(s), {result.chains} chain(s), {result.images} image(s), "
          f"{result.bytes / 1e6:.1f} MB in {result.seconds:.1f} s", file=sys.stderr)
    return EXIT_USAGE if result.errors else EXIT_OK


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _add_report(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="one self-contained HTML page of one or more runs: scores, curves, tables, failed docs, chains",
        description=(
            "Write one HTML page (no network needed; images embedded as thumbnails) with the headline "
            "scores and their intervals, S(t) / S_δ(g) curves, per-category tables, the failed docs and "
            "a gallery of every chain, one column or card per run. Chains need lmms-eval's --log_samples."
        ),
    )
    parser.add_argument("results", nargs="+", metavar="RESULTS",
                        help="lmms-eval <date>_results.json files, one per model, or folders holding them")
    parser.add_argument("-o", "--out", metavar="FILE", required=True, help="the HTML file to write")
    parser.add_argument("--label", metavar="NAME", nargs="+", default=None,
                        help="one label per results file, in order; default: model + model_args")
    parser.add_argument("--title", default=None, help="the page's title")
    parser.add_argument("--thumb", type=_positive, default=128, metavar="PX",
                        help="longest side of the gallery thumbnails in pixels (default 128)")
    parser.add_argument("--page-size", type=_positive, default=20, metavar="N",
                        help="chains per gallery page (default 20; the page can change it)")
    parser.set_defaults(func=_run_report)


#: subcommand name -> function adding its parser
_SUBCOMMANDS: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "plot": _add_plot,
    "sdp": _add_sdp,
    "autobench": _add_autobench,
    "chef": _add_chef,
    "report": _add_report,
    "compare": lambda sub: _analysis().add_compare(sub),
    "ranks": lambda sub: _analysis().add_ranks(sub),
    "store": _add_store,
}


def _analysis():
    from lmms_genbench.analysis import commands

    return commands


def build_parser() -> argparse.ArgumentParser:
    """The ``lmms-genbench`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="lmms-genbench", description="lmms-genbench utilities for lmms-eval results"
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
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


if __name__ == "__main__":
    sys.exit(main())
