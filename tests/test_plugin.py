"""The discovery hook against the pinned lmms-eval."""

import subprocess
import sys


def test_models_and_tasks_are_found_without_include_path():
    code = (
        "import lmms_eval.evaluator\n"  # what the CLI and simple_evaluate import first
        "from lmms_eval.models import get_model\n"
        "from lmms_eval.tasks import TaskManager\n"
        "from lmms_genbench.plugin import TASKS_DIR\n"
        "tm = TaskManager('WARNING')\n"
        "print(sorted(t for t in tm.all_tasks if t.startswith('mmeception')))\n"
        "print(get_model('cycle').__name__, get_model('t2i').__name__)\n"
        "print('mme' in tm.all_tasks)\n"
        "tm2 = TaskManager('WARNING', include_path=TASKS_DIR)\n"  # the documented fallback still works
        "print(sorted(t for t in tm2.all_tasks if t.startswith('mmeception')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    lines = out.stdout.strip().splitlines()
    assert lines[-4] == "['mmeception', 'mmeception_folder', 'mmeception_smoke']", out.stderr[-2000:]
    assert lines[-3] == "CycleModel TextToImageModel"
    assert lines[-2] == "True"  # built-in tasks are untouched
    assert lines[-1] == lines[-4]


def test_hook_is_idempotent():
    import lmms_eval.evaluator  # noqa: F401
    from lmms_eval.tasks import TaskManager

    from lmms_genbench.plugin import install_task_path

    assert install_task_path() and install_task_path()
    assert getattr(TaskManager.initialize_tasks, "_lmms_genbench_hook", False)
    assert not hasattr(TaskManager.initialize_tasks.__wrapped__, "_lmms_genbench_hook")


def test_importing_the_package_loads_no_heavy_module():
    code = "import sys, lmms_genbench, lmms_genbench.metrics, lmms_genbench.generators; print(sorted(m for m in ('torch', 'transformers', 'diffusers', 'lmms_eval') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
