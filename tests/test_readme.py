"""The README runs as written: its shell blocks marked offline-runnable (the line
``<!-- offline-test -->`` right above a ```bash fence) run in order, in one fresh
folder, offline, and leave what the README says they leave. lmms-eval exits 0 even
when a task crashed, so the results files are read too."""

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from lmms_genbench.metrics.functional.chef import DESIDERATA

from .lmms_eval_runs import BIN, offline_env

README = Path(__file__).parent.parent / "README.md"
MARKER = "<!-- offline-test -->"
BLOCK = re.compile(rf"^{re.escape(MARKER)}\n```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)


def marked_blocks(text: str) -> list[str]:
    """The marked blocks, in order; a marker not followed by a bash fence is an error."""
    blocks = BLOCK.findall(text)
    assert len(blocks) == text.count(MARKER), f"every {MARKER} line must sit right above a ```bash fence"
    return blocks


def _tasks(block: str) -> list[str]:
    """The tasks each lmms-eval command of a block asks for."""
    words = shlex.split(block.replace("\\\n", " "), comments=True)
    return [t for i, w in enumerate(words) if w == "--tasks" for t in words[i + 1].split(",")]


def test_marked_blocks_are_the_offline_quickstarts_and_install_nothing():
    blocks = marked_blocks(README.read_text(encoding="utf-8"))
    assert [_tasks(b) for b in blocks][:2] == [["mmeception_smoke"], ["sdp_smoke", "sdp_geneval_smoke"]]
    assert any(t.startswith("chef_") for b in blocks for t in _tasks(b))
    # installing is the reader's business, never the test's
    assert not [b for b in blocks if re.search(r"\bpip\s+install\b", b)]


@pytest.mark.integration
def test_marked_readme_blocks_run_offline_in_a_fresh_folder(tmp_path):
    blocks = marked_blocks(README.read_text(encoding="utf-8"))
    env = offline_env(tmp_path, LMMS_GENBENCH_ARTIFACTS=str(tmp_path / "artifacts"))
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # lmms-eval and lmms-genbench as installed
    for i, block in enumerate(blocks):
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        (tmp_path / f"block{i}.log").write_text(proc.stdout + proc.stderr)
        assert proc.returncode == 0, f"README block {i} failed:\n{block}\n{proc.stderr[-3000:]}"

    # every task of every block has a score in a results file under ./logs
    results = {}
    for path in sorted((tmp_path / "logs").rglob("*_results.json")):
        results.update(json.loads(path.read_text())["results"])
    for task in (t for b in blocks for t in _tasks(b)):
        metrics = {k.split(",")[0]: v for k, v in results.get(task, {}).items() if "," in k}
        assert metrics, f"{task}: no results"
        if "n_scored" in metrics:
            assert metrics["n_scored"] > 0 and metrics["n_failed"] == 0, (task, metrics)
        else:
            assert metrics["n_docs"] > 0 and metrics["n_failed"] == 0, (task, metrics)
    # what the commands say they write, in the folder they ran in
    assert {p.name for p in (tmp_path / "logs").rglob("sdp_*.png")} == {"sdp_drift_curves.png", "sdp_mgg_heatmap.png"}
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.count('<article class="card') == 9 * 2 + 6  # sdp_smoke's and sdp_geneval_smoke's chains
    summary = json.loads((tmp_path / "chef_figures" / "chef_summary.json").read_text())
    (model,) = summary.values()
    assert set(model["scores"]) | set(model["left_out"]) == set(DESIDERATA)  # none dropped silently
    assert list((tmp_path / "artifacts").rglob("report.json"))  # artifacts stayed in the folder
