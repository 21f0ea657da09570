"""Past one machine, end to end through lmms-eval on one host: a two-machine accelerate
launch, and sliced jobs (shard=i/n) whose stores merge into exactly a single run's.

Every run draws and describes one item per call (generator.batch_size=1, describer_batch=1):
the tiny SD pipeline's pixels depend on its batch in the last bit, so only then are the
stores of differently split runs equal byte for byte, and their scores exactly equal."""

import json
import socket
import subprocess

import pytest

from tests.support.lmms_eval_runs import BIN, offline_env, results_file, run


TASK = "mmeception_smoke"
ONE_ITEM = "generator.batch_size=1,describer_batch=1"


def _metrics(out):
    return {k.split(",")[0]: v for k, v in results_file(out)[1]["results"][TASK].items() if "," in k}


def _runs(store):
    """Every runs.jsonl record of the store's one namespace of the task."""
    (path,) = store.rglob("runs.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _hops(store):
    """chain folder name -> its hops' hashes, as hops.jsonl records them."""
    return {p.parent.name: [json.loads(line)["sha256"] for line in p.read_text().splitlines()]
            for p in store.rglob("hops.jsonl")}


def _lmms_eval(tmp_path, store, out, extra="", log="lmms_eval.log", limit=None):
    cmd = [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", f"preset=smoke,{ONE_ITEM},artifacts={store}{extra}",
           "--tasks", TASK, "--output_path", str(out), *(["--limit", str(limit)] if limit else [])]
    proc = run(cmd, tmp_path, log=log, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """One process, every doc: the reference."""
    tmp = tmp_path_factory.mktemp("single")
    _lmms_eval(tmp, tmp / "art", tmp / "out")
    return tmp


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.distributed
def test_two_machines_on_one_host_give_a_single_runs_scores_with_each_chain_computed_once(tmp_path, single):
    """`--num_machines 2`, one process each, machine ranks 0 and 1, the main process on
    127.0.0.1 (gloo on CPU), one shared store: what two nodes on a shared filesystem run."""
    port, store = _free_port(), tmp_path / "art"
    procs = []
    for rank in (0, 1):
        cmd = [str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_machines", "2", "--num_processes", "2",
               "--machine_rank", str(rank), "--main_process_ip", "127.0.0.1", "--main_process_port", str(port),
               "--mixed_precision", "no", "--dynamo_backend", "no",
               "-m", "lmms_eval", "--model", "cycle", "--model_args", f"preset=smoke,{ONE_ITEM},artifacts={store}",
               "--tasks", TASK, "--output_path", str(tmp_path / "out")]
        log = open(tmp_path / f"machine{rank}.log", "w")
        procs.append(subprocess.Popen(cmd, cwd=tmp_path, env=offline_env(tmp_path, ACCELERATE_USE_CPU="true"),
                                      stdout=log, stderr=subprocess.STDOUT, text=True))
    codes = [p.wait(timeout=1200) for p in procs]
    assert codes == [0, 0], (tmp_path / "machine0.log").read_text()[-3000:]
    assert _metrics(tmp_path / "out") == _metrics(single / "out")  # exactly
    records = _runs(store)
    assert sorted(r["rank"] for r in records) == [0, 1]
    reference = _runs(single / "art")[0]
    assert sum(r["chains"] for r in records) == reference["chains"] == 9
    assert sum(r["hops_computed"] for r in records) == reference["hops_computed"] and not any(r["hops_reused"] for r in records)
    # each chain once, and byte for byte the single run's
    assert _hops(store) == _hops(single / "art")


def test_sliced_jobs_merge_into_a_store_that_scores_exactly_like_a_single_run(tmp_path, single):
    """shard=0/2 and shard=1/2 into separate stores (two nodes without a shared filesystem),
    `lmms-genbench store merge`, then one run over the merged store: nothing computed."""
    procs = []
    for i in (0, 1):
        cmd = [str(BIN / "lmms-eval"), "--model", "cycle",
               "--model_args", f"preset=smoke,{ONE_ITEM},artifacts={tmp_path / f'job{i}'},shard={i}/2",
               "--tasks", TASK, "--output_path", str(tmp_path / f"out{i}"), "--log_samples"]
        log = open(tmp_path / f"job{i}.log", "w")
        procs.append(subprocess.Popen(cmd, cwd=tmp_path, env=offline_env(tmp_path), stdout=log,
                                      stderr=subprocess.STDOUT, text=True))
    assert [p.wait(timeout=1200) for p in procs] == [0, 0], (tmp_path / "job0.log").read_text()[-3000:]
    jobs = [_runs(tmp_path / f"job{i}")[0] for i in (0, 1)]
    reference = _runs(single / "art")[0]
    assert [j["shard"] for j in jobs] == ["0/2", "1/2"]
    assert sum(j["chains"] for j in jobs) == reference["chains"] == 9 and all(j["chains"] for j in jobs)
    assert sum(j["hops_computed"] for j in jobs) == reference["hops_computed"]
    assert set(_hops(tmp_path / "job0")).isdisjoint(_hops(tmp_path / "job1"))
    # a job's own results score its shard; the other docs are counted apart by their reason
    for i, job in enumerate(jobs):
        part = _metrics(tmp_path / f"out{i}")
        assert part["n_scored"] == job["chains"] and part["n_failed"] == 9 - job["chains"]
        report = json.loads(next((tmp_path / f"job{i}").rglob("report.json")).read_text())
        assert report["summary"]["failure_reasons"] == {"shard failed at hop 0": 9 - job["chains"]}

    merged = tmp_path / "merged"
    proc = subprocess.run([str(BIN / "lmms-genbench"), "store", "merge", str(tmp_path / "job0"), str(tmp_path / "job1"),
                           "-o", str(merged)], capture_output=True, text=True, env=offline_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "9 chains, 63 hops merged" in proc.stdout and "left out (not verified)" not in proc.stdout
    assert _hops(merged) == _hops(single / "art")

    _lmms_eval(tmp_path, merged, tmp_path / "out_merged", log="score.log")
    score_run = _runs(merged)[-1]
    assert score_run["hops_computed"] == 0 and score_run["hops_reused"] == 9 * 7 and "shard" not in score_run
    assert _metrics(tmp_path / "out_merged") == _metrics(single / "out")  # exactly
    verified = subprocess.run([str(BIN / "lmms-genbench"), "store", "verify", str(merged)],
                              capture_output=True, text=True, env=offline_env(tmp_path))
    assert verified.returncode == 0 and "9 chains, 63 hops verified, 0 chains with refused hops" in verified.stdout
