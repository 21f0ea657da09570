"""``lmms-genbench sdp {resample,fetch-geneval,export,score}``: data for the semantic drift tasks, and
chains in the authors' folder layout (:mod:`.sdp_layout`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.errors import ActionableError, describe
from .common import EXIT_OK, command, group


def _run_sdp_resample(args: argparse.Namespace) -> int:
    """Draw --per-source DOCCI (google/docci, config docci, test: example_id) and NoCaps
    (HuggingFaceM4/NoCaps, validation: image_file_name, as nd400 names them) ids without
    replacement from sorted ids with numpy's default_rng(seed), and write them as JSON lines
    {source, image_id}. sdp_nocaps uses the file when LMMS_GENBENCH_ND400_PAIRS points at it."""
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
    """Download prompts/evaluation_metadata.jsonl of djghosh13/geneval, check its 553 entries
    and tag counts, and write it where sdp_geneval looks by default ($LMMS_GENBENCH_CACHE or
    ~/.cache/lmms_genbench, then geneval/)."""
    import httpx

    from lmms_genbench.data.sdp import (
        GENEVAL_URL,
        default_geneval_path,
        fetch_geneval_metadata,
    )

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


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    actions = group(subparsers, "sdp", help="data for the semantic drift tasks (sdp_nocaps, sdp_geneval)")
    resample = command(actions, _run_sdp_resample, "resample",
                       help="draw another Nocaps+Docci400-style pair list from DOCCI and NoCaps with a seed")
    resample.add_argument("--seed", type=int, required=True, help="random seed (integer)")
    resample.add_argument("--per-source", type=int, default=200, help="pairs drawn from each source (default 200)")
    resample.add_argument("--out", required=True, metavar="FILE", help="output .jsonl")
    fetch = command(actions, _run_sdp_fetch_geneval, "fetch-geneval",
                    help="download GenEval's evaluation_metadata.jsonl (MIT) for sdp_geneval")
    fetch.add_argument("--out", default=None, metavar="FILE", help="target file (default: sdp_geneval's default path)")
    from .sdp_layout import add_actions

    add_actions(actions, command)
