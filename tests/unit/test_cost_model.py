"""benchmarks/cost.py: exact call counts from the protocol, hours from rates, a run's own rates."""

import json

import pytest

from tests.support.scripts import ROOT, load_script


@pytest.fixture(scope="module")
def cost():
    return load_script("benchmarks/cost.py", "cost")


def test_counts_follow_the_protocol(cost):
    mme = cost.protocol_counts("mmeception")
    # 1,187 images, T=3: hops 1, 3, 5 describe and 2, 4, 6 draw; the seed and 3 drawings are encoded
    assert (mme["chains"], mme["hops"], mme["describe"], mme["draw"], mme["encode"]) == (1187, 6, 3561, 3561, 4748)
    nd = cost.protocol_counts("sdp_nocaps")
    # 400 text-first chains (T0 -> I1 ... T20) and 400 image-first (I0 -> T1 ... I20): 10 + 10 each
    assert (nd["describe"], nd["draw"]) == (8000, 8000)
    assert nd["encode"] == 400 * 10 + 400 * 11
    ge = cost.protocol_counts("sdp_geneval")
    assert (ge["describe"], ge["draw"], ge["detect"]) == (5530, 5530, 5530)


def test_counts_read_the_yaml(cost, tmp_path, monkeypatch):
    """Hops come from the task files (one home), through their include: chain."""
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "_base.yaml").write_text("generation_kwargs: {iterations: 3, direction: image_first}\n")
    (tmp_path / "t" / "task.yaml").write_text(
        "include: _base.yaml\nprocess_results: !function utils.x\ngeneration_kwargs: {iterations: 5}\n")
    monkeypatch.setattr(cost, "TASKS", tmp_path)
    monkeypatch.setitem(cost.DOCS, "mmeception", {"chains": 2, "yaml": "t/task.yaml"})
    c = cost.protocol_counts("mmeception")
    assert (c["hops"], c["describe"], c["draw"], c["encode"]) == (10, 10, 10, 12)


def test_hours_are_calls_times_rates(cost):
    counts = {"describe": 100, "draw": 50, "encode": 0, "tokens": 64}
    h = cost.hours(counts, {"describe": 0.36, "describe_tokens": 32, "draw": 7.2})
    assert h["describe"] == pytest.approx(100 * 0.36 * 2 / 3600)  # scaled to 64 tokens from 32
    assert h["draw"] == pytest.approx(0.1)
    assert h["total"] == pytest.approx(0.02 + 0.1)
    assert cost.hours(counts, {"describe": 1.0})["total"] is None  # a stage without a rate: no total


def test_rates_from_a_runs_record(cost, tmp_path):
    runs = [
        {"task": "t", "run": {"describe_items": 0, "generate_items": 0}},
        {"task": "t", "run": {"describe_items": 10, "describe_seconds": 5.0,
                              "generate_items": 4, "generate_seconds": 8.0}},
        {"task": "t", "run": {"describe_items": 0, "generate_items": 0}},  # a rerun that computed nothing
    ]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    rates = cost.rates_from_store(tmp_path)
    assert (rates["describe"], rates["draw"]) == (0.5, 2.0)


def test_rates_from_a_results_files_throughput(cost, tmp_path):
    path = tmp_path / "x_results.json"
    path.write_text(json.dumps({"throughput": {"avg_describe_seconds": 6.0, "avg_describe_items": 20.0,
                                               "avg_generate_seconds": 4.0, "avg_generate_items": 2.0}}))
    rates = cost.rates_from_results(path)
    assert (rates["describe"], rates["draw"]) == (0.3, 2.0)
    path.write_text(json.dumps({"results": {}}))  # not a cycle run: no figures, one line
    with pytest.raises(SystemExit, match="no describe or draw rate"):
        cost.rates_from_results(path)


def test_bad_rate_names_the_argument(cost, capsys):
    with pytest.raises(SystemExit) as exc:
        cost.main(["--rate", "paint=3"])
    assert exc.value.code == 2
    assert "--rate takes STAGE=SECONDS" in capsys.readouterr().err


@pytest.mark.parametrize("doc", ["README.md", "docs/cost.md"])
def test_the_docs_show_the_table_the_script_prints(cost, doc):
    """The cost table has one home, benchmarks/cost.py; the docs show what it prints."""
    rows = [line for line in cost.table(cost.RATES["h100-real-size"]).splitlines()]
    text = (ROOT / doc).read_text()
    assert all(row in text for row in rows), f"{doc}: rerun python benchmarks/cost.py and paste its table"
