"""The pull request that contributes our tasks to lmms-eval, written into an lmms-eval tree.

The shape (docs/plugin.md, "Contributing the tasks upstream"): thin task folders whose
``utils.py`` imports this package through lmms-eval's optional-import helper
(``lmms_eval.imports.require_package``), one model shim module registered in the table every
built-in model uses, ``lmms-genbench`` as the ``genbench`` extra, tests in lmms-eval's
``test/`` layout and a changelog entry. The engine (chains, scorers, networks) stays here.

Every Python file is written already formatted as lmms-eval's lint wants it (black 25.1.0 at
line length 240, isort 6.0.1 with the black profile); tests/e2e/test_upstream_e2e.py checks it.
Nothing here imports lmms-eval: the export only reads our task folders and edits text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .core.errors import ActionableError

__all__ = ["EXTRA", "FOLDERS", "MODEL_SHIM", "Change", "export", "lmms_eval_root"]

#: our task folders, each exported as ``lmms_eval/tasks/<name>/``
FOLDERS = ("mmeception", "sdp", "chef", "autobench")
#: lmms-eval's extra that installs this package
EXTRA = "genbench"
MODEL_SHIM = "lmms_eval/models/genbench.py"
TESTS = "test/eval/test_genbench_tasks.py"
_TASKS = Path(__file__).resolve().parent / "tasks"
_MODELS = {"cycle": "CycleModel", "t2i": "TextToImageModel", "chef": "ChefModel"}
_MODULES = {"cycle": "cycle", "t2i": "t2i", "chef": "chef"}
_FEATURES = {"mmeception": "the MMECeption tasks", "sdp": "the Semantic Drift tasks", "chef": "the ChEF tasks", "autobench": "the AutoBench-V tasks"}
_INSTALL = f'pip install "lmms_eval[{EXTRA}]"'


@dataclass(frozen=True)
class Change:
    """One file of the pull request: its path under the tree, the lines the export wrote to it,
    and its state: "new", "edited" (lines inserted into lmms-eval's file), "replaced" (a file the
    export writes whole, changed since the last export) or "unchanged" (0 lines)."""

    path: str
    lines: int
    state: str


def lmms_eval_root(path: str | Path) -> Path:
    """The folder holding ``lmms_eval/``: a checkout, an installed package's parent, or the package."""
    given = Path(path).expanduser().resolve()
    for root in (given, given.parent):
        if (root / "lmms_eval" / "__init__.py").is_file() and (root / "lmms_eval" / "models" / "__init__.py").is_file():
            return root
    raise ActionableError(f"{given} holds no lmms-eval source (no lmms_eval/models/__init__.py)", "give an lmms-eval checkout, or the folder that holds an installed lmms_eval package")


def export(target: str | Path) -> list[Change]:
    """Write the pull request into the lmms-eval tree at ``target``; returns what it wrote.

    Running it again on the same tree rewrites the same files and adds nothing twice.
    """
    root = lmms_eval_root(target)
    changes = []
    for folder in FOLDERS:
        changes += _task_folder(root, folder)
    changes.append(_write(root, MODEL_SHIM, _model_shim()))
    changes.append(_write(root, TESTS, _tests()))
    changes += [c for c in (_register_models(root), _extra(root), _changelog(root)) if c]
    return changes


def _write(root: Path, relative: str, text: str) -> Change:
    path = root / relative
    if path.is_file() and path.read_text() == text:
        return Change(relative, 0, "unchanged")
    state = "replaced" if path.exists() else "new"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return Change(relative, len(text.splitlines()), state)


def _insert(root: Path, relative: str, lines: list[str], after: re.Pattern, present: str) -> Change | None:
    """Insert ``lines`` after the first line matching ``after``, unless ``present`` is already there."""
    path = root / relative
    if not path.is_file():
        return None
    text = path.read_text().splitlines(keepends=True)
    if any(present in line for line in text):
        return Change(relative, 0, "unchanged")
    at = next((i for i, line in enumerate(text) if after.search(line)), None)
    if at is None:
        raise ActionableError(f"{path} has no line matching {after.pattern!r}", "add the lines by hand (docs/plugin.md lists them)")
    text[at + 1 : at + 1] = [line + "\n" for line in lines]
    path.write_text("".join(text))
    return Change(relative, len(lines), "edited")


