"""MGG's detections and crop colours behind the store's feature cache (scorers/stored_geneval.py):
reports equal with the cache cold, warm and off, a warm pass loads no network, a changed
detector setting misses, a corrupt file is recomputed (tiny random-weight OWLv2 and CLIP only)."""

import json

import numpy as np
from PIL import Image

from lmms_genbench.metrics.scorers import mgg, stored_geneval
from lmms_genbench.metrics.scorers.stored import ENV_FEATURE_CACHE, FEATURES

from tests.support.chains import record, write_chain

METAS = [
    {"tag": "colors", "include": [{"class": "car", "count": 1, "color": "red"}]},
    {"tag": "two_object", "include": [{"class": "cat", "count": 1}, {"class": "dog", "count": 1}]},
    {"tag": "color_attr", "include": [{"class": "bus", "count": 1, "color": "yellow"},
                                      {"class": "umbrella", "count": 1, "color": "blue"}]},
]


def _records(tmp_path):
    rng = np.random.default_rng(0)
    records = []
    for k, meta in enumerate(METAS):
        image = Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8))
        chain = write_chain(tmp_path, f"c{k}", "text_first", ["a prompt", image], length=2)
        records.append(record(mgg.MGG, chain, metadata=json.dumps(meta)))
    return records


def _scores(report):
    return {k: v for k, v in report.items() if k != FEATURES}


def test_mgg_reports_equal_cold_warm_and_off_and_a_warm_pass_loads_nothing(tmp_path, monkeypatch):
    records = _records(tmp_path)
    settings = mgg.MGG.resolve({"preset": "smoke", "batch_size": 2})  # blocks of 2 chains: 2 detector calls
    cold = mgg.MGG.score(records, settings, 2)
    warm = mgg.MGG.score(records, settings, 2)
    assert cold[FEATURES]["computed"] >= 3 and cold[FEATURES]["networks_loaded"] == ["tiny-clip", "tiny-owlv2"]
    colour_calls = cold[FEATURES]["computed"] - 3
    assert colour_calls > 0, "the tiny OWLv2 kept no box of a colour prompt: the colour path went untested"
    assert warm[FEATURES] == {**cold[FEATURES], "from_store": cold[FEATURES]["computed"], "computed": 0,
                              "networks_loaded": []}
    assert _scores(warm) == _scores(cold)

    # a changed detector setting misses: the detector loads and runs again; the colours of the
    # same boxes are the colour CLIP's, unchanged, and stay stored
    monkeypatch.setattr(stored_geneval, "DETECTOR_OPTIONS", {"nms_iou": 0.6, "score_floor": 0.1})
    other = mgg.MGG.score(records, settings, 2)
    assert other[FEATURES]["computed"] >= 3 and other[FEATURES]["networks_loaded"][-1] == "tiny-owlv2"
    monkeypatch.undo()

    # a corrupt detection file is a miss: its block is computed whole, the report unchanged
    (folder,) = [p.parent for p in (tmp_path / "ns" / ".features").glob("*/identity.json")
                 if json.loads(p.read_text())["role"] == "detector" and json.loads(p.read_text())["options"]["nms_iou"] == 0.5]
    detections = sorted(folder.glob("*/*.feat"))
    detections[0].write_bytes(detections[0].read_bytes()[:-3])
    mended = mgg.MGG.score(records, settings, 2)
    assert mended[FEATURES]["corrupt_recomputed"] == 1 and mended[FEATURES]["networks_loaded"] == ["tiny-owlv2"]
    assert mended[FEATURES]["computed"] in (1, 2) and _scores(mended) == _scores(cold)

    monkeypatch.setenv(ENV_FEATURE_CACHE, "0")
    off = mgg.MGG.score(records, settings, 2)
    assert off[FEATURES]["cache"].startswith("off") and off[FEATURES]["from_store"] == 0
    assert _scores(off) == _scores(cold)
