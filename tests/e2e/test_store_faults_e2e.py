"""Store faults end to end through the real `lmms-eval` command: an always-failing describer
endpoint (a stub on 127.0.0.1) leaves every doc failed with the endpoint's reason and nothing
stored; once healthy, a rerun computes and scores them. A damaged hop in a finished store, and a
chain that lost its records and then had a hop edited (also with its namespace's marker lost),
are caught (``store verify``) and recomputed, and the rerun reproduces the clean run's scores."""

import json

import pytest

from tests.support.lmms_eval_runs import BIN, results_file, run
from tests.support.openai_stub import StubHandler, chat_completion, serve


KEY = "sk-stub-0123456789abcdefghij"
REPLY = "a photo of a small object on a plain table"


class _Endpoint(StubHandler):
    def answer(self, body):  # chat completions; the server's `healthy` decides
        if not self.server.healthy:
            return 500, {"error": {"message": f"upstream down (key {KEY})"}}
        return 200, chat_completion("stub", REPLY)


@pytest.fixture
def endpoint():
    server = serve(_Endpoint)
    server.healthy = False
    yield server
    server.shutdown()


def _run(tmp_path, name, art, model_args, **env):
    out = tmp_path / name
    proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", f"{model_args},artifacts={art}",
                "--tasks", "mmeception_smoke", "--limit", "3", "--output_path", str(out)],
               tmp_path, log=f"{name}.log", timeout=900, **env)
    return proc, {k.split(",")[0]: v for k, v in results_file(out)[1]["results"]["mmeception_smoke"].items() if "," in k}


def test_an_always_failing_describer_fails_every_doc_and_a_healthy_rerun_scores(tmp_path, endpoint):
    art = tmp_path / "art"
    args = ("preset=smoke,describer=openai,describer.model_version=stub,describer.max_retries=1,"
            "describer.retry_backoff_s=0")
    env = dict(OPENAI_API_KEY=KEY, OPENAI_API_BASE=f"http://127.0.0.1:{endpoint.server_port}/v1",
               NO_PROXY="127.0.0.1,localhost")
    proc, metrics = _run(tmp_path, "down", art, args, **env)
    assert metrics["n_scored"] == 0 and metrics["n_failed"] == 3, proc.stderr[-3000:]
    assert not list(art.rglob("001.txt"))  # no failure text stored as a description
    stored = b"".join(p.read_bytes() for p in art.rglob("*") if p.is_file())
    assert b"LMMS_EVAL_REQUEST_FAILED" not in stored and KEY.encode() not in stored
    report = json.loads(next(art.rglob("report.json")).read_text())
    reasons = json.dumps(report["failed_docs"])
    assert "upstream down" in reasons and KEY not in reasons  # the endpoint's reason, scrubbed
    assert "mmeception_smoke" in proc.stderr and "3 failed" in proc.stderr  # the run's record, at INFO

    endpoint.healthy, calls = True, endpoint.count
    proc, metrics = _run(tmp_path, "up", art, args, **env)
    assert metrics["n_scored"] == 3 and metrics["n_failed"] == 0, proc.stderr[-3000:]
    assert endpoint.count - calls == 3 * 3  # three descriptions per chain, asked again


