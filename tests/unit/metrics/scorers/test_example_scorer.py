"""The example scorer of docs/extending.md ("Adding a scorer"): the whole of a new scorer is
its four steps (``metric_names``, ``prepare``, ``score``, ``host_scores``) and three class
attributes; the base class does the rest (records, settings, the memoised report written
beside the chains, intervals, each doc's score on its item for lmms-eval's ``--baseline``)."""

import json
from dataclasses import dataclass

import pytest
from PIL import Image

from lmms_genbench.hooks import host_scores
from lmms_genbench.metrics.functional.estimators import doc_table
from lmms_genbench.metrics.scorers.base import ChainScorer, with_stderr
from lmms_genbench.metrics.scorers.records import MetricItem
from tests.support.chains import record, write_chain


# --- the example, as docs/extending.md shows it -------------------------------------------
@dataclass(frozen=True)
class TextLengthSettings:
    max_words: int = 50

    @classmethod
    def resolve(cls, mapping):  # the task's settings; apply LMMS_GENBENCH_* overrides here
        return cls(**mapping)


class TextLengthScorer(ChainScorer):
    """Share of a chain's descriptions that stay within ``max_words`` words."""

    name, report_file = "text_length", "text_length.json"
    PRESETS = {"paper": {"max_words": 50}}
    Settings = TextLengthSettings

    def metric_names(self, length, settings):
        return with_stderr(["short", "n_scored"], ["short"])

    def prepare(self, record, length):  # what scoring reads of a chain, or why not (a str)
        if not record.ok:
            return record.reason or "failed"
        return [record.read_text(h) for h in range(1, length + 1, 2)]

    def score(self, records, settings, length):
        triage = self.triage(records, length, lambda r: r.chain_id)
        ids = [rec.chain_id for rec, _ in triage.ready]
        shares = [sum(len(t.split()) <= settings.max_words for t in texts) / len(texts) for _, texts in triage.ready]
        return {"short": sum(shares) / len(shares) if shares else float("nan"), "n_scored": len(shares),
                "failure_reasons": dict(triage.failures), "verdicts": triage.reasons(),
                "doc_scores": doc_table(ids, {"short": shares})}

    def estimators(self, report, settings):
        return {"short": {"kind": "mean", "column": "short"}}

    def host_scores(self, report):
        table = report["doc_scores"]
        return "short", {c: (s, None) for c, s in zip(table["chain_ids"], table["columns"]["short"])}
# ---------------------------------------------------------------------------------------------


def _chain(tmp_path, chain_id, texts, status="ok"):
    items = [Image.new("RGB", (8, 8), (9, 9, 9))]
    for text in texts:
        items += [text, Image.new("RGB", (8, 8), (9, 9, 9))]
    failure = None if status == "ok" else (1, "describe", "empty description")
    return record(SCORER, write_chain(tmp_path, chain_id, "image_first", items, length=4, failure=failure))


SCORER = TextLengthScorer()


def test_the_example_scorer_is_a_whole_scorer(tmp_path):
    records = [_chain(tmp_path, "a", ["short one", "two words"]), _chain(tmp_path, "b", ["x " * 60, "ok"]),
               _chain(tmp_path, "c", ["x"], status="failed")]
    items = {m: [MetricItem(m, r) for r in records] for m in SCORER.metric_names(4, {})}
    values = {m: SCORER.aggregate(its) for m, its in items.items()}
    assert values["short"] == pytest.approx(0.75) and values["n_scored"] == 2
    assert isinstance(values["short_stderr"], float)  # the base class's bootstrap interval
    written = json.loads((tmp_path / "ns" / "text_length.json").read_text())
    assert written["failed_docs"] == [{"chain_id": "c", "reason": "describe failed at hop 1: empty description"}]
    assert written["scorer"]["settings"] == {"max_words": 50}
    # each doc's share travels on its item, from the report it belongs to
    assert [i.host for i in items["short"]] == [(1.0, None, "short"), (0.5, None, "short"), None]
    out = type("TaskOutput", (), {"task_config": {}, "logged_samples": [{"short": i} for i in items["short"]],
                                  "sample_metrics": {(m, "none"): its for m, its in items.items()}})()
    assert host_scores.fill(out) == 2 and out.logged_samples[1]["score"] == 0.5
