"""``lmms-genbench sdp {export,score}``: Semantic Drift chains in the authors' folder layout
(:mod:`lmms_genbench.analysis.sdp_layout`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

from .common import EXIT_FAIL, EXIT_OK, write_json

EXPORT = "lmms-genbench sdp export"
SCORE = "lmms-genbench sdp score"


def _fail(prog: str, message: str, fix: str = "") -> int:
    print(f"{prog}: error: {message}" + (f". Fix: {fix}" if fix else ""), file=sys.stderr)
    return EXIT_FAIL


def _chains_of_results(files: list[Path], task: str | None):
    """The chains of the results files' one semantic-drift task (``mcd_avg`` or ``mgg`` and
    logged chains, or ``task``), or the one line saying why there are none."""
    from ..analysis.runs import RunError, load_run

    found = {}
    for path in files:
        try:
            run = load_run(path)
        except RunError as exc:
            return None, str(exc)
        for name, t in run.tasks.items():
            if ("mcd_avg" in t.scores or "mgg" in t.scores) and t.chains and (task is None or name == task):
                found[(str(path), name)] = list(t.chains.values())
    if len(found) != 1:
        named = sorted(f"{n} in {p}" for p, n in found) or ["none"]
        why = "no semantic-drift task with logged chains (run it with --log_samples)" if not found else \
            f"{len(found)} semantic-drift tasks: {', '.join(named)}; name one with --task"
        return None, why
    return next(iter(found.values())), None


def run_export(args: argparse.Namespace) -> int:
    """Write the chains of a finished sdp_* run (a results file or folder, run with
    --log_samples) or of a store folder (its chain folders) in the Semantic Drift authors' layout:
    text-first/gen-0.csv (filename,caption; the source captions), text-first/gen-1/<name>.png, ...,
    image-first/gen-0/<name>.png (the source images), image-first/gen-1.csv, ... Their
    mcd-sdr.py --data DIR reads it; mgg.py --imagedir DIR/text-first/ reads the images of an
    sdp_geneval run (named <metadata line>.png). Only complete chains are written (the others are
    left out whole and counted)."""
    from ..analysis.results import find_results
    from ..analysis.sdp_layout import LayoutError, chains_from_folders, export_chains
    from ..store import chain_folders

    source = Path(args.source).expanduser()
    if not source.exists():
        return _fail(EXPORT, f"{source} does not exist", "give a results file or folder, or a store folder")
    files = [p for p in find_results(source) if p.is_file()]
    if files:
        chains, why = _chains_of_results(files, args.task)
        if chains is None:
            return _fail(EXPORT, f"{source}: {why}")
    else:
        folders = sorted(chain_folders(source))
        if not folders:
            return _fail(EXPORT, f"{source}: no *_results.json and no chain folders under it",
                         "give lmms-eval's --output_path of an sdp run, or the store folder of its chains")
        chains = chains_from_folders(folders)
    try:
        result = export_chains(chains, Path(args.out).expanduser())
    except (LayoutError, OSError) as exc:
        return _fail(EXPORT, str(exc))
    for direction, n in sorted(result.chains.items()):
        print(f"{direction}: {n} chains, generations 0..{result.generations[direction]}")
    if result.left_out:
        print(f"left out (not complete): {result.left_out}", file=sys.stderr)
    print(result.root)
    return EXIT_OK


def run_score(args: argparse.Namespace) -> int:
    """Score chains stored in the Semantic Drift authors' layout (text-first/gen-0.csv,
    text-first/gen-1/, ..., image-first/gen-0/, image-first/gen-1.csv, ...) with this package's
    MCD scorer: MCD per mapping and averaged, S_δ(g) and SDR, printed and written as
    mcd_report.json beside the chains, which are copied into the store (--artifacts); with
    --geneval METADATA also MGG of the text-first images (<metadata line>.png). The whole
    folder is checked first: a missing generation or image, wrong columns or an empty CSV end
    the command with the file named, and nothing is scored."""
    from ..analysis.sdp_layout import LayoutError, import_layout, read_layout
    from ..core.errors import ActionableError
    from ..metrics.scorers.mcd import MCD
    from ..metrics.scorers.mcd_report import sdr_group
    from ..metrics.scorers.mgg import MGG
    from ..store import ArtifactStore

    try:
        layout = read_layout(Path(args.folder).expanduser())
    except LayoutError as exc:
        return _fail(SCORE, str(exc), "give a folder in the authors' layout (lmms-genbench sdp export writes one)")
    scorer: dict = {"preset": args.preset}
    if args.resamples is not None:
        scorer["bootstrap"] = {"resamples": args.resamples}
    chains = import_layout(layout, ArtifactStore(args.artifacts), scorer)
    G = min(layout.generations.values())  # a longer direction is scored on its first G, as any chain
    records = [MCD.record({"source": "layout"}, dataclasses.replace(c, length=G).to_json()) for c in chains]
    try:
        mgg = _mgg_records(layout, chains, args.geneval) if args.geneval else []
        report = MCD.report(records)
        names = [n for n in MCD.metric_names(G, MCD.task_settings(scorer)) if not n.endswith("_stderr")]
        values = {n: _number(report.get(n)) for n in names}
        if mgg:
            mgg_report = MGG.report(mgg)
            length = mgg[0].length
            values.update({n: _number(mgg_report.get(n)) for n in MGG.metric_names(length, MGG.task_settings(scorer))
                           if not n.endswith("_stderr")})
    except (ActionableError, LayoutError) as exc:
        return _fail(SCORE, str(exc))
    reasons = report.get("sdr_failures") or {}
    for name, value in values.items():
        shown = f"{value:.6f}" if isinstance(value, float) else "null" if value is None else str(value)
        group = sdr_group(name)
        why = f"  (no SDR fit: {reasons[group]})" if value is None and group in reasons else ""
        print(f"{name}\t{shown}{why}")
    print(f"report: {Path(records[0].namespace) / MCD.report_file}", file=sys.stderr)
    write_json(args.json, {"folder": str(layout.root), "generations": layout.generations, "metrics": values,
                           "sdr_failures": reasons})
    return EXIT_OK


def _mgg_records(layout, chains, metadata: str) -> list:
    """The MGG scorer's records of the layout's text-first chains, each judged against the
    GenEval entry its file names (``<line>.png``: the entry's place in ``metadata``)."""
    from ..analysis.sdp_layout import LayoutError
    from ..data.sdp import load_geneval_docs
    from ..metrics.scorers.mgg import MGG

    try:
        docs = load_geneval_docs(metadata, warn_if_not_geneval=False)
    except (OSError, ValueError) as exc:
        raise LayoutError(f"{metadata}: {exc}") from None
    out = []
    for chain in chains:
        if chain.direction != "text_first":
            continue
        stem = chain.chain_id.split("#")[0]
        if not stem.isdigit() or int(stem) >= len(docs):
            raise LayoutError(f"{layout.root}/text-first: {stem}.png names no entry of {metadata} ({len(docs)} entries)")
        out.append(MGG.record(docs[int(stem)], chain.to_json()))
    if not out:
        raise LayoutError(f"{layout.root}: no text-first chains to judge with --geneval")
    return out


def _number(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value if value is None or isinstance(value, int) else json.loads(json.dumps(value))


def add_actions(actions: argparse._SubParsersAction, command) -> None:
    export = command(actions, run_export, "export", help="write a run's chains in the Semantic Drift authors' folder layout")
    export.add_argument("source", metavar="RESULTS_OR_STORE", help="results file or folder (--log_samples), or a store folder")
    export.add_argument("out", metavar="DIR", help="new folder to write the layout into")
    export.add_argument("--task", default=None, help="the task to export when the results hold several")
    score = command(actions, run_score, "score", help="score chains in the Semantic Drift authors' folder layout (MCD, SDR)")
    score.add_argument("folder", metavar="DIR", help="a folder with text-first/ and/or image-first/")
    score.add_argument("--preset", default="paper", choices=("paper", "smoke"),
                       help="the MCD scorer's encoders: paper (MPNet, CLIP ViT-B/32, DINO) or smoke (tiny, offline)")
    score.add_argument("--artifacts", default=None, metavar="STORE",
                       help="store the chains are copied into (default: $LMMS_GENBENCH_ARTIFACTS or ~/.cache/lmms_genbench/artifacts)")
    score.add_argument("--geneval", default=None, metavar="METADATA",
                       help="GenEval's evaluation_metadata.jsonl: also MGG of the text-first images, named <line>.png")
    score.add_argument("--resamples", type=int, default=None, metavar="N",
                       help="bootstrap resamples of the intervals (default 1000; 0: none; SDR refits each)")
    score.add_argument("--json", metavar="FILE", default=None, help="also write the scores as JSON")
