"""Reports beside the chains: keyed by scorer settings (a rerun with other networks
writes beside the first), ``report.json`` the latest, each failed doc listed with its
reason (bounded), a task with no score said so, and a network that does not load
named in one line."""

import json
import logging

import pytest

import lmms_genbench.metrics.networks.encoders as encoders
from lmms_genbench.core import state
from lmms_genbench.core.errors import ActionableError
from lmms_genbench.metrics.scorers import base, settings
from lmms_genbench.metrics.scorers.genception import GenCeptionScorer
from lmms_genbench.metrics.scorers.records import MetricItem
from tests.support.chains import genception_chain as _chain
from tests.support.prepare_checks import check_prepared_once, count_calls

RED = (255, 0, 0)


def _records(tmp_path):
    return [
        _chain(tmp_path, "c", "a", [RED] * 4),
        _chain(tmp_path, "c", "b", [RED] * 4),
        _chain(tmp_path, "c", "d", [RED, RED], status="failed"),
        _chain(tmp_path, "c", "e", [RED] * 3),  # 2 of 3 iterations: refused by the scorer
    ]


def _aggregate(scorer, records, metric="gc@3"):
    return scorer.aggregate([MetricItem(metric, r) for r in records])


def test_reports_are_keyed_by_scorer_and_list_each_failed_doc(tmp_path, offline, monkeypatch):
    records = _records(tmp_path)
    assert _aggregate(GenCeptionScorer(), records) == pytest.approx(1.0)
    ns = tmp_path / "ns"
    first = sorted(p.name for p in ns.glob("report*.json"))
    assert len(first) == 2 and "report.json" in first
    latest = json.loads((ns / "report.json").read_text())
    assert latest["failed_docs"] == [
        {"chain_id": "d", "reason": "describe failed at hop 1: empty description"},
        {"chain_id": "e", "reason": "chain has 2 of 3 iterations"},
    ]
    assert latest["failed_docs_total"] == 2 and latest["summary"]["n_failed"] == 2
    assert latest["scorer"]["name"] == "genception" and latest["scorer"]["settings"]["fid_features"] is None
    keyed = ns / f"report-{latest['scorer']['key']}.json"
    assert json.loads(keyed.read_text()) == latest

    # another similarity encoder: its own report beside the first, report.json follows it
    monkeypatch.setenv("LMMS_GENBENCH_IMAGE_ENCODER", "another-encoder")
    _aggregate(GenCeptionScorer(), records)
    names = sorted(p.name for p in ns.glob("report*.json"))
    assert len(names) == 3 and set(first) < set(names)
    assert json.loads((ns / "report.json").read_text())["scorer"]["settings"]["image_encoder"] == "another-encoder"
    assert json.loads(keyed.read_text()) == latest  # the first one is untouched

    # device and batch size change no number: same key
    monkeypatch.setenv("LMMS_GENBENCH_SCORER_BATCH", "3")
    _aggregate(GenCeptionScorer(), records)
    assert len(list(ns.glob("report*.json"))) == 3


def test_the_failed_doc_list_is_bounded(tmp_path, offline, monkeypatch):
    monkeypatch.setattr(base, "MAX_FAILED_LISTED", 1)
    _aggregate(GenCeptionScorer(), _records(tmp_path))
    report = json.loads((tmp_path / "ns" / "report.json").read_text())
    assert [f["chain_id"] for f in report["failed_docs"]] == ["d"] and report["failed_docs_total"] == 2


def test_a_task_with_no_score_says_so(tmp_path, offline, caplog):
    records = [_chain(tmp_path, "c", "d", [RED, RED], status="failed")]
    with caplog.at_level(logging.WARNING, logger=base.__name__):
        assert _aggregate(GenCeptionScorer(), records, "n_scored") == 0
    assert "test produced no score: 0 of 1 docs scored (describe failed at hop 1 (1))" in caplog.text
    state.put("no_score", None)  # else the line is repeated at pytest's exit, as at lmms-eval's


def test_a_network_that_does_not_load_is_one_line_naming_its_variable(tmp_path, monkeypatch):
    def missing(spec, **_):
        raise OSError(f"Incorrect path_or_model_id: '{spec}'. Please provide either the path to a local folder")

    monkeypatch.setattr(encoders, "get_image_encoder", missing)
    monkeypatch.setenv("LMMS_GENBENCH_FID_FEATURES", "none")
    monkeypatch.setenv("LMMS_GENBENCH_IMAGE_ENCODER", "/nonexistent")
    with pytest.raises(ActionableError) as err:
        _aggregate(GenCeptionScorer(), _records(tmp_path))
    line = str(err.value)
    assert "\n" not in line and line.startswith(
        "lmms-genbench: error: the genception scorer of test could not load its image_encoder network "
        "'/nonexistent' (set by LMMS_GENBENCH_IMAGE_ENCODER=/nonexistent) (OSError: Incorrect path_or_model_id")
    assert line.endswith(
        "Fix: point LMMS_GENBENCH_IMAGE_ENCODER at a network that loads here (a local folder, or a hub id whose "
        "weights are downloaded), or unset it, or score offline with the smoke networks (--model_args "
        "preset=smoke, or generation_kwargs.scorer: {preset: smoke})")
    # a SystemExit: lmms-eval neither retries it nor catches it, the process exits 1
    assert isinstance(err.value, SystemExit) and not isinstance(err.value, Exception)


def _strict_load(path):
    def refuse(token):
        raise AssertionError(f"bare {token} in {path}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_a_report_holds_intervals_and_says_why_each_null_is_null(tmp_path, offline):
    records = _records(tmp_path)
    assert _aggregate(GenCeptionScorer(), records, "gc@3_stderr") == pytest.approx(0.0, abs=1e-12)
    report = _strict_load(tmp_path / "ns" / "report.json")
    assert report["bootstrap"] == {"resamples": 1000, "seed": 0, "level": 0.95}
    assert report["intervals"]["gc@3"]["low"] == pytest.approx(1.0) == report["intervals"]["gc@3"]["high"]
    assert report["doc_scores"]["chain_ids"] == ["a", "b"]  # scored docs only
    assert report["estimators"]["gc@3"] == {"kind": "macro", "column": "gc", "by": "category"}
    # FID is off here: null in the category table, with the reason
    assert report["categories"]["c"]["gc_fid@3"] is None
    assert report["null_reasons"]["/categories/c/gc_fid@3"] == "FID is off (fid_features: none)"


def test_bootstrap_settings_come_from_the_task_and_are_checked():
    assert settings.bootstrap_settings({}) == settings.BOOTSTRAP_DEFAULTS
    assert settings.bootstrap_settings({"bootstrap": {"resamples": 0}})["resamples"] == 0
    for bad, match in (({"n": 5}, "keys among"), ({"resamples": -1}, "resamples must be an integer"),
                       ({"level": 1.5}, "level must lie between")):
        with pytest.raises(ValueError, match=match):
            settings.bootstrap_settings({"bootstrap": bad})


# a report prepares each chain once: its failed_docs list reuses what scoring found (issue 24, item 4)

def test_genception_prepares_each_chain_once(tmp_path, monkeypatch, offline):
    calls = []
    count_calls(monkeypatch, GenCeptionScorer, "prepare", calls)
    records = _records(tmp_path)
    scorer = GenCeptionScorer()
    assert scorer.aggregate([MetricItem("gc@3", r) for r in records]) == pytest.approx(1.0)
    written = json.loads((tmp_path / "ns" / "report.json").read_text())
    assert [f["chain_id"] for f in written["failed_docs"]] == ["d", "e"]
    check_prepared_once(calls, records, written, scorer)
