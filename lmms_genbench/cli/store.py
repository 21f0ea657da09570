"""``lmms-genbench store verify``: check (and repair) the artifact store.

A new ``store`` action adds its ``actions.add_parser(...)`` in :func:`add_parser` and its
handler here (or in its own module of this package, imported by the handler)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, command


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


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("store", help="check the artifact store")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    verify = command(
        actions, _run_store_verify, "verify",
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
