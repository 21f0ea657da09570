"""examples/sdp_paper.sh, the Semantic Drift paper's seven rows, as written: each row's `lmms-genbench
check` through the local test Hub (every id served as the real repository's layout, tiny weights) on a
machine without CUDA stops on one problem only, CUDA, so the row's model arguments, ids and files are
all what the check accepts; nothing is launched."""

import subprocess
from pathlib import Path

import pytest

from tests.support.lmms_eval_runs import BIN, nonblank_lines, offline_env

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "sdp_paper.sh"
ROWS = {  # row -> the ids the check asks the Hub about
    "bagel": ["ByteDance-Seed/BAGEL-7B-MoT"],
    "showo": ["showlab/show-o-512x512", "showlab/magvitv2", "microsoft/phi-1_5"],
    "janus": ["deepseek-ai/Janus-1.3B"],
    "janus_pro": ["deepseek-community/Janus-Pro-7B"],
    "vila_u": ["mit-han-lab/vila-u-7b-256"],
    "blip3o": ["BLIP3o/BLIP3o-Model-4B"],
    "llava_sdxl": ["llava-hf/llava-1.5-7b-hf", "stabilityai/stable-diffusion-xl-base-1.0"],
}


def test_the_script_lists_the_papers_seven_rows():
    proc = subprocess.run(["bash", str(SCRIPT), "no_such_row"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("the rows are: " + " ".join(ROWS))


@pytest.mark.parametrize("row", list(ROWS))
def test_each_row_is_checked_and_stops_only_on_cuda(local_hub, tmp_path, row):
    from tests.support.localhub.repos import add_models
    from tests.support.localhub.server import ACCEPTED

    add_models(local_hub, ids=ROWS[row])
    env = {**offline_env(tmp_path), **local_hub.env(hf_home=tmp_path / "hf", token=ACCEPTED), "CUDA_VISIBLE_DEVICES": "",
           "TASKS": "sdp_nocaps", "OUT": str(tmp_path / "logs")}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    proc = subprocess.run(["bash", str(SCRIPT), row], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stdout.strip() == f"== {row}"
    lines = nonblank_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("lmms-genbench check: error: CUDA is asked for ("), lines
    assert not (tmp_path / "logs").exists()  # lmms-eval never started
