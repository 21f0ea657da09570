"""``lmms-eval`` (or pytest) from an lmms-eval tree the upstream export wrote into, with this
package's hooks off: ``python -m tests.support.upstream_run TREE lmms-eval|pytest ARGS...``.

The tree goes first on ``sys.path``; our ``lmms_eval.models`` entry point and the wheel's start-up
watcher are hidden before lmms-eval is imported (as if this package only were a library), so lmms-eval finds the model
types and tasks only through what the export wrote. Exits 3 when lmms-eval came from elsewhere
or when :func:`lmms_genbench.hooks.changed` finds any of our hooks in place after the run.
"""

import sys
from pathlib import Path


def main():
    tree, tool, *args = sys.argv[1:]
    sys.path.insert(0, str(Path(tree).resolve()))
    from lmms_genbench.hooks import changed

    from tests.support.builtin_tasks_run import _hide_our_entry_point, _hide_our_startup_line

    _hide_our_entry_point()
    _hide_our_startup_line()  # a wheel install's lmms_genbench.pth watcher, as if only a library
    import lmms_eval

    if not lmms_eval.__file__.startswith(str(Path(tree).resolve())):
        print(f"upstream_run: lmms_eval came from {lmms_eval.__file__}, not {tree}", file=sys.stderr)
        sys.exit(3)
    code = 0
    try:
        if tool == "pytest":
            import pytest

            code = pytest.main(args)
        else:
            from lmms_eval.cli.dispatch import main as lmms_eval_main

            sys.argv = ["lmms-eval", *args]
            code = lmms_eval_main() or 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    in_place = changed()
    print(f"upstream_run: hooks in place after the run: {sorted(in_place)}")
    sys.exit(3 if in_place else int(code))


if __name__ == "__main__":
    main()
