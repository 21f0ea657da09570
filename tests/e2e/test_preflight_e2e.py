"""The preflight through the front door: ``lmms-genbench check`` with a whole lmms-eval command
line, and the lmms-eval command itself, which runs the same check before any weight loads (the
local test hub, tests/support/localhub, serves the reachable cases). Every problem at once, exit
1, in seconds (the in-process checks: tests/unit/preflight/test_preflight.py)."""

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.lmms_eval_runs import BIN, HEADLINE, NOWHERE, nonblank_lines, run
from tests.support.localhub.server import NOT_ACCEPTED

ROOT = Path(__file__).resolve().parents[2]
CPU = ",describer.device=cpu,generator.device=cpu"


@pytest.mark.parametrize("env", [{"HF_HUB_OFFLINE": "1"}, {"HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0",
                                                              "TRANSFORMERS_OFFLINE": "0", "HF_ENDPOINT": NOWHERE}],
                         ids=["offline", "unreachable"])
def test_the_headline_command_cut_off_from_the_hub_is_one_line_in_seconds(env, tmp_path):
    start = time.monotonic()
    proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", HEADLINE + CPU, "--tasks",
                "mmeception,sdp_nocaps", "--limit", "2", "--output_path", str(tmp_path / "logs")], tmp_path,
               timeout=300, **env)
    seconds = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Retrying" not in proc.stderr, proc.stderr[-3000:]
    last = nonblank_lines(proc.stderr)[-1]
    endpoint = env.get("HF_ENDPOINT", "https://huggingface.co")
    assert last.startswith("lmms-genbench: error: ") and endpoint in last and "HF_HUB_OFFLINE" in last, last
    assert "preflight found" not in last  # the one problem, not a list
    assert seconds < 90, seconds
    assert not list((tmp_path / "logs").rglob("*_results.json"))


@pytest.mark.parametrize("preflight", ["1", "0"], ids=["preflight", "task-itself"])
def test_an_empty_or_image_less_folder_is_one_line(preflight, tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    (folder / "notes.txt").write_text("no picture here")
    proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", f"preset=smoke,artifacts={tmp_path / 'a'}",
                "--tasks", "mmeception_folder", "--output_path", str(tmp_path / "logs")], tmp_path, timeout=300,
               MMECEPTION_IMAGE_DIR=str(folder), LMMS_GENBENCH_PREFLIGHT=preflight)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "RetryError" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    last = nonblank_lines(proc.stderr)[-1]
    assert last.startswith("lmms-genbench: error: task mmeception_folder: no image files (.png, .jpg") and \
        str(folder) in last and "Fix: set MMECEPTION_IMAGE_DIR to a folder that holds" in last, last


# ----------------------------------------------------------------- through the local test Hub
def _check(local_hub, tmp_path, model_args, tasks="mmeception,sdp_nocaps", **env):
    from tests.support.lmms_eval_runs import offline_env

    hub_env = local_hub.env(hf_home=tmp_path / "hf", token=env.pop("token", None))
    full = {**offline_env(tmp_path), **hub_env, **env}
    if "HF_TOKEN" not in hub_env:
        full.pop("HF_TOKEN", None)
    return subprocess.run([str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", model_args,
                           "--tasks", tasks, "--limit", "3", "--output_path", str(tmp_path / "logs")],
                          check=False, cwd=tmp_path, env=full, capture_output=True, text=True, timeout=300)


def test_check_passes_the_headline_command_through_the_local_hub(local_hub, tmp_path):
    from tests.support.localhub.server import ACCEPTED

    proc = _check(local_hub, tmp_path, HEADLINE + CPU + f",artifacts={tmp_path / 'art'}", token=ACCEPTED)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert nonblank_lines(proc.stderr)[-1] == ("lmms-genbench check: ok: nothing missing for --model cycle --tasks "
                                       "mmeception,sdp_nocaps")
    assert not list((tmp_path / "hf").rglob("*.safetensors"))  # no weights fetched