@pytest.mark.parametrize("marker", ["kept", "lost"])
def test_a_damaged_store_is_repaired_and_the_rerun_reproduces_the_clean_scores(tmp_path, marker):
    """``lost``: the namespace's store.json deleted too (issue 43): its other chains kept their
    records, so the store is still one that keeps records and the edited hop is refused."""
    art = tmp_path / "art"
    _, clean = _run(tmp_path, "clean", art, "preset=smoke")
    chain = sorted(p.parent for p in art.rglob("hops.jsonl"))[1]
    (chain / "004.png").write_bytes(b"")  # a truncated drawing
    (chain / "005.txt").write_text("an edited description", encoding="utf-8")
    lost = sorted(p.parent for p in art.rglob("hops.jsonl"))[2]  # records lost, then a hop edited
    (lost / "hops.jsonl").unlink()
    (lost / "001.txt").write_text("an edited description", encoding="utf-8")
    if marker == "lost":
        (lost.parent / "store.json").unlink()
    verify = run([str(BIN / "lmms-genbench"), "store", "verify", str(art)], tmp_path, log="verify.log")
    assert verify.returncode == 1 and f"{lost}: hop 0 has no record" in verify.stdout, verify.stdout
    assert (f"{lost.parent}: its store.json marker was lost" in verify.stdout) == (marker == "lost"), verify.stdout
    assert "2 chains with refused hops" in verify.stdout
    proc, again = _run(tmp_path, "again", art, "preset=smoke")
    assert again == clean, proc.stderr[-3000:]
    runs = [json.loads(line) for line in next(art.rglob("runs.jsonl")).read_text().splitlines()]
    # hops 4, 5, 6 of one chain; hops 1-6 of the other (its seed comes from the doc again)
    assert runs[-1]["hops_computed"] == 3 + 6 and runs[-1]["chains_repaired"] == 2
    assert sorted(p.name for p in (chain / "quarantine").rglob("00*")) == ["004.png", "005.txt", "006.png"]
    assert (lost.parent / "store.json").is_file()  # written again once every chain is recorded


def _read_only_mount_works(folder):
    """Whether this machine lets a mount namespace bind ``folder`` read-only (root, Linux)."""
    import shutil
    import subprocess

    if not shutil.which("unshare"):
        return False
    probe = (f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && "
             f"! touch {folder}/.probe 2>/dev/null")
    return subprocess.run(["unshare", "-m", "sh", "-c", probe], capture_output=True).returncode == 0


def test_a_complete_store_on_a_read_only_filesystem_scores_without_writing(tmp_path):
    art = tmp_path / "art"
    _, clean = _run(tmp_path, "clean", art, "preset=smoke")
    if not _read_only_mount_works(art):
        pytest.skip("no read-only bind mount here (needs root and `unshare -m`)")
    out = tmp_path / "ro"
    command = (f"mount --bind {art} {art} && mount -o remount,bind,ro {art} && "
               f"{BIN / 'lmms-eval'} --model cycle --model_args preset=smoke,artifacts={art} "
               f"--tasks mmeception_smoke --limit 3 --output_path {out}")
    proc = run(["unshare", "-m", "sh", "-c", command], tmp_path, log="ro.log", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = {k.split(",")[0]: v for k, v in results_file(out)[1]["results"]["mmeception_smoke"].items() if "," in k}
    assert metrics == clean


def test_a_key_given_in_model_args_reaches_no_file_and_no_output_line(tmp_path, endpoint):
    """Issue 43: `describer.api_key=sk-...` on the command line (no key in the environment) is
    masked in the results file's config (model_args, resolved_cli_args), lmms-eval's closing
    summary line, the samples, the store and the logs; one warning line says that `ps` shows it."""
    endpoint.healthy = True
    key = "sk-cmdline-0123456789abcdefghijKLMN"
    art, out = tmp_path / "art", tmp_path / "out"
    args = f"preset=smoke,describer=openai,describer.model_version=stub,describer.api_key={key},artifacts={art}"
    proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args, "--tasks", "mmeception_smoke",
                "--limit", "2", "--output_path", str(out), "--log_samples"], tmp_path, log="run.log", timeout=900,
               OPENAI_API_BASE=f"http://127.0.0.1:{endpoint.server_port}/v1", NO_PROXY="127.0.0.1,localhost")
    path, results = results_file(out)
    assert results["results"]["mmeception_smoke"]["n_scored,none"] == 2, proc.stderr[-3000:]
    assert "describer.api_key=***" in results["config"]["model_args"]
    assert endpoint.count > 0  # the key was used for the requests
    leaked = [str(p) for p in tmp_path.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    assert leaked == [] and key not in proc.stdout and key not in proc.stderr, leaked
    summary = [line for line in proc.stdout.splitlines() if line.startswith("cycle (")]
    assert summary and "describer.api_key=***" in summary[0], proc.stdout[-2000:]
    warned = [line for line in proc.stderr.splitlines() if "visible to other users of this machine" in line]
    assert len(warned) == 1 and warned[0].startswith("lmms-genbench: warning: describer.api_key given"), warned
