"""The discovery hooks after a plain ``pip install`` of the wheel: lmms-eval's own listings, the
startup file and the report's template (the quick checks: tests/unit/test_plugin.py)."""

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support.lmms_eval_runs import BIN, ROOT, offline_env, setup_constant

OUR_TASKS = ("mmeception", "mmeception_smoke", "sdp_nocaps", "sdp_smoke", "autobench", "chef_icl_smoke")


OUR_MODELS = ("cycle", "t2i", "chef")


def test_models_and_tasks_are_found_without_include_path():
    code = (
        "import lmms_eval.evaluator\n"  # what the CLI and simple_evaluate import first
        "from lmms_eval.models import get_model, AVAILABLE_SIMPLE_MODELS\n"
        "from lmms_eval.tasks import TaskManager\n"
        "from lmms_genbench.plugin import TASKS_DIR\n"
        "tm = TaskManager('WARNING')\n"
        "print(sorted(t for t in tm.all_tasks if t.startswith('mmeception')))\n"
        "print(get_model('cycle').__name__, get_model('t2i').__name__)\n"
        "print('mme' in tm.all_tasks)\n"
        "print(sorted(m for m in ('cycle', 't2i', 'chef', 'llava_hf') if m in AVAILABLE_SIMPLE_MODELS))\n"
        "tm2 = TaskManager('WARNING', include_path=TASKS_DIR)\n"  # the documented fallback still works
        "print(sorted(t for t in tm2.all_tasks if t.startswith('mmeception')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    lines = out.stdout.strip().splitlines()
    assert lines[-5] == "['mmeception', 'mmeception_folder', 'mmeception_smoke']", out.stderr[-2000:]
    assert lines[-4] == "CycleModel TextToImageModel"
    assert lines[-3] == "True"  # built-in tasks are untouched
    assert lines[-2] == "['chef', 'cycle', 'llava_hf', 't2i']"  # the table `lmms-eval models` prints
    assert lines[-1] == lines[-5]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh virtual environment with this checkout installed by pip from its wheel,
    as a user gets it. It borrows this environment's packages (lmms-eval, torch) through
    a .pth line; its own site-packages comes first, so the installed copy of
    lmms_genbench is the one that runs. Built offline from a copy of the tree."""
    tmp = tmp_path_factory.mktemp("installed")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "lmms_genbench", src / "lmms_genbench", ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp / "dist"), str(src)],
                   check=True, timeout=600)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True, timeout=120)
    python = str(tmp / "venv" / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_borrow_test_env.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    wheel = next((tmp / "dist").glob("lmms_genbench-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", purelib, str(wheel)], check=True, timeout=600)
    env = offline_env(tmp)
    env.pop("PYTHONPATH", None)
    return python, purelib, env, tmp


def _listing(installed, *args):
    python, _, env, tmp = installed
    # the real console script of lmms-eval, run by the new environment's interpreter
    proc = subprocess.run([python, str(BIN / "lmms-eval"), *args], capture_output=True, text=True,
                          env=env, cwd=tmp, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}


def test_the_installed_wheel_carries_the_startup_file(installed):
    python, purelib, env, _ = installed
    assert Path(purelib, setup_constant("PTH_NAME")).read_text() == setup_constant("PTH_LINE")
    where = subprocess.run([python, "-c", "import lmms_genbench.hooks as p; print(p.__file__)"],
                           capture_output=True, text=True, env=env, check=True).stdout.strip()
    assert where.startswith(purelib), where  # the installed copy, not this checkout


def test_the_installed_wheel_renders_a_report_from_its_own_template(installed, tmp_path):
    python, purelib, env, _ = installed
    assert Path(purelib, "lmms_genbench", "analysis", "templates", "report.html.j2").is_file()
    results = tmp_path / "x_results.json"
    results.write_text('{"results": {"t": {"gc@1,none": 0.5}}, "config": {"model": "cycle"}}')
    proc = subprocess.run([python, "-m", "lmms_genbench.cli", "report", str(results), "-o", str(tmp_path / "r.html")],
                          check=False, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "gc@1" in (tmp_path / "r.html").read_text()


def test_lmms_eval_tasks_list_shows_our_tasks_and_the_built_in_ones(installed):
    names = _listing(installed, "tasks", "list")
    assert set(OUR_TASKS) <= names, sorted(set(OUR_TASKS) - names)
    assert {"mme", "nocaps", "pope"} <= names


def test_lmms_eval_models_lists_our_model_types_and_the_built_in_ones(installed):
    names = _listing(installed, "models")
    assert set(OUR_MODELS) <= names, sorted(set(OUR_MODELS) - names)
    assert {"llava_hf", "dummy"} <= names
