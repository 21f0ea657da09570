"""The tests' own layout: CONTRIBUTING's tests map names exactly the folders there are, each
folder of tests/unit mirrors a folder of the package, support holds no test, and the markers
mean one thing each (the ones pyproject registers, CONTRIBUTING lists and conftest sets)."""

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PACKAGE = ROOT / "lmms_genbench"
# marks pytest itself gives meaning to
BUILTIN_MARKS = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings"}


def _tests_map():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    return text.split("### Tests map", 1)[1].split("```")[1]


def _folders(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_dir() and p.name != "__pycache__" and "__pycache__" not in p.parts}


def _test_files():
    return sorted(TESTS.rglob("test_*.py"))


def test_the_map_names_the_folders_of_tests():
    block = _tests_map()
    named = set(re.findall(r"^  ([a-z_0-9]+)/", block, re.M))
    present = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert named == present, f"in the tree only: {sorted(present - named)}; in the map only: {sorted(named - present)}"


def test_the_unit_folders_are_the_maps_and_mirror_the_package():
    block = _tests_map()
    listed = {tok.rstrip("/") for line in block.splitlines() if re.fullmatch(r"    (?:[a-z_0-9/]+/ ?)+", line)
              for tok in line.split()}
    present = _folders(TESTS / "unit")
    assert listed == present, f"in the tree only: {sorted(present - listed)}; in the map only: {sorted(listed - present)}"
    no_twin = sorted(f for f in present if not (PACKAGE / f / "__init__.py").exists())
    assert no_twin == [], f"tests/unit folders with no lmms_genbench/ package of that path: {no_twin}"


def test_every_test_folder_is_a_package_and_tests_live_in_the_three_sets():
    folders = [TESTS] + [TESTS / f for f in _folders(TESTS) if not f.startswith("support/data")]
    assert [f for f in folders if not (f / "__init__.py").exists()] == []
    misplaced = [p.relative_to(TESTS).as_posix() for p in _test_files()
                 if p.relative_to(TESTS).parts[0] not in {"unit", "smoke", "e2e"}]
    assert misplaced == [], "test modules live in tests/unit, tests/smoke or tests/e2e; helpers in tests/support"


def test_each_marker_is_registered_listed_and_means_one_thing():
    import tests.conftest as conftest

    registered = {line.split(":")[0] for line in
                  tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]}
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^- `([a-z_0-9]+)`: ", text.split("### Tests map", 1)[1].split("\n## ", 1)[0], re.M))
    assert registered == listed == {"smoke", "e2e", "distributed"}
    assert conftest.FOLDER_MARKS == {"smoke": "smoke", "e2e": "e2e"}  # set by folder, never by hand
    used = {}
    for path in _test_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "mark" and node.attr not in BUILTIN_MARKS):
                used.setdefault(node.attr, set()).add(path.relative_to(TESTS).as_posix())
    assert set(used) <= registered - set(conftest.FOLDER_MARKS.values()), used


def test_only_the_smoke_folder_asks_for_the_shared_smoke_run():
    askers = set()
    for path in _test_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and "smoke_run" in {a.arg for a in node.args.args}:
                askers.add(path.relative_to(TESTS).parts[0])
    assert askers <= {"smoke"}, askers


@pytest.mark.parametrize("folder, marked, gated", [("smoke", "smoke", False), ("e2e", "e2e", True), ("unit", None, False)])
def test_the_folder_marks_and_gates_its_tests(folder, marked, gated):
    """What conftest does to an item of each folder (the gate is the folder, nothing else)."""
    import tests.conftest as conftest

    class Item:
        path = TESTS / folder / "test_x.py"

        def __init__(self):
            self.marks = []

        def add_marker(self, mark):
            self.marks.append(mark if isinstance(mark, str) else mark.name)

    class Config:
        def __init__(self, e2e):
            self.e2e = e2e

        def getoption(self, name):
            return self.e2e

    for e2e in (False, True):
        item = Item()
        conftest.pytest_collection_modifyitems(Config(e2e), [item])
        assert (marked in item.marks) if marked else item.marks == []
        assert ("skip" in item.marks) == (gated and not e2e)
