"""A run's own measured rates (issue 24, item 5): the cycle model logs its engine figures to
lmms-eval's throughput log, the results file carries them, and the HTML report and
benchmarks/cost.py read them through one reader (analysis/rates.py)."""

import json

import pytest
from lmms_eval.models.model_utils import gen_metrics

from lmms_genbench.analysis.rates import rates_from_runs_jsonl, rates_from_throughput
from lmms_genbench.analysis.report import build_context, render
from lmms_genbench.analysis.runs import load_run
from lmms_genbench.engine.cycle import RunStats
from lmms_genbench.models.throughput import log_engine_run

from tests.support.chains import write_run


@pytest.fixture
def host_log():
    gen_metrics.reset_logged_metrics()
    yield
    gen_metrics.reset_logged_metrics()


def test_two_engine_runs_give_seconds_per_hop_through_the_hosts_summary(host_log):
    # hand-worked: describe 10 items in 5 s and 30 in 7 s -> 12 s / 40 = 0.3 s per hop;
    # draw 4 in 8 s and 0 -> 2.0 s per hop; the host averages per call, the ratio is of sums
    log_engine_run(RunStats(describe_items=10, describe_seconds=5.0, describe_words=100,
                            generate_items=4, generate_seconds=8.0))
    log_engine_run(RunStats(describe_items=30, describe_seconds=7.0, describe_words=300))
    summary = gen_metrics.summarize_logged_metrics()
    assert summary["total_gen_tokens"] == 600  # lmms-eval's space_tokenizer estimate: words x 1.5
    assert summary["total_elapsed_time"] == 12.0
    rates = rates_from_throughput(summary)
    assert rates["describe"]["seconds_per_item"] == pytest.approx(0.3)
    assert rates["draw"]["seconds_per_item"] == pytest.approx(2.0)
    assert rates["describe"]["items"] == 20  # mean items per call


def test_a_run_served_from_the_store_logs_nothing(host_log):
    assert log_engine_run(RunStats(chains=5, hops_reused=20)) is None
    assert gen_metrics.summarize_logged_metrics() == {}
    assert rates_from_throughput({}) == {} and rates_from_throughput(None) == {}


def test_a_host_log_that_refuses_the_figures_costs_a_warning_not_the_run(host_log, monkeypatch, caplog):
    def refuse(**_kwargs):
        raise TypeError("log_metrics() got an unexpected keyword argument 'additional_metrics'")

    monkeypatch.setattr(gen_metrics, "log_metrics", refuse)
    with caplog.at_level("WARNING", logger="lmms_genbench.models.throughput"):
        assert log_engine_run(RunStats(describe_items=3, describe_seconds=1.0)) is None
    assert "refused this run's figures (TypeError" in caplog.text and "runs.jsonl keeps them" in caplog.text


def test_the_runs_record_gives_the_last_computing_run(tmp_path):
    runs = [{"run": {"describe_items": 10, "describe_seconds": 5.0}},
            {"run": {"describe_items": 2, "describe_seconds": 3.0, "generate_items": 4, "generate_seconds": 8.0}},
            {"run": {"describe_items": 0, "generate_items": 0}}]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    rates = rates_from_runs_jsonl(tmp_path / "runs.jsonl")
    assert {s: r["seconds_per_item"] for s, r in rates.items()} == {"describe": 1.5, "draw": 2.0}


def test_the_report_shows_the_runs_own_rates(tmp_path):
    path = write_run(tmp_path, "r1")
    data = json.loads(path.read_text())
    data["throughput"] = {"avg_describe_seconds": 6.0, "avg_describe_items": 20.0,
                          "avg_generate_seconds": 4.0, "avg_generate_items": 2.0}
    path.write_text(json.dumps(data))
    other = write_run(tmp_path, "r2")  # a run without figures (not a cycle model, or nothing computed)
    context, _ = build_context([load_run(path), load_run(other)])
    assert context["runs"][0]["rates"] == "describe 0.3000 s/hop (20 hops per call) · draw 2.0000 s/hop (2 hops per call)"
    assert context["runs"][1]["rates"] == "—"
    html = render(context)
    assert "measured rates" in html and "describe 0.3000 s/hop" in html