def _functions(folder: Path) -> list[str]:
    """The ``utils`` functions the folder's YAML files name."""
    found = set()
    for yaml in folder.glob("*.yaml"):
        found |= set(re.findall(r"!function utils\.(\w+)", yaml.read_text()))
    return sorted(found, key=lambda name: (name.lower(), name))


def _task_folder(root: Path, name: str) -> list[Change]:
    source, out = _TASKS / name, f"lmms_eval/tasks/{name}"
    changes = []
    for path in sorted(source.iterdir()):
        if path.suffix in (".yaml", ".jsonl"):
            changes.append(_write(root, f"{out}/{path.name}", path.read_text()))
    changes.append(_write(root, f"{out}/utils.py", _utils(name, _functions(source))))
    changes.append(_write(root, f"{out}/README.md", _readme((source / "README.md").read_text(), name)))
    return changes


def _utils(name: str, functions: list[str]) -> str:
    imports = "".join(f"    {f},\n" for f in functions)
    return (
        f'"""{_FEATURES[name][4:]}: the functions their YAML files name.\n\n'
        f"They live in lmms-genbench, the optional dependency that provides the engine behind these\n"
        f"tasks (chains, scorers, networks): {_INSTALL}.\n"
        f'"""\n\n'
        f"from lmms_eval.imports import require_package\n\n"
        f'require_package("lmms_genbench", extras="{EXTRA}", feature="{_FEATURES[name]}")\n\n'
        f"from lmms_genbench.tasks.{name}.utils import (  # noqa: E402\n{imports})\n"
    )


def _model_shim() -> str:
    lazy = "".join(f'        "{cls}": ("lmms_genbench.models.{_MODULES[m]}", "{cls}"),\n' for m, cls in _MODELS.items())
    return (
        '"""The cycle, t2i and chef model types, provided by lmms-genbench (an optional dependency).\n\n'
        "They drive other lmms-eval models (a describer and a text-to-image generator, or the model under\n"
        "test and a judge) through doc_to_visual/doc_to_text requests, so they are registered as simple\n"
        "models; each class is imported when its model type is used.\n"
        f"Install: {_INSTALL}.\n"
        '"""\n\n'
        "from lmms_eval.imports import make_lazy_getattr, require_package\n\n"
        f'require_package("lmms_genbench", extras="{EXTRA}", feature="the cycle, t2i and chef model types")\n\n'
        f"__getattr__ = make_lazy_getattr(\n    {{\n{lazy}    }}\n)\n"
    )


def _register_models(root: Path) -> Change | None:
    lines = [f"    # lmms-genbench's model types (an optional dependency: {_INSTALL})"]
    lines += [f'    "{m}": "lmms_eval.models.genbench.{cls}",' for m, cls in _MODELS.items()]
    return _insert(root, "lmms_eval/models/__init__.py", lines, re.compile(r"^AVAILABLE_SIMPLE_MODELS\s*=\s*\{"), "lmms_eval.models.genbench.")


def _extra(root: Path) -> Change | None:
    lines = [f"{EXTRA} = [", '    "lmms-genbench",', "]"]
    return _insert(root, "pyproject.toml", lines, re.compile(r"^\[project\.optional-dependencies\]"), '"lmms-genbench"')


def _changelog(root: Path) -> Change | None:
    lines = [
        "",
        "## Unreleased",
        "",
        "- **Generative benchmarks via lmms-genbench** (optional: `pip install \"lmms_eval[genbench]\"`): "
        "MMECeption/GenCeption (`mmeception*`), the Semantic Drift Protocol (`sdp_*`), ChEF (`chef_*`) and AutoBench-V "
        "(`autobench*`) tasks, and the `cycle`, `t2i` and `chef` model types. The tasks are thin folders; the engine "
        "(describe-draw chains, scorers) is the lmms-genbench package.",
    ]
    return _insert(root, "docs/releases/CHANGELOG.md", lines, re.compile(r"^# Changelog"), "lmms-genbench")


