"""``lmms-genbench store {verify,show,merge}``: check (and repair) an artifact store; show what
made each of its namespaces; merge the stores of independent jobs.

A new ``store`` action adds its ``actions.add_parser(...)`` in :func:`add_parser` and its
handler here (or in its own module of this package, imported by the handler)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, command, group


def _run_store_verify(args: argparse.Namespace) -> int:
    """Verify every chain under FOLDER against its hops.jsonl records (each hop's sha256 and its
    input's). Exit 0 when every hop is sound, 1 when some are not. In a store that keeps records
    (store.json in the namespace) a hop without one is refused as unverified. Torn or unreadable
    lines of hops.jsonl are reported. --repair moves refused hops, and every later hop of their
    chain, to quarantine/<time>/ in the chain's folder, so the next run recomputes them, rewrites
    hops.jsonl without its unreadable lines; hops written before records existed are checked by
    decoding and recorded. The scorers' stored features (.features/) are checked whole too,
    each header against what scoring reads (dtype, shape, row length); --repair removes the bad ones (the next scoring run recomputes them)."""
    from lmms_genbench.store import STORE_FORMAT, lost_markers, verify_features, verify_store

    root = Path(args.folder).expanduser()
    if not root.is_dir():
        print(f"lmms-genbench store verify: error: {root} is not a folder. Fix: give the artifact store's "
              "folder (model_args artifacts=, or $LMMS_GENBENCH_ARTIFACTS)", file=sys.stderr)
        return EXIT_USAGE
    chains = bad = busy = hops = 0
    for namespace in lost_markers(root):
        done = "; written again once its chains are sound" if args.repair else ""
        print(f"{namespace}: its {STORE_FORMAT} marker was lost while its chains kept records: hops without a "
              f"record are refused as unverified{done}")
    for folder, check in verify_store(root, repair=args.repair):
        chains += 1
        if check is None:
            busy += 1
            print(f"{folder}: held by a running run, not checked")
            continue
        hops += check.valid
        if check.unreadable:
            done = "; rewritten without them" if args.repair else ""
            print(f"{folder}: {check.unreadable} unreadable line(s) in hops.jsonl (a torn write?){done}")
        if check.problem or check.unreadable:
            bad += 1
        if check.problem:
            moved = f"; moved aside to {check.quarantine}" if check.quarantine else ""
            print(f"{folder}: {check.problem}{moved}")
    verdict = "repaired" if args.repair else "refused"
    print(f"{chains} chains, {hops} hops verified, {bad} chains with {verdict} hops, {busy} held by a running run")
    features = verify_features(root, repair=args.repair)
    for path, why in features["bad"]:
        print(f"{path}: {why}{'; removed' if args.repair else ''}")
    for folder in features["outdated"]:
        print(f"{folder}: features of an older file format, never read (safe to delete)")
    if features["files"] or features["outdated"]:
        done = f", {features['removed']} removed (recomputed by the next scoring run)" if args.repair else ""
        print(f"{features['files']} feature files checked, {len(features['bad'])} bad{done}")
    return EXIT_OK if args.repair or not (bad or features["bad"]) else EXIT_FAIL


def _run_store_merge(args: argparse.Namespace) -> int:
    """Merge the artifact stores STORE ... into the new folder NEW_STORE. Only verified hops are
    merged (refused ones are listed and left out); a hop stored in several stores must have the
    same sha256, or the merge names each conflicting chain, hop and both hashes, writes nothing
    and exits 1. Run it when no job writes to the stores; then score with one run over NEW_STORE
    (it computes nothing)."""
    from lmms_genbench.store import MergeConflict, merge_stores

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
    for path in report.files_left_out:
        print(f"left out (not the store's own file): {path}")
    print(f"{report.chains} chains, {report.hops} hops merged into {args.out} ({report.hops_shared} hops found "
          f"in several stores, same hash), {report.files} other files, {report.runs_lines} runs.jsonl lines; "
          f"{report.reports_left_out} scorer reports left out (a scoring run writes them), "
          f"{len(report.files_left_out)} files left out in all")
    return EXIT_OK


def _run_store_show(args: argparse.Namespace) -> int:
    """Print what made each namespace under FOLDER (the identity.json beside its hashed folder
    name: model, ids and revisions or folder, weight digests, dtype, every setting in the key),
    each checked against its folder's name. Exit 1 when one does not hash to its name, or none
    is found."""
    import json

    from lmms_genbench.core.errors import ActionableError
    from lmms_genbench.store.identity import check_identity, identity_folders

    root = Path(args.folder).expanduser()
    if not root.is_dir():
        print(f"lmms-genbench store show: error: {root} is not a folder. Fix: give the artifact store's folder "
              "or one of its namespaces", file=sys.stderr)
        return EXIT_USAGE
    shown = refused = 0
    for folder in identity_folders(root):
        try:
            record = check_identity(folder)
        except ActionableError as exc:
            refused += 1
            print(f"{folder}: refused: {exc.cause}")
            continue
        shown += 1
        print(f"{folder}:")
        print("  " + json.dumps(record, indent=2, sort_keys=True, default=str).replace("\n", "\n  "))
    if not shown and not refused:
        print(f"lmms-genbench store show: error: no identity.json under {root} (a store written before identities "
              "were recorded). Fix: rerun the same command over the store: it writes them, computing nothing",
              file=sys.stderr)
        return EXIT_FAIL
    print(f"{shown} namespaces shown, {refused} refused")
    return EXIT_FAIL if refused else EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    actions = group(subparsers, "store", help="check and merge artifact stores")
    verify = command(actions, _run_store_verify, "verify",
                     help="report hops that are missing, truncated, undecodable, edited or drawn from another input")
    verify.add_argument("folder", metavar="FOLDER", help="the artifact store, or any folder inside it")
    verify.add_argument("--repair", action="store_true", help="quarantine refused hops (the next run recomputes them)")
    show = command(actions, _run_store_show, "show",
                   help="print what made each namespace (its identity.json), checked against the folder's name")
    show.add_argument("folder", metavar="FOLDER", help="the artifact store, or any folder inside it")
    merge = command(actions, _run_store_merge, "merge",
                    help="merge stores of independent jobs (shard=i/n, per-node stores) by content hash")
    merge.add_argument("stores", nargs="+", metavar="STORE", help="artifact store folders (model_args artifacts=)")
    merge.add_argument("-o", "--out", required=True, metavar="NEW_STORE", help="a new or empty folder")
