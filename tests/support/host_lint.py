"""lmms-eval's lint (black 25.1.0 at 240, isort 6.0.1 with the black profile: their
.pre-commit-config.yaml), run as a test support helper by tests/unit/test_upstream.py and tests/e2e/test_upstream_e2e.py."""

import importlib.util
import subprocess
import sys

import pytest


def host_lint(paths, root):
    """lmms-eval's black and isort checks over ``paths``, run in ``root`` as their pre-commit
    runs in their checkout (isort tells first-party imports by it): the problems, or []."""
    for tool in ("black", "isort"):
        if importlib.util.find_spec(tool) is None:
            pytest.skip(f"{tool} is not installed (the dev extra pins black==25.1.0, isort==6.0.1)")
    checks = ([sys.executable, "-m", "black", "--check", "--line-length=240"], [sys.executable, "-m", "isort", "--check-only", "--profile", "black"])
    problems = []
    for check in checks:
        proc = subprocess.run([*check, *map(str, paths)], cwd=root, capture_output=True, text=True, check=False)
        if proc.returncode:
            problems.append(proc.stdout + proc.stderr)
    return problems
