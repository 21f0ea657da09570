"""The shared smoke run: the three offline smoke tasks and a 5-iteration variant in one
``lmms-eval`` call (``conftest.smoke_run`` makes it once per session)."""

from pathlib import Path
from types import SimpleNamespace

from tests.support.lmms_eval_runs import BIN, results_file, run

SMOKE_TASKS = ("mmeception_smoke", "sdp_smoke", "sdp_geneval_smoke")


def five_iteration_variant(task_dir):
    """mmeception_smoke with ``iterations: 5``: a YAML change alone, no Python."""
    from lmms_genbench.metrics.scorers.genception import GENCEPTION
    from lmms_genbench.plugin import TASKS_DIR

    here = Path(TASKS_DIR) / "mmeception"
    task_dir.mkdir()
    (task_dir / "utils.py").write_text("from lmms_genbench.tasks.mmeception.utils import *  # noqa: F401,F403\n")
    yaml = (here / "mmeception_smoke.yaml").read_text()
    yaml = yaml.replace("include: _mmeception_base.yaml", f"include: {here / '_mmeception_base.yaml'}")
    yaml = yaml.replace("smoke_photos.jsonl", str(here / "smoke_photos.jsonl"))
    yaml = yaml.replace("task: mmeception_smoke", "task: mmeception_smoke_t5").replace("iterations: 3", "iterations: 5")
    yaml = yaml[: yaml.index("metric_list:")] + "metric_list:\n" + "".join(
        f'  - {{metric: "{name}", aggregation: !function utils.aggregate, higher_is_better: true}}\n'
        for name in GENCEPTION.metric_names(10, {"preset": "smoke"})
    )
    (task_dir / "mmeception_smoke_t5.yaml").write_text(yaml)


def run_smoke_tasks(tmp):
    """Run the smoke tasks into ``tmp``: ``out`` (results, samples), ``art`` (the store)."""
    five_iteration_variant(tmp / "variant")
    out, art = tmp / "out", tmp / "art"
    proc = run(
        [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", f"preset=smoke,artifacts={art}",
         "--tasks", ",".join((*SMOKE_TASKS, "mmeception_smoke_t5")), "--include_path", str(tmp / "variant"),
         "--output_path", str(out), "--log_samples"],
        tmp, cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return SimpleNamespace(tmp=tmp, out=out, art=art, proc=proc, results=results_file(out)[1])
