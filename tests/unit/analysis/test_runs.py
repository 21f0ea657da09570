"""The run loader behind compare, ranks and report: a results file, its samples
files and the store reports, on a hand-made run in the layout lmms-eval 0.7.3 writes
(``<date>_results.json`` + ``<date>_samples_<task>.jsonl``, answers in ``filtered_resps``)."""

import json

import pytest

from lmms_genbench.analysis import RunError, load_run
from lmms_genbench.store import Chain

DATE = "20261123_174051"


def _chain(ns, i):
    return Chain(chain_id=f"doc{i}", direction="image_first", length=2, hops=3,
                 namespace=str(ns), folder=f"doc{i}-abc", task="t").to_json()


def _write_run(tmp_path, gc=0.5, report_gc=0.5):
    ns = tmp_path / "store"
    ns.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    results = {
        "results": {"t": {"alias": "t", "gc@1,none": gc, "gc@1_stderr,none": 0.1, "gc_fid@1,none": float("nan"),
                          "gc_fid@1_stderr,none": "N/A"}},
        "higher_is_better": {"t": {"gc@1": True, "gc_fid@1": False}},
        "config": {"model": "cycle", "model_args": "preset=smoke"},
    }
    (out / f"{DATE}_results.json").write_text(json.dumps(results))
    with open(out / f"{DATE}_samples_t.jsonl", "w") as fh:
        for i in range(3):
            fh.write(json.dumps({"doc_id": i, "filtered_resps": [_chain(ns, i)], "gc@1": "ok"}) + "\n")
    report = {"summary": {"gc@1": report_gc}, "scorer": {"name": "genception", "key": "k1"},
              "intervals": {"gc@1": {"low": 0.4, "high": 0.6}}, "estimators": {"gc@1": {"kind": "mean", "column": "gc"}}}
    (ns / "report-k1.json").write_text(json.dumps(report))
    (ns / "report.json").write_text(json.dumps({**report, "summary": {"gc@1": 0.9}, "scorer": {"name": "genception", "key": "k2"}}))
    return out


def test_load_run_reads_scores_stderr_chains_and_the_matching_store_report(tmp_path):
    run = load_run(_write_run(tmp_path))
    task = run.tasks["t"]
    assert task.scores == {"gc@1": 0.5, "gc_fid@1": None}
    assert task.stderr == {"gc@1": 0.1}
    assert task.higher_is_better == {"gc@1": True, "gc_fid@1": False}
    assert sorted(task.chains) == ["0", "1", "2"] and task.chains["0"].chain_id == "doc0"
    # the keyed report whose values are the run's, not the latest copy (rescored: 0.9)
    assert task.reports["genception"]["scorer"]["key"] == "k1"
    assert task.interval("gc@1") == {"low": 0.4, "high": 0.6}
    assert task.report_for("gc@1") is task.reports["genception"]
    assert run.label == "cycle (preset=smoke)"


def test_load_run_without_samples_still_gives_scores(tmp_path):
    out = _write_run(tmp_path)
    (out / f"{DATE}_samples_t.jsonl").unlink()
    task = load_run(out / f"{DATE}_results.json").tasks["t"]
    assert task.scores["gc@1"] == 0.5 and task.chains == {} and task.reports == {}


@pytest.mark.parametrize("content, needle", [("{", "not JSON"), ('{"x": 1}', "no 'results' mapping")])
def test_load_run_names_the_file_and_the_problem(tmp_path, content, needle):
    bad = tmp_path / f"{DATE}_results.json"
    bad.write_text(content)
    with pytest.raises(RunError, match=needle) as info:
        load_run(bad)
    assert str(bad) in str(info.value)
