"""What every ``lmms-genbench`` command shares: the exit codes, the parsers of a command and
of a group of actions, the arguments several commands declare (``RESULTS``, ``--label``,
``--json``), finding results files under a folder, and checking ``--label``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ..analysis.results import RESULTS_SUFFIX, ResultsError, read_results

#: the one exit-code table of every command
EXIT_OK = 0  # done
EXIT_FAIL = 1  # the command ran and failed (network, data, runs that differ): one line on stderr
EXIT_USAGE = 2  # argparse's own code for bad usage; also used for unreadable inputs
RESULTS_GLOB = f"*{RESULTS_SUFFIX}"  # lmms-eval's <date>_results.json


def results_files(prog: str, paths: Sequence[str], usable: Callable[[Path], bool]) -> list[str] | None:
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


def task_names(path: Path) -> list[str]:
    """The task names of a results file; none when it cannot be read."""
    try:
        return [str(t) for t in read_results(path)["results"]]
    except ResultsError:
        return []


def take_results(prog: str, args: argparse.Namespace, usable: Callable[[Path], bool]) -> bool:
    """Replace ``args.results`` by :func:`results_files` and check ``--label`` against them;
    False, after printing why, when the command must stop with :data:`EXIT_USAGE`."""
    args.results = results_files(prog, args.results, usable)
    return args.results is not None and labels_ok(prog, args)


def labels_ok(prog: str, args: argparse.Namespace) -> bool:
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


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def write_json(path: str | None, payload) -> None:
    """Write ``payload`` to ``path`` (atomically) when a ``--json FILE`` was given."""
    if path:
        from ..core.keys import atomic_write

        blob = json.dumps(payload, indent=2, allow_nan=False).encode("utf-8")
        atomic_write(Path(path), lambda fh: fh.write(blob))
        print(f"written {path}", file=sys.stderr)


def load_runs(prog: str, paths: list[str]):
    from ..analysis.runs import RunError, load_run

    runs = []
    for path in paths:
        try:
            runs.append(load_run(path))
        except RunError as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return None
    return runs


def command(subparsers: argparse._SubParsersAction, run: Callable[[argparse.Namespace], int], name: str,
            **kwargs) -> argparse.ArgumentParser:
    """The parser of command (or action) ``name``, whose handler is ``run``; the handler's
    docstring is the ``--help`` description."""
    parser = subparsers.add_parser(name, description=run.__doc__, **kwargs)
    parser.set_defaults(func=run)
    return parser


def group(subparsers: argparse._SubParsersAction, name: str, *, dest: str = "action", metavar: str = "ACTION",
          **kwargs) -> argparse._SubParsersAction:
    """The subparsers of command ``name``, whose actions are subcommands (one is required)."""
    parser = subparsers.add_parser(name, **kwargs)
    return parser.add_subparsers(dest=dest, metavar=metavar, required=True)


def add_results(parser: argparse.ArgumentParser, help: str) -> None:
    """The positional ``RESULTS ...``: results files or folders (see :func:`results_files`)."""
    parser.add_argument("results", nargs="+", metavar="RESULTS", help=help)


def add_label(parser: argparse.ArgumentParser, help: str) -> None:
    """``--label NAME ...``: one label per results file (see :func:`labels_ok`)."""
    parser.add_argument("--label", metavar="NAME", nargs="+", default=None, help=help)


def add_json(parser: argparse.ArgumentParser, what: str) -> None:
    """``--json FILE``: also write ``what`` there (see :func:`write_json`)."""
    parser.add_argument("--json", metavar="FILE", default=None, help=f"also write the {what} as JSON")


def say(prog: str, errors: Sequence[str] = (), notes: Sequence[str] = ()) -> None:
    """One stderr line per error (``prog: error: ...``) and per note (``prog: ...``)."""
    for error in errors:
        print(f"{prog}: error: {error}", file=sys.stderr)
    for note in notes:
        print(f"{prog}: {note}", file=sys.stderr)
