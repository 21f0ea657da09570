"""The shared smoke run: the three offline smoke tasks and a 5-iteration variant in one
``lmms-eval`` call (``conftest.smoke_run`` makes it once per session)."""

from pathlib import Path
from types import SimpleNamespace

from tests.support.lmms_eval_runs import BIN, results_file, run

SMOKE_TASKS = ("mmeception_smoke", "sdp_smoke", "sdp_geneval_smoke")


def smoke_task_variant(task_dir, protocol, yaml_name, data_file, task, edits, aggregation, metric_names):
    """A copy of one of ``protocol``'s smoke YAMLs as task ``task`` in ``task_dir`` (a YAML change
    alone, no Python): its include and data file made absolute, each ``(old, new)`` of ``edits``
    applied, its metric list made of ``metric_names`` aggregated by ``utils.<aggregation>``."""
    from lmms_genbench.plugin import TASKS_DIR

    here = Path(TASKS_DIR) / protocol
    task_dir.mkdir()
    (task_dir / "utils.py").write_text(f"from lmms_genbench.tasks.{protocol}.utils import *  # noqa: F401,F403\n")
    base = f"_{protocol}_base.yaml"
    yaml = (here / yaml_name).read_text()
    yaml = yaml.replace(f"include: {base}", f"include: {here / base}").replace(data_file, str(here / data_file))
    yaml = yaml.replace(f"task: {Path(yaml_name).stem}", f"task: {task}")
    for old, new in edits:
        yaml = yaml.replace(old, new)
    yaml = yaml[: yaml.index("metric_list:")] + "metric_list:\n" + "".join(
        f'  - {{metric: "{name}", aggregation: !function utils.{aggregation}, higher_is_better: true}}\n'
        for name in metric_names
    )
    (task_dir / f"{task}.yaml").write_text(yaml)


def five_iteration_variant(task_dir):
    """mmeception_smoke with ``iterations: 5``."""
    from lmms_genbench.metrics.scorers.genception import GENCEPTION

    smoke_task_variant(task_dir, "mmeception", "mmeception_smoke.yaml", "smoke_photos.jsonl", "mmeception_smoke_t5",
                       [("iterations: 3", "iterations: 5")], "aggregate",
                       GENCEPTION.metric_names(10, {"preset": "smoke"}))


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
