"""MGG over stored chains: hand-worked accuracies, failures, records and the task data."""

import json
import math

import httpx
import pytest
from PIL import Image

from lmms_genbench.core.errors import WrongModelError
from lmms_genbench.data import sdp as sdp_data
from lmms_genbench.metrics.functional.geneval import Detection
from lmms_genbench.metrics.scorers import mgg
from lmms_genbench.metrics.functional.intervals import estimate
from lmms_genbench.metrics.scorers.records import MetricItem
from lmms_genbench.metrics.scorers.settings import BOOTSTRAP_DEFAULTS

from tests.support.chains import record, write_chain
from tests.support.prepare_checks import check_prepared_once, count_calls
from tests.support.owlv2_scores import PASS_UNDER_GENEVAL, REALISTIC, SIZE, ScriptedColors, ScriptedDetector


class RedMeansFound:
    """Finds every asked class once when the picture's first pixel is pure red."""

    def detect(self, img, classes):
        found = img.getpixel((0, 0)) == (255, 0, 0)
        return {c: [Detection((0, 0, 4, 4), 0.99)] if found else [] for c in classes}


RED, BLUE = (255, 0, 0), (0, 0, 255)


def _record(tmp_path, chain_id, tag, found_by_g, status="ok", reason=None, length=4, scorer=None):
    """A text-first chain whose drawing at generation g is red (found) or blue (not found)."""
    classes = [{"class": "cat", "count": 1}] + ([{"class": "dog", "count": 1}] if tag == "two_object" else [])
    items = ["a photo"]
    for g in range(1, max(found_by_g) + 1):
        items.append((RED if found_by_g[g] else BLUE) if g % 2 else "a description")
    failure = None if status == "ok" else (3, "generate", reason.split(": ", 1)[1])
    chain = write_chain(tmp_path, chain_id, "text_first", items, length=length, failure=failure, scorer=scorer)
    return record(mgg.MGG, chain, metadata=json.dumps({"tag": tag, "include": classes}))


CONFIG = mgg.MGGSettings(detector="unused", color_classifier="unused")


def test_mgg_hand_worked_with_failures_and_repeats(tmp_path):
    a = _record(tmp_path, "a", "single_object", {1: True, 3: False})
    records = [
        a,
        _record(tmp_path, "b", "two_object", {1: True, 3: True}),
        _record(tmp_path, "c", "single_object", {1: True}, status="failed",
                reason="generate failed at hop 3: generator returned a blank image"),
        _record(tmp_path, "d", "single_object", {1: True}),  # "ok" but stopped short
        a,  # rank padding repeats a doc
    ]
    report = mgg.MGG.score(records, CONFIG, 4, detector=RedMeansFound())
    # g=1: single 1/1, two 1/1 -> 1.0; g=3: single 0/1, two 1/1 -> 0.5; MGG = 0.75
    assert report["geneval@1"] == 1.0 and report["geneval@3"] == 0.5
    assert report["mgg"] == pytest.approx(0.75)
    assert report["mgg_single_object@3"] == 0.0 and report["mgg_two_object@3"] == 1.0
    assert report["mgg_single_object"] == 0.5 and report["mgg_two_object"] == 1.0
    assert math.isnan(report["mgg_counting"])  # no prompts of that tag
    assert report["n_scored"] == 2 and report["n_failed"] == 2 and report["n_images"] == 4
    assert report["failure_reasons"] == {
        "chain has no image for generation(s) [3]": 1,
        "generate failed at hop 3": 1,
    }
    assert report["scored_generations"] == [1, 3]
    # the same report whatever order the records come in
    again = mgg.MGG.score(records[::-1], CONFIG, 4, detector=RedMeansFound())
    assert again == report
    # each scored prompt's verdicts: the doc table from which the estimators give every score back
    assert report["doc_scores"] == {"chain_ids": ["a", "b"], "columns": {
        "correct@1": [1.0, 1.0], "correct@3": [0.0, 1.0], "tag": ["single_object", "two_object"]}}
    specs = mgg.MGG.estimators(report, CONFIG)
    assert {"mgg", "geneval@1", "geneval@3", "mgg_single_object", "mgg_two_object@3"} <= set(specs)
    for metric, spec in specs.items():
        assert estimate(report["doc_scores"]["columns"], spec) == pytest.approx(report[metric]), metric
    # one prompt per tag, resampled within tags: every resample is the sample itself
    mgg.MGG.add_intervals(report, CONFIG, BOOTSTRAP_DEFAULTS)
    assert report["intervals"]["mgg"]["low"] == report["intervals"]["mgg"]["high"] == pytest.approx(0.75)


