"""``lmms-genbench check``: the preflight of an lmms-eval command, without running it."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from .common import EXIT_FAIL, EXIT_OK, command


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command(subparsers, run, "check")
    parser.add_argument("--model", required=True, help="the lmms-eval model type (cycle, t2i, chef, ...)")
    parser.add_argument("--model_args", default="", help="the same --model_args string as the run's")
    parser.add_argument("--tasks", default="", help="the run's --tasks (comma-separated)")
    parser.add_argument("--output_path", default=None, help="the run's --output_path (checked writable)")
    parser.add_argument("--include_path", default=None, help="the run's --include_path (more task folders)")
    parser.add_argument("--limit", type=float, default=None,
                        help="the run's --limit: 0 (no doc: lmms-eval 0.7.3 stops) and negatives other than -1 "
                             "are refused, fractions explained")
    parser.add_argument("--num_processes", type=int, default=1,
                        help="processes the run is launched with (accelerate launch --num_processes): GPUs needed")
    parser.set_defaults(extra=[])


def run(args: argparse.Namespace) -> int:
    """Check, in seconds and without loading any weights, what the lmms-eval command with the
    same arguments needs: model ids at their revision (or local folders) and the files each
    role reads, the Hub itself (HF_ENDPOINT, HF_HUB_OFFLINE), the tasks' datasets and configs
    for your token (gated: 401 without a token, 403 before the terms are accepted), CUDA where it
    is asked for, API keys, the artifact store and --output_path writable, and every
    describer.*/generator.*/unified.* setting against its class. Every problem is listed at
    once; exit 1 when there is any. A --limit lmms-eval does not read as it looks is refused (0
    runs no doc; a negative other than -1 fails) or explained (a fraction); other lmms-eval
    arguments (--log_samples, ...) are accepted and ignored. Every --model cycle, t2i and chef run does the same check at its
    start (LMMS_GENBENCH_PREFLIGHT=0 turns that off)."""
    from lmms_eval.utils import simple_parse_args_string

    from ..command import read_command
    from ..preflight import check_run, format_problems
    from ..preflight.tasks import unknown_tasks

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    # lmms-eval's own reading of --model_args (what the run's model is given), then ours, once
    command = read_command(args.model, simple_parse_args_string(args.model_args) if args.model_args else {}, tasks,
                           args.output_path, max(1, args.num_processes))
    command = dataclasses.replace(command, limit=args.limit)
    if args.include_path:
        command = dataclasses.replace(command, include_path=tuple(args.include_path.split(",")))
    problems = check_run(command)
    prog = "lmms-genbench check"
    if len(problems) == 1:
        print(f"{prog}: error: {problems[0].line()}", file=sys.stderr)
        return EXIT_FAIL
    if problems:
        print(f"{prog}: {len(problems)} problems; the run would stop on them:", file=sys.stderr)
        for line in format_problems(problems):
            print(line, file=sys.stderr)
        print(f"{prog}: error: {len(problems)} problems found, listed above", file=sys.stderr)
        return EXIT_FAIL
    others = unknown_tasks(tasks)
    note = f" (tasks not checked, lmms-eval's own: {', '.join(others)})" if others else ""
    print(f"{prog}: ok: nothing missing for --model {args.model} --tasks {args.tasks or '(none)'}{note}",
          file=sys.stderr)
    return EXIT_OK
