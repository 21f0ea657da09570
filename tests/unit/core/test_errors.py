"""Errors a person can act on, through the real commands: a model or scorer network
that does not load, a task run on the wrong model type, a task that produced no
score, and the lmms-genbench subcommands. Each ends with one line naming the cause
and the fix, with no retried (RetryError) traceback. Here the line itself and the
lmms-genbench subcommands; through the lmms-eval command: tests/e2e/test_errors_e2e.py."""

import json
import subprocess
import sys

from tests.support.lmms_eval_runs import last_line, offline_env


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
    last = last_line(proc.stderr)
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
    assert last_line(proc.stderr).startswith("lmms-genbench chef summary: error: NotADirectoryError: ")
    debug = _genbench(tmp_path, "--debug", "chef", "summary", str(results), "--out", str(blocker / "sub"))
    assert debug.returncode == 1 and "Traceback" in debug.stderr


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