@pytest.mark.parametrize("token, gated", [(None, "no valid Hugging Face token was sent"),
                                          (NOT_ACCEPTED, "your token's account has not been granted access")],
                         ids=["no-token-401", "terms-not-accepted-403"])
def test_check_names_a_gated_dataset_a_missing_revision_and_an_unknown_id_at_once(local_hub, tmp_path, token, gated):
    args = (HEADLINE.replace("Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/No-Such-Model")
            + ",generator.revision=v9" + CPU + f",artifacts={tmp_path / 'art'}")
    proc = _check(local_hub, tmp_path, args, token=token)
    assert proc.returncode == 1, proc.stderr[-3000:]
    listed = [line for line in nonblank_lines(proc.stderr) if re.match(r"\s+\d+\. ", line)]
    text = "\n".join(listed)
    assert len(listed) == 3, proc.stderr
    assert "describer.pretrained=Qwen/No-Such-Model: the Hub has no model Qwen/No-Such-Model" in text
    assert "generator.pretrained=black-forest-labs/FLUX.1-schnell: revision v9 of black-forest-labs/FLUX.1-schnell " \
           "does not exist" in text
    assert "task mmeception could not load its dataset lmms-lab-encoder/MME: it is gated" in text and gated in text


def test_the_gpu_example_without_cuda_stops_in_one_line_in_seconds(local_hub, tmp_path):
    from tests.support.lmms_eval_runs import offline_env
    from tests.support.localhub.repos import add_models
    from tests.support.localhub.server import ACCEPTED

    add_models(local_hub, ids=["llava-hf/llava-1.5-7b-hf", "stabilityai/stable-diffusion-3.5-medium"])
    env = {**offline_env(tmp_path), **local_hub.env(hf_home=tmp_path / "hf", token=ACCEPTED), "CUDA_VISIBLE_DEVICES": ""}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    start = time.monotonic()
    proc = subprocess.run(["bash", str(ROOT / "examples" / "mmeception_gpu.sh")], check=False, cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = nonblank_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("lmms-genbench check: error: CUDA is asked for "
                                                   "(describer.device_map=cuda, generator.device=cuda (its default))"), lines
    assert "accelerate" not in proc.stderr + proc.stdout  # no process was launched
    assert seconds < 60, seconds


def test_the_own_folder_example_without_cuda_stops_in_one_line_in_seconds(local_hub, tmp_path):
    from PIL import Image

    from tests.support.lmms_eval_runs import offline_env
    from tests.support.localhub.server import ACCEPTED

    (tmp_path / "pictures").mkdir()
    for i in range(2):
        Image.new("RGB", (32, 32), (90 * i, 40, 40)).save(tmp_path / "pictures" / f"{i}.png")
    env = {**offline_env(tmp_path), **local_hub.env(hf_home=tmp_path / "hf", token=ACCEPTED), "CUDA_VISIBLE_DEVICES": ""}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    start = time.monotonic()
    proc = subprocess.run(["bash", str(ROOT / "examples" / "own_folder.sh"), str(tmp_path / "pictures")], check=False,
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    last = nonblank_lines(proc.stderr)[-1]
    assert last.startswith("lmms-genbench: error: CUDA is asked for (describer.device=cuda (its default), "
                           "generator.device=cuda (its default))"), last
    assert seconds < 90, seconds
    assert not list((tmp_path / "logs").rglob("*_results.json"))


def test_the_api_example_without_a_key_stops_in_one_line(tmp_path):
    from tests.support.lmms_eval_runs import offline_env

    env = {**offline_env(tmp_path), "OPENAI_API_KEY": ""}
    proc = subprocess.run(["bash", str(ROOT / "examples" / "mmeception_api.sh")], check=False, cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and nonblank_lines(proc.stderr) == [nonblank_lines(proc.stderr)[0]], proc.stderr
    assert "OPENAI_API_KEY" in proc.stderr
