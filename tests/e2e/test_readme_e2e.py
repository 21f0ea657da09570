"""The README's and docs/' blocks marked ``<!-- offline-test -->`` run as written in a fresh folder
(how blocks are marked, checked quickly: tests/unit/test_readme.py)."""

import json
import os
import shlex
import subprocess

from PIL import Image

from lmms_genbench.metrics.functional.chef import DESIDERATA

from tests.support.doc_blocks import doc_blocks
from tests.support.lmms_eval_runs import BIN, offline_env


def _commands(block: str) -> list[tuple[list[str], str]]:
    """``(tasks, output_path)`` of each lmms-eval command of a block."""
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if "--tasks" in words:
            out = words[words.index("--output_path") + 1] if "--output_path" in words else "."
            found.append((words[words.index("--tasks") + 1].split(","), out))
    return found


def test_marked_blocks_run_offline_in_a_fresh_folder(tmp_path):
    blocks = doc_blocks()
    env = offline_env(tmp_path, LMMS_GENBENCH_ARTIFACTS=str(tmp_path / "artifacts"))
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # lmms-eval and lmms-genbench as installed
    (tmp_path / "my_images" / "street").mkdir(parents=True)  # the folder docs/running.md calls ./my_images
    for i in range(3):
        Image.new("RGB", (64, 48), (40 * i, 120, 200 - 40 * i)).save(tmp_path / "my_images" / "street" / f"{i}.png")
    for i, (where, block) in enumerate(blocks):
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], check=False, cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        (tmp_path / f"block{i}.log").write_text(proc.stdout + proc.stderr)
        assert proc.returncode == 0, f"{where} block {i} failed:\n{block}\n{proc.stderr[-3000:]}"

    # every task of every block has a score in a results file under its --output_path
    for where, block in blocks:
        for tasks, out in _commands(block):
            results = {}
            for path in sorted((tmp_path / out).rglob("*_results.json")):
                results.update(json.loads(path.read_text())["results"])
            for task in tasks:
                metrics = {k.split(",")[0]: v for k, v in results.get(task, {}).items() if "," in k}
                assert metrics, f"{where}: {task}: no results under {out}"
                if "n_scored" in metrics:
                    assert metrics["n_scored"] > 0 and metrics["n_failed"] == 0, (where, task, metrics)
                else:
                    assert metrics["n_docs"] > 0 and metrics["n_failed"] == 0, (where, task, metrics)
    # the README's main command logs the samples report's gallery, compare and --baseline read
    assert list((tmp_path / "logs").rglob("*_samples_mmeception_smoke.jsonl"))
    # docs/host-statistics.md: run B paired with run A
    (paired,) = [json.loads(p.read_text()) for p in (tmp_path / "runB").rglob("*_results.json")]
    assert "paired_ci_lower" in json.dumps(paired), "lmms-eval's --baseline left no paired interval"
    # what the commands say they write, in the folder they ran in
    assert {p.name for p in (tmp_path / "logs").rglob("sdp_*.png")} == {"sdp_drift_curves.png", "sdp_mgg_heatmap.png"}
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    # mmeception_smoke's chains, sdp_smoke's (both directions) and sdp_geneval_smoke's: the samples the
    # README's commands log (docs/analysis.md's report runs before docs/running.md's folder block)
    assert page.count('<article class="card') == 9 + 9 * 2 + 6
    summary = json.loads((tmp_path / "chef_figures" / "chef_summary.json").read_text())
    (model,) = summary.values()
    assert set(model["scores"]) | set(model["left_out"]) == set(DESIDERATA)  # none dropped silently
    assert list((tmp_path / "artifacts").rglob("report.json"))  # artifacts stayed in the folder
