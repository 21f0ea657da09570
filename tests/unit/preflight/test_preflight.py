"""The preflight through the front door: ``lmms-genbench check`` with a whole lmms-eval command
line, and the lmms-eval command itself, which runs the same check before any weight loads.
Every problem at once, exit 1, in seconds; the Hub unreachable or offline is one line that
names the endpoint. No Hub is reached: an endpoint nothing listens on stands for a machine
cut off (the local test Hub, tests/support/localhub, serves the reachable cases)."""

import errno
import re
import subprocess
import time
from pathlib import Path

import pytest

from lmms_genbench.preflight import Problem, check_run
from lmms_genbench.preflight.hub import HubProbe, collapse
from lmms_genbench.preflight.roles import Role, device_problem

from tests.support.lmms_eval_runs import BIN, run
from tests.support.localhub.server import NOT_ACCEPTED

ROOT = Path(__file__).resolve().parents[3]

NOWHERE = "http://127.0.0.1:9"  # the discard port: connection refused at once
HEADLINE = ("describer=qwen2_5_vl,describer.pretrained=Qwen/Qwen2.5-VL-7B-Instruct,generator=diffusers,"
            "generator.pretrained=black-forest-labs/FLUX.1-schnell,generator.steps=4,generator.guidance=0.0")
CPU = ",describer.device=cpu,generator.device=cpu"


def _lines(text):
    return [line for line in text.splitlines() if line.strip()]


def test_check_lists_every_problem_of_one_bad_command_at_once(tmp_path):
    bad = (HEADLINE.replace("describer.pretrained=", "describer.colour=red,describer.pretrained=")
           + f",artifacts={tmp_path}/store")
    (tmp_path / "store").write_text("a file where the store's folder should be")
    start = time.monotonic()
    proc = run([str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", bad,
                "--tasks", "mmeception,sdp_nocaps,mmeception_folder", "--limit", "2", "--log_samples",
                "--output_path", str(tmp_path / "logs")], tmp_path, timeout=120,
               HF_HUB_OFFLINE="0", HF_DATASETS_OFFLINE="0", TRANSFORMERS_OFFLINE="0", HF_ENDPOINT=NOWHERE,
               MMECEPTION_IMAGE_DIR=str(tmp_path / "no_such_folder"), CUDA_VISIBLE_DEVICES="")
    seconds = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    listed = [line for line in _lines(proc.stderr) if re.match(r"\s+\d+\. ", line)]
    text = "\n".join(listed)
    assert len(listed) >= 3, proc.stderr
    assert f"the Hugging Face Hub at {NOWHERE} cannot be reached" in text and "HF_HUB_OFFLINE=1" in text
    assert "describer.pretrained=Qwen/Qwen2.5-VL-7B-Instruct" in text and "dataset lmms-lab-encoder/MME" in text
    assert "describer.colour is not an argument of lmms-eval's qwen2_5_vl class" in text
    assert "CUDA is asked for" in text
    assert "mmeception_folder" in text and "no_such_folder" in text
    assert f"the artifact store {tmp_path}/store cannot be written" in text
    assert _lines(proc.stderr)[-1] == f"lmms-genbench check: error: {len(listed)} problems found, listed above"
    assert seconds < 60, seconds  # seconds: nothing loads, the refused Hub is asked once