def test_a_longer_chain_is_scored_on_the_generations_the_task_asks(tmp_path):
    records = [_record(tmp_path, "a", "single_object", {1: True, 2: False, 3: True, 4: False, 5: False}, length=5)]
    report = mgg.MGG.score(records, CONFIG, 5, detector=RedMeansFound())
    assert report["generations"] == 5 and report["mgg"] == pytest.approx(2 / 3)
    shorter = mgg.MGG.score(records, CONFIG, 3, detector=RedMeansFound())
    assert shorter["scored_generations"] == [1, 3] and shorter["mgg"] == 1.0


def test_record_keeps_the_metadata_and_fails_bad_docs(tmp_path):
    meta = {"tag": "position", "include": [{"class": "cup", "count": 1},
                                           {"class": "book", "count": 1, "position": ["right of", 0]}]}
    chain = write_chain(tmp_path, "geneval/00001", "text_first", ["p", RED, "t", RED])
    rec = record(mgg.MGG, chain, metadata=json.dumps(meta))
    assert rec.ok and rec.path(3).endswith("003.png")
    assert rec.fields["metadata"]["include"][1]["position"] == ("right of", 0)
    bad = record(mgg.MGG, chain, metadata='{"tag": "nope"}')
    assert not bad.ok and bad.reason.startswith("bad GenEval metadata")
    image_first = write_chain(tmp_path, "i", "image_first", [RED, "t", RED])
    report = mgg.MGG.score([record(mgg.MGG, image_first, metadata=json.dumps(meta))], CONFIG, 2, detector=RedMeansFound())
    assert report["failure_reasons"] == {"MGG scores text-first chains, got 'image_first'": 1}
    with pytest.raises(WrongModelError, match="--model cycle"):
        mgg.MGG.record({"metadata": json.dumps(meta)}, "not json")


def test_aggregate_scores_once_and_writes_the_report(tmp_path, monkeypatch):
    calls = []
    real = mgg.MGGScorer.score

    def counting(self, records, settings, length, **kw):
        calls.append(1)
        return real(self, records, settings, length, detector=RedMeansFound())

    monkeypatch.setattr(mgg.MGGScorer, "score", counting)
    scorer = mgg.MGGScorer()
    records = [_record(tmp_path, "a", "single_object", {1: True, 2: False, 3: False}, scorer={"preset": "smoke"})]
    assert scorer.aggregate([MetricItem("mgg", r) for r in records]) == 0.5
    assert scorer.aggregate([MetricItem("geneval@3", r) for r in records]) == 0.0
    assert len(calls) == 1
    written = json.loads((tmp_path / "ns" / "mgg_report.json").read_text())
    assert written["mgg"] == 0.5 and written["counts"]


def _realistic_records(tmp_path, scorer):
    """One text-first chain of 4 generations per REALISTIC entry (drawings at 1 and 3)."""
    blank = Image.new("RGB", SIZE, (128, 128, 128))
    records = []
    for tag, (meta, _dets) in REALISTIC.items():
        chain = write_chain(tmp_path, f"geneval/{tag}", "text_first", ["p", blank, "t", blank, "t"], scorer=scorer)
        records.append(record(mgg.MGG, chain, metadata=json.dumps(meta)))
    return records


