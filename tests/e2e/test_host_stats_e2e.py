"""lmms-eval's own statistics on our tasks, through the real command.

Run A scores ``mmeception_smoke`` and ``sdp_smoke``; run B repeats each task with shorter
descriptions (``max_new_tokens=12``) and ``--baseline`` A's samples file of that task
(lmms-eval takes one baseline file per command and pairs it with every task by ``doc_id``, so
one command per task). B's results carry lmms-eval's paired t-test; it is checked against
``lmms-genbench compare`` (our paired bootstrap) on the same two runs. A score-only rerun over
A's store then logs to W&B (offline) and pushes to a local stand-in of the hub.
"""

import glob
import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.support.lmms_eval_runs import BIN, results_file, run, samples


TASKS = ("mmeception_smoke", "sdp_smoke")
HEADLINE = {"mmeception_smoke": "gc@3", "sdp_smoke": "mcd_avg"}
CLUSTER = {"mmeception_smoke": "category", "sdp_smoke": "source"}


def _eval(tmp, art, out, tasks, *extra, log="lmms_eval.log", prefix=(), **env):
    cmd = [*(prefix or [str(BIN / "lmms-eval")]), "--model", "cycle", "--model_args", f"preset=smoke,artifacts={art}",
           "--tasks", ",".join(tasks), "--output_path", str(out), "--log_samples", *extra]
    proc = run(cmd, tmp, log=log, **env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _samples_file(out, task):
    files = glob.glob(str(Path(out) / "**" / f"*_samples_{task}.jsonl"), recursive=True)
    assert len(files) == 1, files
    return files[0]


@pytest.fixture(scope="module")
def paired(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("host_stats")
    _eval(tmp, tmp / "artA", tmp / "outA", TASKS, log="a.log")
    for task in TASKS:
        _eval(tmp, tmp / "artB", tmp / f"outB_{task}", (task,), "--gen_kwargs", "max_new_tokens=12",
              "--baseline", _samples_file(tmp / "outA", task), log=f"b_{task}.log")
    return tmp


def _scores(out, task):
    return {s["doc_id"]: s for s in samples(out, task)}


@pytest.mark.parametrize("task", TASKS)
def test_each_sample_carries_its_score_and_cluster_and_they_make_up_the_headline(paired, task):
    rows = _scores(paired / "outA", task)
    results = results_file(paired / "outA")[1]["results"][task]
    assert all(isinstance(s["score"], float) and isinstance(s[CLUSTER[task]], str) for s in rows.values())
    by_cluster = {}
    for s in rows.values():
        by_cluster.setdefault(s[CLUSTER[task]], []).append(s["score"])
    if task == "sdp_smoke":  # MCD_avg: as many text-first as image-first chains, so the plain mean
        assert np.mean([s["score"] for s in rows.values()]) == pytest.approx(results["mcd_avg,none"], abs=1e-12)
    else:  # GC@T: the mean over categories of each category's mean
        assert np.mean([np.mean(v) for v in by_cluster.values()]) == pytest.approx(results["gc@3,none"], abs=1e-12)
    # lmms-eval's CLT standard errors of the headline, from the per-doc scores and clusters
    values = [s["score"] for s in rows.values()]
    clt = results[f"{HEADLINE[task]}_stderr_clt,none"]
    assert clt == pytest.approx(np.std(values, ddof=1) / math.sqrt(len(values)))
    assert isinstance(results[f"{HEADLINE[task]}_stderr_clustered,none"], float)


@pytest.mark.parametrize("task", TASKS)
def test_baseline_prints_a_paired_result_that_agrees_with_compare(paired, task):
    from lmms_genbench.analysis.compare import compare_runs
    from lmms_genbench.analysis.runs import load_run
    from lmms_genbench.metrics.functional.intervals import paired_bootstrap

    out_b = paired / f"outB_{task}"
    res = results_file(out_b)[1]["results"][task]
    for key in ("paired_baseline", "paired_baseline_score", "paired_ci_lower", "paired_ci_upper", "paired_pvalue"):
        assert key in res, sorted(res)
    log = (paired / f"b_{task}.log").read_text()
    assert f"[Baseline] {task}: diff=" in log

    a, b = _scores(paired / "outA", task), _scores(out_b, task)
    assert a.keys() == b.keys()
    diffs = [b[d]["score"] - a[d]["score"] for d in a]
    assert res["paired_baseline_score"] == pytest.approx(100 * np.mean([s["score"] for s in a.values()]))
    t_diff = (res["paired_ci_lower"] + res["paired_ci_upper"]) / 200  # the t-interval is symmetric
    assert t_diff == pytest.approx(np.mean(diffs), abs=1e-12)
    assert np.mean(diffs) != 0  # the runs differ

    c = compare_runs(load_run(paired / "outA"), load_run(out_b), task)
    ours = next(m for m in c.metrics if m.metric == HEADLINE[task])
    if task == "sdp_smoke":  # both estimate the mean of per-chain MCDs: the same point difference
        assert ours.diff == pytest.approx(t_diff, abs=1e-12)
    # the same per-doc scores under a plain mean: our paired bootstrap next to lmms-eval's t-interval
    key = "gc" if task == "mmeception_smoke" else "s"
    cols_a = {key: [a[d]["score"] for d in sorted(a)]}
    cols_b = {key: [b[d]["score"] for d in sorted(a)]}
    boot = paired_bootstrap(cols_b, cols_a, {"kind": "mean", "column": key}, n_resamples=4000, level=0.95, seed=0)
    assert boot["diff"] == pytest.approx(t_diff, abs=1e-12)
    t_low, t_high = res["paired_ci_lower"] / 100, res["paired_ci_upper"] / 100
    width = t_high - t_low
    # percentile bootstrap vs t on 9 or 18 docs: the bootstrap is a little narrower (no t
    # quantile, divides by n not n - 1); the ends agree to a fraction of the width
    assert abs(boot["low"] - t_low) < 0.25 * width and abs(boot["high"] - t_high) < 0.25 * width
    if task == "sdp_smoke":  # and ours, resampled within directions, is close to the t-interval too
        assert abs(ours.low - t_low) < 0.25 * width and abs(ours.high - t_high) < 0.25 * width
    (paired / f"agreement_{task}.json").write_text(json.dumps({
        "t_test": {"diff": t_diff, "low": t_low, "high": t_high, "p": res["paired_pvalue"]},
        "bootstrap_mean": {k: boot[k] for k in ("diff", "low", "high", "p_value")},
        "compare_headline": ours.to_dict(),
    }, indent=2))


def _wandb_offline_values(run_dir):
    """History and summary values of an offline W&B run, read from its ``run-*.wandb`` log."""
    from wandb.proto import wandb_internal_pb2 as pb
    from wandb.sdk.internal import datastore

    store = datastore.DataStore()
    store.open_for_scan(glob.glob(str(Path(run_dir) / "run-*.wandb"))[0])
    history, summary = {}, {}
    while (data := store.scan_data()) is not None:
        record = pb.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        items = record.history.item if kind == "history" else record.summary.update if kind == "summary" else ()
        for item in items:
            (history if kind == "history" else summary)[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return history, summary


def test_wandb_offline_and_a_hub_push_carry_the_headline_scores(paired):
    """A score-only rerun over A's store (every hop reused) with W&B offline and the hub
    uploads redirected into a folder (tests/support/hub_push_stub.py)."""
    import sys

    tmp, hub, task = paired, paired / "hub", "mmeception_smoke"
    stub = [sys.executable, str(Path(__file__).resolve().parents[1] / "support" / "hub_push_stub.py"), str(hub)]
    _eval(tmp, tmp / "artA", tmp / "outT", (task,), "--wandb_args", "project=genbench-test,name=smoke-a",
          "--hf_hub_log_args", "hub_results_org=stub-org,push_results_to_hub=True,push_samples_to_hub=True",
          log="trackers.log", prefix=stub, WANDB_MODE="offline", WANDB_DIR=str(tmp / "wb"), HF_TOKEN="stub-token")
    log = (tmp / "trackers.log").read_text()
    assert "Logging to Weights and Biases failed" not in log
    ours = results_file(tmp / "outT")[1]["results"][task]
    assert ours["gc@3,none"] == results_file(tmp / "outA")[1]["results"][task]["gc@3,none"]

    runs = glob.glob(str(tmp / "wb" / "wandb" / "offline-run-*"))
    assert len(runs) == 1, runs
    history, summary = _wandb_offline_values(runs[0])
    for name in ("gc@3", "gc@3_stderr", "gc@3_stderr_clt"):
        assert summary[f"{task}/{name}"] == pytest.approx(ours[f"{name},none"]), name
        assert history[f"{task}/{name}"] == pytest.approx(ours[f"{name},none"]), name

    repo = hub / "stub-org" / "lmms-eval-results-private"
    pushed = json.loads(next(repo.glob("**/*_results.json")).read_text())["results"][task]
    assert pushed["gc@3,none"] == ours["gc@3,none"]
    rows = [json.loads(x) for x in next(repo.glob(f"**/*_samples_{task}.jsonl")).read_text().splitlines()]
    assert len(rows) == 9 and all(isinstance(r["score"], float) for r in rows)