def test_check_passes_the_offline_smoke_command(tmp_path):
    proc = run([str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", "preset=smoke",
                "--tasks", "mmeception_smoke", "--output_path", str(tmp_path / "logs")], tmp_path, timeout=120,
               LMMS_GENBENCH_ARTIFACTS=str(tmp_path / "art"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _lines(proc.stderr)[-1] == "lmms-genbench check: ok: nothing missing for --model cycle --tasks mmeception_smoke"
    assert not (tmp_path / "art").exists() and not (tmp_path / "logs").exists()  # checked, nothing written


def test_the_hub_lines_collapse_into_one_that_names_the_endpoint_and_the_offline_switch():
    probe = HubProbe.__new__(HubProbe)
    probe.endpoint, probe.offline, probe.unreachable = NOWHERE, False, "ConnectError: refused"
    other = Problem("CUDA is asked for", "use a GPU")
    found = collapse([Problem("a: not checked", "", hub="describer.pretrained=a/b"), other,
                      Problem("b: not checked", "", hub="dataset c/d")], probe)
    assert found[1:] == [other]
    assert found[0].cause == (f"the Hugging Face Hub at {NOWHERE} cannot be reached (ConnectError: refused); this run "
                              "reads describer.pretrained=a/b, dataset c/d from it")
    assert "HF_HUB_OFFLINE=1" in found[0].fix and "HF_ENDPOINT" in found[0].fix
    probe.offline = True
    alone = Problem("task t could not load its dataset c/d: this run is offline", "fix", hub="dataset c/d")
    assert collapse([alone], probe) == [alone]  # one offline miss keeps its own, more precise line


def test_cuda_asked_for_is_one_problem_naming_every_role():
    roles = [Role("describer", "llava_hf", {}, "describer.", defaults={"device": "cuda"}),
             Role("generator", "diffusers", {"device": "cuda:1"}, "generator."),
             Role("generator", "smoke", {"device": "cpu"}, "generator.")]
    problem = device_problem(roles, cuda_devices=0)
    assert problem.cause.startswith("CUDA is asked for (describer.device=cuda (its default), generator.device=cuda:1)")
    assert "describer.device=cpu, generator.device=cpu" in problem.fix
    assert device_problem(roles, cuda_devices=2) is None
    assert "8 processes" in device_problem(roles, cuda_devices=2, processes=8).cause
    # lmms-eval's qwen2_5_vl puts inputs on cuda while its device_map is "auto": the hint names both
    qwen = [Role("describer", "qwen2_5_vl", {}, "describer.", defaults={"device": "cuda", "device_map": "auto"})]
    assert "describer.device=cpu, describer.device_map=cpu (slow" in device_problem(qwen, cuda_devices=0).fix


def test_an_api_describer_without_its_key_and_a_missing_folder_are_named(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    problems = check_run("cycle", {"describer": "openai", "describer.model_version": "gpt-4o", "generator": "diffusers",
                                   "generator.pretrained": str(tmp_path / "gone"), "generator.device": "cpu",
                                   "artifacts": str(tmp_path / "art")}, ["mmeception_smoke"])
    causes = [p.cause for p in problems]
    assert "the describer openai calls an API and OPENAI_API_KEY is not set" in causes
    assert any(c.startswith(f"the generator diffusers did not load: its weights generator.pretrained={tmp_path}/gone "
                            "do not exist") for c in causes), causes
    assert len(problems) == 2, causes


@pytest.mark.integration
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
    last = _lines(proc.stderr)[-1]
    endpoint = env.get("HF_ENDPOINT", "https://huggingface.co")
    assert last.startswith("lmms-genbench: error: ") and endpoint in last and "HF_HUB_OFFLINE" in last, last
    assert "preflight found" not in last  # the one problem, not a list
    assert seconds < 90, seconds
    assert not list((tmp_path / "logs").rglob("*_results.json"))


def test_unwritable_folders_are_found_without_writing_the_store(tmp_path, monkeypatch):
    import tempfile

    from lmms_genbench import preflight

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", full)
    problems = preflight._store_problems("cycle", {"artifacts": str(tmp_path / "a" / "b")}, None)
    assert [p.cause for p in problems] == [f"the artifact store {tmp_path}/a/b cannot be written (No space left on device)"]
    assert not (tmp_path / "a").exists()


@pytest.mark.integration
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
    last = _lines(proc.stderr)[-1]
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


@pytest.mark.integration
def test_check_passes_the_headline_command_through_the_local_hub(local_hub, tmp_path):
    from tests.support.localhub.server import ACCEPTED

    proc = _check(local_hub, tmp_path, HEADLINE + CPU + f",artifacts={tmp_path / 'art'}", token=ACCEPTED)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _lines(proc.stderr)[-1] == ("lmms-genbench check: ok: nothing missing for --model cycle --tasks "
                                       "mmeception,sdp_nocaps")
    assert not list((tmp_path / "hf").rglob("*.safetensors"))  # no weights fetched


@pytest.mark.integration
@pytest.mark.parametrize("token, gated", [(None, "no valid Hugging Face token was sent"),
                                          (NOT_ACCEPTED, "your token's account has not been granted access")],
                         ids=["no-token-401", "terms-not-accepted-403"])
def test_check_names_a_gated_dataset_a_missing_revision_and_an_unknown_id_at_once(local_hub, tmp_path, token, gated):
    args = (HEADLINE.replace("Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/No-Such-Model")
            + ",generator.revision=v9" + CPU + f",artifacts={tmp_path / 'art'}")
    proc = _check(local_hub, tmp_path, args, token=token)
    assert proc.returncode == 1, proc.stderr[-3000:]
    listed = [line for line in _lines(proc.stderr) if re.match(r"\s+\d+\. ", line)]
    text = "\n".join(listed)
    assert len(listed) == 3, proc.stderr
    assert "describer.pretrained=Qwen/No-Such-Model: the Hub has no model Qwen/No-Such-Model" in text
    assert "generator.pretrained=black-forest-labs/FLUX.1-schnell: revision v9 of black-forest-labs/FLUX.1-schnell " \
           "does not exist" in text
    assert "task mmeception could not load its dataset lmms-lab-encoder/MME: it is gated" in text and gated in text


@pytest.mark.integration
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
    lines = _lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("lmms-genbench check: error: CUDA is asked for "
                                                   "(describer.device_map=cuda, generator.device=cuda (its default))"), lines
    assert "accelerate" not in proc.stderr + proc.stdout  # no process was launched
    assert seconds < 60, seconds


@pytest.mark.integration
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
    last = _lines(proc.stderr)[-1]
    assert last.startswith("lmms-genbench: error: CUDA is asked for (describer.device=cuda (its default), "
                           "generator.device=cuda (its default))"), last
    assert seconds < 90, seconds
    assert not list((tmp_path / "logs").rglob("*_results.json"))


@pytest.mark.integration
def test_the_api_example_without_a_key_stops_in_one_line(tmp_path):
    from tests.support.lmms_eval_runs import offline_env

    env = {**offline_env(tmp_path), "OPENAI_API_KEY": ""}
    proc = subprocess.run(["bash", str(ROOT / "examples" / "mmeception_api.sh")], check=False, cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and _lines(proc.stderr) == [_lines(proc.stderr)[0]], proc.stderr
    assert "OPENAI_API_KEY" in proc.stderr
