"""The discovery hooks against the pinned lmms-eval: the entry point, the task path,
the startup file, and lmms-eval's own listings after a plain ``pip install``."""

import ast
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support.lmms_eval_runs import BIN, offline_env

ROOT = Path(__file__).resolve().parents[2]
OUR_TASKS = ("mmeception", "mmeception_smoke", "sdp_nocaps", "sdp_smoke", "autobench", "chef_icl_smoke")
OUR_MODELS = ("cycle", "t2i", "chef")


def _setup_constant(name):
    """A constant of setup.py, read without running it."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and node.targets[0].id == name:
            return ast.literal_eval(node.value)
    raise AssertionError(f"setup.py has no {name}")


@pytest.mark.integration
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


def test_hook_is_idempotent():
    import lmms_eval.evaluator  # noqa: F401
    from lmms_eval.tasks import TaskManager

    from lmms_genbench.hooks.startup import install_task_path

    assert install_task_path() and install_task_path()
    assert getattr(TaskManager.initialize_tasks, "_lmms_genbench_hook", False)
    assert not hasattr(TaskManager.initialize_tasks.__wrapped__, "_lmms_genbench_hook")


def test_the_startup_line_hooks_lmms_eval_tasks_alone_and_imports_nothing_first():
    """setup.py's .pth line, run as site.py runs it: nothing heavy at start-up, the task
    path in place once lmms_eval.tasks is imported (without lmms_eval.models), the run hook
    once lmms_eval.evaluator is, and the finder gone afterwards. Run twice, it installs one finder."""
    line = _setup_constant("PTH_LINE")
    assert line.startswith("import ") and line.count("\n") == 1  # site.py executes such a line
    code = (
        f"{line.strip()}\n{line.strip()}\n"
        "import sys\n"
        "finders = lambda: sum(type(f).__name__ == '_AfterImport' for f in sys.meta_path)\n"
        "print(finders(), sorted(m for m in ('lmms_eval', 'lmms_genbench.core.registry', 'torch') if m in sys.modules))\n"
        "from lmms_eval.tasks import TaskManager\n"
        "print(getattr(TaskManager.initialize_tasks, '_lmms_genbench_hook', False), 'lmms_eval.models' in sys.modules, finders())\n"
        "import lmms_eval.evaluator as e\n"
        "print(getattr(e.evaluate, '_lmms_genbench_hook', False), finders())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines() == ["1 []", "True False 1", "True 0"], out.stdout + out.stderr[-2000:]


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


@pytest.mark.integration
def test_the_installed_wheel_carries_the_startup_file(installed):
    python, purelib, env, _ = installed
    assert Path(purelib, _setup_constant("PTH_NAME")).read_text() == _setup_constant("PTH_LINE")
    where = subprocess.run([python, "-c", "import lmms_genbench.hooks as p; print(p.__file__)"],
                           capture_output=True, text=True, env=env, check=True).stdout.strip()
    assert where.startswith(purelib), where  # the installed copy, not this checkout


@pytest.mark.integration
def test_the_installed_wheel_renders_a_report_from_its_own_template(installed, tmp_path):
    python, purelib, env, _ = installed
    assert Path(purelib, "lmms_genbench", "analysis", "templates", "report.html.j2").is_file()
    results = tmp_path / "x_results.json"
    results.write_text('{"results": {"t": {"gc@1,none": 0.5}}, "config": {"model": "cycle"}}')
    proc = subprocess.run([python, "-m", "lmms_genbench.cli", "report", str(results), "-o", str(tmp_path / "r.html")],
                          check=False, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "gc@1" in (tmp_path / "r.html").read_text()


@pytest.mark.integration
def test_lmms_eval_tasks_list_shows_our_tasks_and_the_built_in_ones(installed):
    names = _listing(installed, "tasks", "list")
    assert set(OUR_TASKS) <= names, sorted(set(OUR_TASKS) - names)
    assert {"mme", "nocaps", "pope"} <= names


@pytest.mark.integration
def test_lmms_eval_models_lists_our_model_types_and_the_built_in_ones(installed):
    names = _listing(installed, "models")
    assert set(OUR_MODELS) <= names, sorted(set(OUR_MODELS) - names)
    assert {"llava_hf", "dummy"} <= names


def test_importing_the_package_loads_no_heavy_module():
    code = "import sys, lmms_genbench, lmms_genbench.metrics, lmms_genbench.generators; print(sorted(m for m in ('torch', 'transformers', 'diffusers', 'lmms_eval') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
