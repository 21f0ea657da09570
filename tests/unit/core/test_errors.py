"""Errors a person can act on, through the real commands: a model or scorer network
that does not load, a task run on the wrong model type, a task that produced no
score, and the lmms-genbench subcommands. Each ends with one line naming the cause
and the fix, with no retried (RetryError) traceback."""

import json
import subprocess
import sys

import pytest
from PIL import Image

from tests.support.lmms_eval_runs import BIN, offline_env, results_file, run


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _lmms_eval(tmp_path, *args, **env):
    return run([str(BIN / "lmms-eval"), *args, "--output_path", str(tmp_path / "out")], tmp_path, timeout=600, **env)


# ----------------------------------------------------------------------- the line itself
def test_the_line_names_cause_and_fix_and_debug_adds_the_traceback(monkeypatch, capsys):
    from lmms_genbench.core.errors import ActionableError, from_exception, load_failure

    try:
        raise OSError("no such file\nmore detail")
    except OSError as exc:
        error = from_exception(exc, "the thing did not load", "give another thing")
    assert str(error) == "lmms-genbench: error: the thing did not load (OSError: no such file). Fix: give another thing"
    assert isinstance(error, ActionableError) and error.code == str(error) and capsys.readouterr().err == ""
    assert from_exception(error, "outer", "outer fix") is error  # the innermost line wins
    monkeypatch.setenv("VERBOSITY", "DEBUG")  # lmms-eval's --verbosity DEBUG
    from_exception(OSError("x"), "c", "f")
    assert "OSError: x" in capsys.readouterr().err
    hub = load_failure(OSError("401"), "describer", "llava_hf", {"pretrained": "org/model"}, "describer.")
    assert hub.cause == "the describer llava_hf did not load with describer.pretrained=org/model (OSError: 401)"
    assert hub.fix.startswith("check describer.pretrained and the other describer.<arg> values")