_NOT_ON_PYPI = re.compile(r"of this package \(not on PyPI yet:.*?once it is released\)", re.S)
_DOC_LINK = re.compile(r"\[([^\]]+)\]\(\.\./\.\./\.\./([^)#]+)(#[^)]*)?\)")


def _readme(text: str, name: str) -> str:
    """Our task README as an upstream folder carries it: lmms-genbench named as the optional
    dependency that provides the engine, links into this repository's docs made plain."""
    text = _NOT_ON_PYPI.sub(f"of lmms-genbench (`{_INSTALL}`)", text)
    text = _DOC_LINK.sub(lambda m: f"lmms-genbench's `{m.group(2)}`", text)
    text = text.replace("this package's", "lmms-genbench's").replace("this package", "lmms-genbench")
    title, _, rest = text.partition("\n")
    note = (
        f"\n> These tasks are thin: their engine (the chains, scorers and the `cycle`, `t2i` and `chef` model types) is\n"
        f"> [lmms-genbench](https://pypi.org/project/lmms-genbench/), an optional dependency of lmms-eval. Install it with\n"
        f"> `{_INSTALL}`; without it, loading {_FEATURES[name]} stops with `'lmms_genbench' is required for\n"
        f"> {_FEATURES[name]} but not installed. Install with: pip install lmms_eval[{EXTRA}]`.\n"
    )
    return f"{title}\n{note}{rest}"


def _tests() -> str:
    smoke = {"mmeception": "mmeception_smoke", "sdp": "sdp_smoke", "chef": "chef_hallucination_smoke", "autobench": "autobench"}
    tasks = "".join(f'    "{t}",\n' for t in smoke.values())
    folders = "".join(f'    "{f}",\n' for f in FOLDERS)
    models = "".join(f'    "{m}",\n' for m in _MODELS)
    return f'''"""The lmms-genbench tasks and model types: registered, and their YAML functions resolve.

Skipped unless the optional dependency is installed ({_INSTALL}). No dataset download and no
inference, except the slow smoke run (tiny random-weight networks, offline).
"""

import glob
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lmms_genbench")

import lmms_eval  # noqa: E402
from lmms_eval.models import get_model  # noqa: E402
from lmms_eval.tasks import TaskManager  # noqa: E402

TASKS_DIR = Path(lmms_eval.__file__).parent / "tasks"
FOLDERS = [
{folders}]
TASKS = [
{tasks}]
MODELS = [
{models}]


def test_tasks_are_registered():
    missing = set(TASKS) - set(TaskManager("WARNING").all_tasks)
    assert not missing, f"missing tasks: {{sorted(missing)}}"


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_yaml_function_resolves(folder):
    utils = importlib.import_module(f"lmms_eval.tasks.{{folder}}.utils")
    named = set()
    for path in (TASKS_DIR / folder).glob("*.yaml"):
        named |= set(re.findall(r"!function utils\\.(\\w+)", path.read_text()))
    assert named
    assert all(callable(getattr(utils, name, None)) for name in named)


@pytest.mark.parametrize("model", MODELS)
def test_model_types_resolve_to_simple_models(model):
    cls = get_model(model)
    assert cls.__module__.startswith("lmms_genbench.")
    assert getattr(cls, "is_simple", True)


@pytest.mark.slow
def test_mmeception_smoke_scores(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "cycle", "--model_args", "preset=smoke", "--tasks", "mmeception_smoke", "--output_path", str(tmp_path)]
    subprocess.run(cmd, check=True, env=env, cwd=TASKS_DIR.parent.parent, timeout=1800)  # this lmms_eval first on the path
    (path,) = glob.glob(str(tmp_path / "**" / "*_results.json"), recursive=True)
    metrics = json.loads(Path(path).read_text())["results"]["mmeception_smoke"]
    assert metrics["n_scored,none"] == 9 and metrics["n_failed,none"] == 0
    assert 0 < metrics["gc@3,none"] <= 1
'''
