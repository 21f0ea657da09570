"""MGG over stored chains: hand-worked accuracies, failures, records and the task data."""

import json
import math

import httpx
import pytest
from PIL import Image

from lmms_genbench.data import sdp as sdp_data
from lmms_genbench.metrics.scorers import mgg
from lmms_genbench.metrics.functional.geneval import Detection, validate_metadata


class RedMeansFound:
    """Finds every asked class once when the picture's first pixel is pure red."""

    def detect(self, img, classes):
        found = img.getpixel((0, 0)) == (255, 0, 0)
        return {c: [Detection((0, 0, 4, 4), 0.99)] if found else [] for c in classes}


def _image(tmp_path, name, found):
    path = tmp_path / "ns" / name.replace("/", "_") / f"{name.count('/')}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (255, 0, 0) if found else (0, 0, 255)).save(path)
    return str(path)


def _record(tmp_path, chain_id, tag, found_by_g, status="ok", reason=None):
    classes = [{"class": "cat", "count": 1}] + ([{"class": "dog", "count": 1}] if tag == "two_object" else [])
    images = [[g, _image(tmp_path, f"{chain_id}/{g}", f)] for g, f in found_by_g.items()]
    return {
        "chain_id": chain_id, "status": status, "reason": reason,
        "metadata": validate_metadata({"tag": tag, "include": classes}),
        "images": images, "scorer": mgg.SMOKE_MGG_SCORER,
    }


CONFIG = mgg.MGGScorerConfig(detector="unused", color_classifier="unused")


def test_mgg_hand_worked_with_failures_and_repeats(tmp_path):
    a = _record(tmp_path, "a", "single_object", {1: True, 3: False})
    records = [
        a,
        _record(tmp_path, "b", "two_object", {1: True, 3: True}),
        _record(tmp_path, "c", "single_object", {1: True}, status="failed",
                reason="generate failed at hop 3: generator returned a blank image"),
        _record(tmp_path, "d", "single_object", {1: True}),  # "ok" but stopped short
        dict(a),  # rank padding repeats a doc
    ]
    report = mgg.score_mgg_chains(records, CONFIG, generations=4, detector=RedMeansFound())
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
    again = mgg.score_mgg_chains(records[::-1], CONFIG, generations=4, detector=RedMeansFound())
    assert again == report


def test_generations_default_to_the_longest_ok_chain(tmp_path):
    records = [_record(tmp_path, "a", "single_object", {1: True, 3: True, 5: False})]
    report = mgg.score_mgg_chains(records, CONFIG, detector=RedMeansFound())
    assert report["generations"] == 5 and report["mgg"] == pytest.approx(2 / 3)


def test_mgg_record_never_raises_and_keeps_metadata_small(tmp_path):
    meta = {"tag": "position", "include": [{"class": "cup", "count": 1},
                                           {"class": "book", "count": 1, "position": ["right of", 0]}]}
    chain = {"chain_id": "geneval/00001", "status": "ok", "direction": "text_first", "failure": None,
             "hops": [{"hop": 0, "kind": "text", "text": "p"}, {"hop": 1, "kind": "image", "path": "/x/1.png"},
                      {"hop": 2, "kind": "text", "text": "t"}, {"hop": 3, "kind": "image", "path": "/x/3.png"}]}
    doc = {"chain_id": "geneval/00001", "metadata": json.dumps(meta)}
    rec = mgg.mgg_record(json.dumps(chain), doc, mgg.SMOKE_MGG_SCORER)
    assert rec["status"] == "ok" and rec["images"] == [[1, "/x/1.png"], [3, "/x/3.png"]]
    assert rec["metadata"]["include"][1]["position"] == ("right of", 0)
    json.dumps(rec)  # lmms-eval logs it
    assert mgg.mgg_record("not json", doc, {})["reason"].startswith("response is not a chain")
    bad = mgg.mgg_record(json.dumps(chain), {"metadata": '{"tag": "nope"}'}, {})
    assert bad["status"] == "failed" and bad["reason"].startswith("bad GenEval metadata")
    image_first = mgg.mgg_record(json.dumps({**chain, "direction": "image_first"}), doc, {})
    assert image_first["status"] == "failed" and "text-first" in image_first["reason"]


def test_report_value_scores_once_and_writes_the_report(tmp_path, monkeypatch):
    calls = []
    real = mgg.score_mgg_chains

    def counting(records, config, generations=None, **kw):
        calls.append(1)
        return real(records, config, generations, detector=RedMeansFound())

    monkeypatch.setattr(mgg, "score_mgg_chains", counting)
    mgg._CACHE.clear()
    records = [_record(tmp_path, "a", "single_object", {1: True, 3: False})]
    assert mgg.report_value(records, "mgg", 4) == 0.5
    assert mgg.report_value(records, "geneval@3", 4) == 0.0
    assert len(calls) == 1
    written = json.loads((tmp_path / "ns" / "mgg_report.json").read_text())
    assert written["mgg"] == 0.5 and written["counts"]


def test_scorer_settings_from_task_and_environment(monkeypatch):
    monkeypatch.delenv(mgg.ENV_DETECTOR, raising=False)
    assert mgg.MGGScorerConfig.resolve({}).detector == "google/owlv2-large-patch14-ensemble"
    monkeypatch.setenv(mgg.ENV_DETECTOR, "my/owl")
    assert mgg.MGGScorerConfig.resolve(mgg.SMOKE_MGG_SCORER).detector == "my/owl"
    with pytest.raises(ValueError, match="detector must be a non-empty"):
        mgg.MGGScorerConfig(detector="", color_classifier="x")


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


class _Table:
    def __init__(self, ids):
        self.ids = ids

    def __getitem__(self, column):
        return self.ids


def test_resample_nd400_is_seeded_and_order_independent(tmp_path):
    tables = {"google/docci": [f"d{i}" for i in range(50)], "HuggingFaceM4/NoCaps": list(range(40))}

    def load(path, split, revision=None):
        return _Table(tables[path])

    first = sdp_data.resample_nd400(seed=3, per_source=5, load=load)
    assert first == sdp_data.resample_nd400(seed=3, per_source=5, load=load)
    assert first != sdp_data.resample_nd400(seed=4, per_source=5, load=load)
    tables = {k: v[::-1] for k, v in tables.items()}  # the hub serves rows in another order
    assert first == sdp_data.resample_nd400(seed=3, per_source=5, load=load)
    assert [r["source"] for r in first] == ["docci"] * 5 + ["nocaps"] * 5
    assert len({r["image_id"] for r in first}) == 10
    with pytest.raises(ValueError, match="fewer than per_source=60"):
        sdp_data.resample_nd400(seed=3, per_source=60, load=load)


def test_pair_list_round_trip_and_errors(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"source": "DOCCI", "image_id": 7}\n\n{"source": "nocaps", "image_id": "x"}\n')
    assert sdp_data.load_pair_list(path) == [{"source": "docci", "image_id": "7"}, {"source": "nocaps", "image_id": "x"}]
    path.write_text('{"source": "docci"}\n')
    with pytest.raises(ValueError, match="line 1"):
        sdp_data.load_pair_list(path)