# ----------------------------------------------------------------------- lmms-genbench
def _genbench(tmp_path, *args, **env):
    return subprocess.run([sys.executable, "-m", "lmms_genbench.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=offline_env(tmp_path, **env))


def test_fetch_geneval_without_network_is_one_line_and_exit_1(tmp_path):
    # a proxy that refuses: the same failure whether or not this machine has internet
    proc = _genbench(tmp_path, "sdp", "fetch-geneval", "--out", str(tmp_path / "meta.jsonl"),
                     HTTPS_PROXY="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    last = _last_line(proc.stderr)
    assert last.startswith("lmms-genbench sdp fetch-geneval: error: could not fetch GenEval's metadata from https://")
    assert last.endswith("point LMMS_GENBENCH_GENEVAL_METADATA at it")
    assert not (tmp_path / "meta.jsonl").exists()


def test_an_unexpected_failure_is_one_line_and_debug_shows_the_traceback(tmp_path):
    # a results "file" that is a folder of nothing usable is a usage error (2) ...
    assert _genbench(tmp_path, "plot", str(tmp_path)).returncode == 2
    # ... an output folder that cannot be made is a failure (1), one line
    blocker = tmp_path / "file"
    blocker.write_text("")
    results = tmp_path / "r_results.json"
    results.write_text(json.dumps({"results": {"chef_icl_smoke": {"riam,none": 0.1}}}))
    proc = _genbench(tmp_path, "chef", "summary", str(results), "--out", str(blocker / "sub"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert _last_line(proc.stderr).startswith("lmms-genbench chef summary: error: NotADirectoryError: ")
    debug = _genbench(tmp_path, "--debug", "chef", "summary", str(results), "--out", str(blocker / "sub"))
    assert debug.returncode == 1 and "Traceback" in debug.stderr


# ----------------------------------------------------------------------- lmms-eval
@pytest.mark.integration
def test_a_describer_that_does_not_load_names_its_argument(tmp_path):
    args = ("--model", "cycle", "--model_args", "describer=llava_hf,describer.pretrained=/nonexistent,generator=smoke,"
            "describer.device=cpu", "--tasks", "mmeception_smoke")
    # the run's preflight names it before any weight loads
    proc = _lmms_eval(tmp_path, *args)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "RetryError" not in proc.stderr + proc.stdout
    assert _last_line(proc.stderr).startswith(
        "lmms-genbench: error: the describer llava_hf did not load: its weights describer.pretrained=/nonexistent "
        "do not exist (FileNotFoundError: ")
    # and so does the load itself, where the preflight is switched off
    proc = _lmms_eval(tmp_path, *args, LMMS_GENBENCH_PREFLIGHT="0")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "RetryError" not in proc.stderr + proc.stdout
    assert _last_line(proc.stderr).startswith(
        "lmms-genbench: error: the describer llava_hf did not load: its weights describer.pretrained=/nonexistent "
        "do not exist (OSError: ")
    assert _last_line(proc.stderr).endswith(
        "Fix: give describer.pretrained=<an existing checkpoint folder or a hub id>, "
        "or run offline with --model_args preset=smoke")


@pytest.mark.integration
def test_a_scorer_network_that_does_not_load_names_the_variable(tmp_path):
    proc = _lmms_eval(tmp_path, "--model", "cycle", "--model_args", f"preset=smoke,artifacts={tmp_path / 'art'}",
                      "--tasks", "mmeception_smoke", "--limit", "2", LMMS_GENBENCH_IMAGE_ENCODER="/nonexistent")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "RetryError" not in proc.stderr + proc.stdout
    last = _last_line(proc.stderr)
    assert last.startswith("lmms-genbench: error: the genception scorer of mmeception_smoke could not load its "
                           "image_encoder network '/nonexistent' (set by LMMS_GENBENCH_IMAGE_ENCODER=/nonexistent)")
    assert "Fix: point LMMS_GENBENCH_IMAGE_ENCODER at a network that loads here" in last
    assert "preset=smoke" in last


@pytest.mark.integration
def test_a_cycle_task_on_another_model_type_says_use_the_cycle_model(tmp_path):
    from lmms_genbench.smoke.llava import tiny_llava_path

    proc = _lmms_eval(tmp_path, "--model", "llava_hf", "--model_args",
                      f"pretrained={tiny_llava_path()},device=cpu,device_map=cpu,dtype=float32",
                      "--tasks", "mmeception_smoke", "--limit", "1", "--gen_kwargs", "max_new_tokens=4")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "RetryError" not in proc.stderr + proc.stdout
    last = _last_line(proc.stderr)
    assert last.startswith("lmms-genbench: error: the genception scorer got response is not a chain")
    assert last.endswith("must run with --model cycle. Fix: run them with --model cycle "
                         "(--model_args describer=...,generator=... or unified=...)")


@pytest.mark.integration
def test_a_task_with_no_score_says_so_last(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    (images / "broken.png").write_bytes(b"not a png")
    Image.new("RGB", (4, 4)).save(images / "truncated.jpg")
    (images / "truncated.jpg").write_bytes((images / "truncated.jpg").read_bytes()[:20])
    proc = _lmms_eval(tmp_path, "--model", "cycle", "--model_args", f"preset=smoke,artifacts={tmp_path / 'art'}",
                      "--tasks", "mmeception_folder", MMECEPTION_IMAGE_DIR=str(images))
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = results_file(tmp_path / "out")[1]["results"]["mmeception_folder"]
    assert metrics["n_scored,none"] == 0 and metrics["n_failed,none"] == 2
    assert _last_line(proc.stderr).startswith(
        "lmms-genbench: mmeception_folder produced no score: 0 of 2 docs scored (seed failed at hop 0 (2))")
    (report,) = (tmp_path / "art").rglob("report.json")
    failed = json.loads(report.read_text())["failed_docs"]
    assert [f["chain_id"] for f in failed] == ["broken.png", "truncated.jpg"]
    assert all("unreadable image" in f["reason"] for f in failed)


def test_a_hub_that_stops_answering_while_weights_load_is_named_with_its_endpoint(monkeypatch):
    """A connection reset mid-download (tests/e2e/test_front_door_e2e.py's server going away) used to end
    in "ReadError: Connection reset by peer", naming neither the Hub nor the way out."""
    import httpx

    from lmms_genbench.core.errors import load_failure

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:8765")
    try:
        try:
            raise httpx.ReadError("[Errno 104] Connection reset by peer")
        except httpx.ReadError as reset:
            raise OSError("We couldn't connect to load this file") from reset
    except OSError as exc:
        line = str(load_failure(exc, "generator", "diffusers", {"pretrained": "org/pipe"}, "generator."))
    assert "the Hugging Face Hub at http://127.0.0.1:8765 could not be reached or stopped answering" in line
    assert "ReadError: [Errno 104] Connection reset by peer" in line
    assert "HF_HUB_OFFLINE=1" in line and "rerun the same command" in line
    assert "\n" not in line
    # a local folder's failure is not blamed on the network
    local = load_failure(ValueError("bad config"), "generator", "diffusers", {"pretrained": "/"}, "generator.")
    assert "Hugging Face Hub" not in str(local)
