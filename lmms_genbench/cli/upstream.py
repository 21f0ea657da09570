"""``lmms-genbench upstream export TREE``: write the pull request that contributes our tasks to
lmms-eval into an lmms-eval tree (:mod:`lmms_genbench.upstream`; docs/plugin.md)."""

from __future__ import annotations

import argparse

from .common import EXIT_OK, command, group


def _run_upstream_export(args: argparse.Namespace) -> int:
    """Write into TREE (an lmms-eval checkout, or the folder holding an installed lmms_eval
    package) the pull request that contributes the mmeception, sdp, chef and autobench tasks:
    thin task folders that import lmms-genbench through lmms-eval's optional-import helper, the
    cycle, t2i and chef model types registered as shims, tests under test/, the genbench extra
    in pyproject.toml and a changelog entry, formatted for lmms-eval's black and isort settings.
    Prints every file with the lines it writes (new, edited, replaced or unchanged); running
    it again adds nothing twice."""
    from lmms_genbench.upstream import export

    changes = export(args.tree)
    for change in changes:
        print(f"{change.lines:6d}  {change.state:9s}  {change.path}")
    print(f"{len([c for c in changes if c.lines])} files, {sum(c.lines for c in changes)} lines written")
    return EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    actions = group(subparsers, "upstream", help="contribute the tasks to lmms-eval")
    export = command(actions, _run_upstream_export, "export", help="write the pull request into an lmms-eval tree")
    export.add_argument("tree", metavar="TREE", help="an lmms-eval checkout, or the folder holding an installed lmms_eval")