def test_realistic_owlv2_scores_pass_under_the_default_rules_and_fail_under_genevals(tmp_path, monkeypatch):
    """Detections at 0.2-0.7 (tests/support/owlv2_scores.py), rules picked by the task's scorer
    settings: the default passes every tag; GenEval's fails counting, colour and position."""
    from lmms_genbench.metrics.networks import detection

    monkeypatch.delenv(mgg.ENV_RULES, raising=False)
    monkeypatch.setattr(detection, "get_detector", lambda spec, **kw: ScriptedDetector())
    monkeypatch.setattr(detection, "get_color_classifier", lambda spec, **kw: ScriptedColors())
    default = mgg.MGG.report(_realistic_records(tmp_path / "a", {"preset": "smoke"}))
    geneval = mgg.MGG.report(_realistic_records(tmp_path / "b", {"preset": "smoke", "rules": "geneval"}))
    assert default["rules"] == {**default["rules"], "name": "owlv2", "threshold": 0.1, "counting_threshold": 0.1}
    assert geneval["rules"] == {**geneval["rules"], "name": "geneval", "threshold": 0.3, "counting_threshold": 0.9}
    for report in (default, geneval):
        assert report["n_scored"] == 6 and report["n_images"] == 12 and report["n_failed"] == 0
    for tag in REALISTIC:
        assert default[f"mgg_{tag}"] == 1.0, tag
        assert geneval[f"mgg_{tag}"] == (1.0 if tag in PASS_UNDER_GENEVAL else 0.0), tag
    assert default["mgg"] == 1.0 and default["geneval@1"] == default["geneval@3"] == 1.0
    assert geneval["mgg"] == pytest.approx(2 / 6) and geneval["geneval@3"] == pytest.approx(2 / 6)


def test_rules_from_task_and_environment(monkeypatch):
    monkeypatch.delenv(mgg.ENV_RULES, raising=False)
    assert mgg.MGG.resolve({}).rules == "owlv2" == mgg.MGG.resolve({"preset": "smoke"}).rules
    assert mgg.MGG.resolve({"preset": "smoke", "rules": "geneval"}).geneval_rules.counting_threshold == 0.9
    monkeypatch.setenv(mgg.ENV_RULES, "owlv2")
    assert mgg.MGG.resolve({"rules": "geneval"}).rules == "owlv2"  # the environment wins
    monkeypatch.setenv(mgg.ENV_RULES, "mask2former")
    with pytest.raises(ValueError, match=r"rules \(generation_kwargs.scorer.rules or LMMS_GENBENCH_MGG_RULES\) "
                                         r"must be one of \['geneval', 'owlv2'\], got 'mask2former'"):
        mgg.MGG.resolve({})


def test_scorer_settings_from_task_and_environment(monkeypatch):
    monkeypatch.delenv(mgg.ENV_DETECTOR, raising=False)
    assert mgg.MGG.resolve({}).detector == "google/owlv2-large-patch14-ensemble"
    # one default detector name: the rules module's, the networks' and the scorer's
    from lmms_genbench.metrics.functional.geneval import DEFAULT_DETECTOR
    from lmms_genbench.metrics.networks import detection

    assert DEFAULT_DETECTOR == mgg.MGG.PRESETS["paper"]["detector"] == "google/owlv2-large-patch14-ensemble"
    assert detection.build_detector.__defaults__[0] == DEFAULT_DETECTOR
    monkeypatch.setenv(mgg.ENV_DETECTOR, "my/owl")
    assert mgg.MGG.resolve({"preset": "smoke"}).detector == "my/owl"
    with pytest.raises(ValueError, match="detector must be a non-empty"):
        mgg.MGGSettings(detector="", color_classifier="x")


# -- data ----------------------------------------------------------------------------------
def _geneval_lines(n_per_tag):
    rows = []
    for tag, n in n_per_tag.items():
        for i in range(n):
            inc = [{"class": "cat", "count": 1}]
            if tag in ("two_object", "position", "color_attr"):
                second = {"class": "dog", "count": 1}
                if tag == "position":
                    second["position"] = ["left of", 0]
                inc.append(second)
            if tag in ("colors", "color_attr"):
                inc[0]["color"] = "red"
            rows.append({"tag": tag, "include": inc, "prompt": f"{tag} {i}"})
    return "\n".join(json.dumps(r) for r in rows) + "\n"


