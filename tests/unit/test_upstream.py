"""``lmms-genbench upstream export`` into a minimal lmms-eval tree, and lmms-eval's lint
(black 25.1.0 at 240, isort 6.0.1 with the black profile: their .pre-commit-config.yaml) over
what it writes and over our own task folders. The export applied to lmms-eval's real source and
run there: tests/e2e/test_upstream_e2e.py."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lmms_genbench.cli import main
from lmms_genbench.upstream import FOLDERS, MODEL_SHIM

from tests.support.host_lint import host_lint

TASKS = Path(__file__).resolve().parents[2] / "lmms_genbench" / "tasks"
REGISTRY = 'AVAILABLE_SIMPLE_MODELS = {\n    "aero": "Aero",\n}\n\nAVAILABLE_CHAT_TEMPLATE_MODELS = {}\n'
PYPROJECT = '[project]\nname = "lmms_eval"\n\n[project.optional-dependencies]\nqwen = [\n    "qwen_vl_utils",\n]\n'


def minimal_tree(root):
    (root / "lmms_eval" / "models").mkdir(parents=True)
    (root / "lmms_eval" / "__init__.py").write_text("")
    (root / "lmms_eval" / "models" / "__init__.py").write_text(REGISTRY)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "docs" / "releases").mkdir(parents=True)
    (root / "docs" / "releases" / "CHANGELOG.md").write_text("# Changelog\n\n## v0.7 (2026-02-27)\n")
    return root


def test_our_task_folders_pass_the_host_lint():
    assert host_lint(sorted(TASKS.rglob("*.py")), TASKS.parent.parent) == []


def _report(out):
    rows = [(int(n), state, path) for n, state, path in re.findall(r"^\s*(\d+)  (new|edited|replaced|unchanged)\s+(\S+)$", out, re.M)]
    files, lines = map(int, re.search(r"^(\d+) files, (\d+) lines written$", out, re.M).groups())
    assert files == sum(1 for n, _, _ in rows if n) and lines == sum(n for n, _, _ in rows)
    return rows, lines


def test_export_writes_the_pull_request_once(tmp_path, capsys):
    tree = minimal_tree(tmp_path)
    assert main(["upstream", "export", str(tree)]) == 0
    rows, lines = _report(capsys.readouterr().out)
    for n, state, path in rows:  # every file it wrote is listed, with the lines it added
        assert n == len((tree / path).read_text().splitlines()) if state == "new" else state == "edited", path
    listed = {tree / path for _, _, path in rows}
    assert sorted(p for p in tree.rglob("*") if p.is_file() and p not in listed) == [tree / "lmms_eval" / "__init__.py"]
    assert [(n, p) for n, s, p in rows if s == "edited"] == [(4, "lmms_eval/models/__init__.py"), (3, "pyproject.toml"), (4, "docs/releases/CHANGELOG.md")]
    registry = (tree / "lmms_eval" / "models" / "__init__.py").read_text()
    assert '    "cycle": "lmms_eval.models.genbench.CycleModel",' in registry.split("AVAILABLE_CHAT_TEMPLATE_MODELS")[0]
    assert 'genbench = [\n    "lmms-genbench",\n]' in (tree / "pyproject.toml").read_text()
    assert "lmms-genbench" in (tree / "docs" / "releases" / "CHANGELOG.md").read_text().split("## v0.7")[0]
    assert (tree / MODEL_SHIM).is_file() and (tree / "test" / "eval" / "test_genbench_tasks.py").is_file()
    for folder in FOLDERS:
        readme = (tree / "lmms_eval" / "tasks" / folder / "README.md").read_text()
        assert 'pip install "lmms_eval[genbench]"' in readme and "not on PyPI yet" not in readme and "../../../docs" not in readme
    before = {path: (tree / path).read_text() for _, _, path in rows}
    assert main(["upstream", "export", str(tree)]) == 0  # again: nothing added twice
    again, added = _report(capsys.readouterr().out)
    assert added == 0 and {p for _, _, p in again} == set(before)
    assert {path: (tree / path).read_text() for path in before} == before
    assert host_lint([tree / p for p in before if p.endswith(".py") and p != "lmms_eval/models/__init__.py"], tree) == []


def test_each_task_utils_names_every_yaml_function_ours_defines(tmp_path):
    tree = minimal_tree(tmp_path)
    main(["upstream", "export", str(tree)])
    for folder in FOLDERS:
        named = {n for y in (TASKS / folder).glob("*.yaml") for n in re.findall(r"!function utils\.(\w+)", y.read_text())}
        ours = {n.name for n in ast.parse((TASKS / folder / "utils.py").read_text()).body if isinstance(n, ast.FunctionDef)}
        shim = ast.parse((tree / "lmms_eval" / "tasks" / folder / "utils.py").read_text())
        imported = {a.name for n in shim.body if isinstance(n, ast.ImportFrom) and n.module == f"lmms_genbench.tasks.{folder}.utils" for a in n.names}
        assert named and imported == named and named <= ours, folder


def test_without_lmms_genbench_the_error_names_the_extra(tmp_path):
    tree = minimal_tree(tmp_path)
    main(["upstream", "export", str(tree)])
    code = "import runpy, sys\nsys.modules['lmms_genbench'] = None\ntry:\n    runpy.run_path(sys.argv[1])\nexcept ImportError as exc:\n    print(exc)\n"
    for path in (tree / "lmms_eval" / "tasks" / "sdp" / "utils.py", tree / MODEL_SHIM):
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True).stdout
        assert "is required for the" in out and "Install with: pip install lmms_eval[genbench]" in out, out


def test_a_folder_without_lmms_eval_is_one_line_and_exit_1(tmp_path, capsys):
    assert main(["upstream", "export", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "holds no lmms-eval source" in err and "Fix:" in err and len(err.strip().splitlines()) == 1
