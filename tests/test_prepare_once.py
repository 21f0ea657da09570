"""A report prepares each chain once: its ``failed_docs`` list reuses what scoring found
(issue 24, item 4), and says the same as preparing every record again would."""

import json

import pytest

from lmms_genbench.metrics.scorers import genception, mcd, mgg
from lmms_genbench.metrics.scorers.records import MetricItem

from . import test_mcd, test_mgg, test_reports


def _counting(monkeypatch, owner, name, calls, static=False):
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(args[-2].chain_id)  # (…, record, length)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, staticmethod(counted) if static else counted)


def _check_once(calls, records, written, scorer):
    assert sorted(calls) == sorted({r.chain_id for r in records}), calls
    # the list is the one preparing every record again gives
    assert written["failed_docs"] == scorer.failed_docs(records)
    assert written["failed_docs_total"] == len(scorer.failed_docs(records))


def test_genception_prepares_each_chain_once(tmp_path, monkeypatch, offline):
    calls = []
    _counting(monkeypatch, genception.GenCeptionScorer, "_prepare", calls)
    records = test_reports._records(tmp_path)
    scorer = genception.GenCeptionScorer()
    assert scorer.aggregate([MetricItem("gc@3", r) for r in records]) == pytest.approx(1.0)
    written = json.loads((tmp_path / "ns" / "report.json").read_text())
    assert [f["chain_id"] for f in written["failed_docs"]] == ["d", "e"]
    _check_once(calls, records, written, scorer)


fakes = test_mcd.fakes


def test_mcd_prepares_each_chain_once_and_reads_its_texts_once(tmp_path, monkeypatch, fakes):
    calls = []
    _counting(monkeypatch, mcd, "_prepare", calls)
    _counting(monkeypatch, mcd.MCDScorer, "prepare", calls, static=True)
    records = test_mcd._records(tmp_path, scorer=test_mcd.FAKE_TASK)
    scorer = mcd.MCDScorer()
    assert scorer.aggregate([MetricItem("mcd_text->text", r) for r in records]) == pytest.approx(0.125)
    written = json.loads((tmp_path / "ns" / "mcd_report.json").read_text())
    assert written["failed_docs_total"] == 2
    _check_once(calls, records, written, scorer)


def test_mgg_prepares_each_chain_once(tmp_path, monkeypatch):
    real = mgg.MGGScorer.score
    monkeypatch.setattr(mgg.MGGScorer, "score", lambda self, r, s, n, **kw: real(
        self, r, s, n, detector=test_mgg.RedMeansFound()))
    calls = []
    _counting(monkeypatch, mgg, "_prepare", calls)
    _counting(monkeypatch, mgg.MGGScorer, "prepare", calls, static=True)
    smoke = {"preset": "smoke"}
    records = [
        test_mgg._record(tmp_path, "a", "single_object", {1: True, 2: False, 3: False}, scorer=smoke),
        test_mgg._record(tmp_path, "b", "single_object", {1: True}, scorer=smoke),  # 1 of 3 generations
    ]
    scorer = mgg.MGGScorer()
    assert scorer.aggregate([MetricItem("mgg", r) for r in records]) == 0.5
    written = json.loads((tmp_path / "ns" / "mgg_report.json").read_text())
    assert [f["chain_id"] for f in written["failed_docs"]] == ["b"]
    _check_once(calls, records, written, scorer)