def test_geneval_docs_keep_metadata_as_json_and_take_rewritten_prompts(tmp_path):
    meta = tmp_path / "meta.jsonl"
    meta.write_text(_geneval_lines({"position": 1, "counting": 1}))
    docs = sdp_data.load_geneval_docs(meta)
    assert [d["chain_id"] for d in docs] == ["geneval/00000", "geneval/00001"]
    assert json.loads(docs[0]["metadata"])["include"][1]["position"] == ["left of", 0]
    rewritten = tmp_path / "long.txt"
    rewritten.write_text("A long first prompt.\nA long second prompt.\n")
    docs = sdp_data.load_geneval_docs(meta, rewritten)
    assert [d["prompt"] for d in docs] == ["A long first prompt.", "A long second prompt."]
    rewritten.write_text("only one\n")
    with pytest.raises(ValueError, match="1 prompts for 2 GenEval entries"):
        sdp_data.load_geneval_docs(meta, rewritten)
    meta.write_text('{"tag": "single_object", "include": []}\n')
    with pytest.raises(ValueError, match="line 1: not a GenEval entry"):
        sdp_data.load_geneval_docs(meta)


def test_fetch_geneval_checks_the_download(tmp_path):
    good = _geneval_lines(sdp_data.GENEVAL_TAG_COUNTS).encode()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=good))
    target = sdp_data.fetch_geneval_metadata(tmp_path / "g" / "meta.jsonl", transport=transport)
    assert len(sdp_data.load_geneval_docs(target)) == 553
    short = httpx.MockTransport(lambda request: httpx.Response(200, content=good.splitlines(True)[0]))
    with pytest.raises(ValueError, match="expected"):
        sdp_data.fetch_geneval_metadata(tmp_path / "h" / "meta.jsonl", transport=short)
    assert not (tmp_path / "h" / "meta.jsonl").exists()
    missing = httpx.MockTransport(lambda request: httpx.Response(404))
    with pytest.raises(RuntimeError, match="HTTP 404"):
        sdp_data.fetch_geneval_metadata(tmp_path / "i" / "meta.jsonl", transport=missing)


def test_pair_list_round_trip_and_errors(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"source": "DOCCI", "image_id": 7}\n\n{"source": "nocaps", "image_id": "x"}\n')
    assert sdp_data.load_pair_list(path) == [{"source": "docci", "image_id": "7"}, {"source": "nocaps", "image_id": "x"}]
    path.write_text('{"source": "docci"}\n')
    with pytest.raises(ValueError, match="line 1"):
        sdp_data.load_pair_list(path)


# a report prepares each chain once: its failed_docs list reuses what scoring found (issue 24, item 4)

def test_mgg_prepares_each_chain_once(tmp_path, monkeypatch):
    real = mgg.MGGScorer.score
    monkeypatch.setattr(mgg.MGGScorer, "score", lambda self, r, s, n, **kw: real(
        self, r, s, n, detector=RedMeansFound()))
    calls = []
    count_calls(monkeypatch, mgg, "_prepare", calls)
    count_calls(monkeypatch, mgg.MGGScorer, "prepare", calls, static=True)
    smoke = {"preset": "smoke"}
    records = [
        _record(tmp_path, "a", "single_object", {1: True, 2: False, 3: False}, scorer=smoke),
        _record(tmp_path, "b", "single_object", {1: True}, scorer=smoke),  # 1 of 3 generations
    ]
    scorer = mgg.MGGScorer()
    assert scorer.aggregate([MetricItem("mgg", r) for r in records]) == 0.5
    written = json.loads((tmp_path / "ns" / "mgg_report.json").read_text())
    assert [f["chain_id"] for f in written["failed_docs"]] == ["b"]
    check_prepared_once(calls, records, written, scorer)
