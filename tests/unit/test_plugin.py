"""The discovery hooks against the pinned lmms-eval: the entry point, the task path,
the startup file (lmms-eval's own listings after a plain ``pip install`` of the wheel:
tests/e2e/test_plugin_e2e.py)."""

import subprocess
import sys

from tests.support.lmms_eval_runs import setup_constant


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
    line = setup_constant("PTH_LINE")
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


def test_importing_the_package_loads_no_heavy_module():
    code = "import sys, lmms_genbench, lmms_genbench.metrics, lmms_genbench.generators; print(sorted(m for m in ('torch', 'transformers', 'diffusers', 'lmms_eval') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
