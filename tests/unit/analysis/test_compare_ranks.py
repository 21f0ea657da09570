"""``compare`` and ``ranks`` on hand-made runs in the layout lmms-eval 0.7.3 writes
(``<date>_results.json`` + ``<date>_samples_<task>.jsonl``) with store reports in the
shape the scorers write (``doc_scores``, ``estimators``, ``intervals``, ``scorer.key``)."""

import json

import numpy as np
import pytest

from lmms_genbench.analysis import load_run
from lmms_genbench.analysis.compare import CompareError, compare_runs
from lmms_genbench.analysis.ranks import RanksError, rank_runs
from lmms_genbench.cli import main
from lmms_genbench.store import Chain

DATE = "20261123_000000"
SPEC = {"kind": "mean", "column": "gc"}


def make_run(root, name, gc, *, describer="d0", generator="g0", key="k1", ids=None, length=6, prompt="draw {description}"):
    """A one-task run whose per-doc ``gc`` column is ``gc``; returns its results file."""
    ids = ids or [f"doc{i:02d}" for i in range(len(gc))]
    ns = root / "artifacts" / describer / generator / f"t-{name}"
    ns.mkdir(parents=True)
    out = root / name
    out.mkdir()
    mean = float(np.mean(gc))
    results = {
        "results": {"t": {"alias": "t", "gc@3,none": mean, "gc@3_stderr,none": 0.01, "n_scored,none": len(gc)}},
        "higher_is_better": {"t": {"gc@3": True, "n_scored": True}},
        "configs": {"t": {"generation_kwargs": {"iterations": 3, "direction": "image_first", "generate_prompt": prompt}}},
        "config": {"model": "cycle", "model_args": f"run={name}"},
    }
    (out / f"{DATE}_results.json").write_text(json.dumps(results))
    with open(out / f"{DATE}_samples_t.jsonl", "w") as fh:
        for i, cid in enumerate(ids):
            chain = Chain(chain_id=cid, direction="image_first", length=length, hops=length + 1,
                          namespace=str(ns), folder=f"{cid}-f", task="t")
            fh.write(json.dumps({"doc_id": i, "filtered_resps": [chain.to_json()]}) + "\n")
    report = {
        "summary": {"gc@3": mean, "n_scored": len(gc)},
        "scorer": {"name": "genception", "key": key},
        "doc_scores": {"chain_ids": ids, "columns": {"gc": list(map(float, gc))}},
        "estimators": {"gc@3": SPEC},
        "intervals": {"gc@3": {"low": mean - 0.1, "high": mean + 0.1}},
    }
    (ns / f"report-{key}.json").write_text(json.dumps(report))
    return out / f"{DATE}_results.json"


def test_compare_pairs_docs_by_id_and_finds_a_real_difference(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.8, size=40)
    a = load_run(make_run(tmp_path, "a", base))
    b = load_run(make_run(tmp_path, "b", base + 0.05 + rng.normal(0, 0.01, size=40), describer="d1"))
    c = compare_runs(a, b, "t")
    gc = next(m for m in c.metrics if m.metric == "gc@3")
    assert gc.diff == pytest.approx(b.tasks["t"].scores["gc@3"] - a.tasks["t"].scores["gc@3"])
    assert 0.04 < gc.low < gc.diff < gc.high < 0.06  # paired: the doc-to-doc spread cancels
    assert gc.p_value < 0.01 and gc.n == 40


def test_compare_of_a_run_with_itself_is_zero_with_p_one(tmp_path):
    gc = np.linspace(0, 1, 20)
    a = load_run(make_run(tmp_path, "a", gc))
    b = load_run(make_run(tmp_path, "b", gc, describer="d1"))
    m = next(m for m in compare_runs(a, b, "t").metrics if m.metric == "gc@3")
    assert (m.diff, m.low, m.high) == (0.0, 0.0, 0.0) and m.p_value == pytest.approx(1.0)


@pytest.mark.parametrize("change, needle", [
    ({"ids": [f"x{i}" for i in range(10)]}, "did not use the same docs"),
    ({"length": 4}, "different protocols"),
    ({"prompt": "other {description}"}, "different protocols"),
    ({"key": "k2"}, "scored differently"),
])
def test_compare_refuses_runs_that_asked_another_question(tmp_path, change, needle):
    a = load_run(make_run(tmp_path, "a", np.ones(10)))
    b = load_run(make_run(tmp_path, "b", np.ones(10), describer="d1", **change))
    with pytest.raises(CompareError, match=needle):
        compare_runs(a, b, "t")


def test_compare_command_prints_the_table_and_exits_1_when_refused(tmp_path, capsys):
    a = make_run(tmp_path, "a", np.linspace(0, 1, 10))
    b = make_run(tmp_path, "b", np.linspace(0, 1, 10) + 0.1, describer="d1")
    assert main(["compare", str(a), str(b), "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert "gc@3" in out and "+0.1000" in out
    assert json.loads((tmp_path / "c.json").read_text())[0]["task"] == "t"
    other = make_run(tmp_path, "o", np.ones(10), describer="d2", key="k9")
    assert main(["compare", str(a), str(other)]) == 1
    assert "scored differently" in capsys.readouterr().err


def test_ranks_reports_each_ranking_and_kendall_tau(tmp_path, capsys):
    # three describers under two generators: g1 swaps the last two (tau = 1/3)
    scores = {"g0": {"d0": 0.9, "d1": 0.6, "d2": 0.3}, "g1": {"d0": 0.8, "d1": 0.2, "d2": 0.4}}
    files = [make_run(tmp_path, f"{g}-{d}", np.full(5, v), describer=d, generator=g)
             for g, row in scores.items() for d, v in row.items()]
    r = rank_runs([load_run(f) for f in files], "t", "gc@3")
    assert [d for d, _ in r.rankings[0].order] == ["d0", "d1", "d2"]
    assert [d for d, _ in r.rankings[1].order] == ["d0", "d2", "d1"]
    assert r.taus[0]["tau"] == pytest.approx(1 / 3) and r.taus[0]["n"] == 3
    assert main(["ranks", *map(str, files), "--task", "t", "--metric", "gc@3"]) == 0
    assert "+0.333 over 3 describers" in capsys.readouterr().out


def test_ranks_needs_two_conditions(tmp_path):
    files = [make_run(tmp_path, d, np.full(5, v), describer=d) for d, v in (("d0", 0.1), ("d1", 0.2))]
    with pytest.raises(RanksError, match="share one condition"):
        rank_runs([load_run(f) for f in files], "t", "gc@3")
