"""The OWLv2 detector's batched pre- and post-processing (issue 24) against the code it
replaced (tests/support/owlv2_reference.py): the same pixels bit for bit, the same detections (boxes and
scores exactly), the same GenEval verdicts, on seeded pictures and seeded network outputs."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")

from lmms_genbench.metrics.functional.geneval import evaluate_detections  # noqa: E402
from lmms_genbench.metrics.networks import owlv2_batch  # noqa: E402
from lmms_genbench.metrics.networks.detection import build_detector  # noqa: E402
from lmms_genbench.metrics.networks.owlv2_batch import OWLv2Pixels, decode_detections  # noqa: E402
from tests.support.owlv2_reference import reference_detect_batch, reference_pixels, reference_postprocess  # noqa: E402

#: (width, height): square, wide, tall, smaller than the input (upscaled), odd, much larger
SIZES = [(64, 64), (80, 48), (37, 100), (20, 20), (31, 33), (32, 32), (300, 290), (1, 5)]
COCO = ["person", "cat", "dog", "car", "bench", "apple", "horse", "bus", "umbrella"]


def _pictures(seed, sizes):
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in sizes]


@pytest.fixture(scope="module")
def detector():
    return build_detector("tiny-owlv2", score_floor=0.0)


def test_pixels_equal_the_scipy_processor_bit_for_bit(detector):
    pixels = OWLv2Pixels(detector.processor.image_processor)
    assert pixels.kind == "scipy"
    pictures = _pictures(0, SIZES)
    got, want = pixels(pictures, "cpu"), reference_pixels(detector.processor, pictures)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got, want)
    # a batch of one size goes through one tensor pass
    same = _pictures(1, [(64, 64)] * 5)
    assert torch.equal(pixels(same, "cpu"), reference_pixels(detector.processor, same))


def test_pixels_equal_the_torch_processor():
    from transformers import Owlv2ImageProcessor

    processor = Owlv2ImageProcessor(size={"height": 32, "width": 32})
    pixels = OWLv2Pixels(processor)
    assert pixels.kind == "torch"
    pictures = _pictures(2, SIZES[:6])
    assert torch.equal(pixels(pictures, "cpu"), processor(images=pictures, return_tensors="pt")["pixel_values"])


def test_an_unknown_processor_is_called_as_before(detector):
    ip = detector.processor.image_processor
    calls = []

    class Wrapped:
        def __call__(self, **kw):
            calls.append(kw)
            return ip(**kw)

    pixels = OWLv2Pixels(Wrapped())
    assert pixels.kind == "processor"
    pictures = _pictures(3, [(40, 40)] * 2)
    assert torch.equal(pixels(pictures, "cpu"), reference_pixels(detector.processor, pictures))
    assert len(calls) == 1


def _outputs(seed, batch, boxes, queries):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn((batch, boxes, queries), generator=g, dtype=torch.float64) * 2
    centre = torch.rand((batch, boxes, 2), generator=g, dtype=torch.float64) * 1.2 - 0.1
    size = torch.rand((batch, boxes, 2), generator=g, dtype=torch.float64) * 0.6
    pred = torch.cat([centre, size], dim=-1)
    pred[:, ::5] = pred[:, 1::5][:, : pred[:, ::5].shape[1]]  # exact duplicates: IoU 1
    return logits, pred


@pytest.mark.parametrize("nms_iou,score_floor", [(0.5, 0.1), (0.3, 0.0), (1.0, 0.1), (0.9, 0.6)])
@pytest.mark.parametrize("dense", [True, False])
def test_decoding_equals_the_per_class_reference(monkeypatch, nms_iou, score_floor, dense):
    if not dense:  # group by group through torchvision
        monkeypatch.setattr(owlv2_batch, "_DENSE_NMS_LIMIT", 0)
    sizes = [(64, 64), (80, 48), (37, 100), (512, 512), (1, 5)]
    counts = [3, 1, 2, 3, 2]
    logits, pred = _outputs(7, len(sizes), 40, max(counts))
    found = decode_detections(logits, pred, sizes, counts, score_floor=score_floor, nms_iou=nms_iou)
    total = 0
    for i, (size, n) in enumerate(zip(sizes, counts)):
        names = [f"c{q}" for q in range(n)]
        want = reference_postprocess(logits[i, :, :n], pred[i], size, names, score_floor=score_floor, nms_iou=nms_iou)
        assert len(found[i]) == n
        for q, cls in enumerate(names):
            boxes, scores = found[i][q]
            assert boxes == [d.box for d in want[cls]]
            assert scores == [d.score for d in want[cls]]
            total += len(scores)
    assert total > 20  # the comparison saw detections


def test_detect_batch_and_verdicts_equal_the_reference(detector):
    rng = np.random.default_rng(5)
    sizes = [(64, 64)] * 6 + [(48, 80), (100, 37), (20, 20)]
    pictures = _pictures(4, sizes)
    metas, classes = [], []
    for _ in pictures:
        names = list(rng.choice(COCO, size=int(rng.integers(1, 4)), replace=False))
        include = [{"class": c, "count": int(rng.integers(1, 3))} for c in names[:2]]
        if len(include) == 2:
            include[1]["position"] = ["left of", 0]
        meta = {"tag": "position" if len(include) == 2 else "counting", "include": include,
                "exclude": [{"class": c, "count": 1} for c in names[2:]]}
        metas.append(meta)
        classes.append(names)
    got = detector.detect_batch(pictures, classes)
    want = reference_detect_batch(detector, pictures, classes)
    kept = 0
    for g, w in zip(got, want):
        assert list(g) == list(w)
        for cls in w:
            assert [(d.box, d.score) for d in g[cls]] == [(d.box, d.score) for d in w[cls]]
            kept += len(w[cls])
    assert kept > 20
    for pic, meta, g, w in zip(pictures, metas, got, want):
        for rules in ("owlv2", "geneval"):
            from lmms_genbench.metrics.functional.geneval import rules_preset

            r = rules_preset(rules)
            assert evaluate_detections(meta, g, image_size=pic.size, rules=r) == evaluate_detections(
                meta, w, image_size=pic.size, rules=r)
    # detect is a batch of one (the network's batched products round differently per batch)
    assert detector.detect(pictures[6], classes[6]) == reference_detect_batch(detector, pictures[6:7], classes[6:7])[0]


@pytest.mark.parametrize("out", [(32, 32), (24, 40)])
def test_pixels_equal_the_scipy_processor_on_many_sizes_and_seeds(out):
    """The tensor passes (reflect padding, SciPy's symmetric correlate order, strided zoom taps for
    integer factors, the 2-D zoom's sum in SciPy's order) against the processor. The code before
    summed the zoom axis by axis, 1 float32 ulp off in a few pixels of a non-square output."""
    from transformers.models.owlv2.image_processing_pil_owlv2 import Owlv2ImageProcessorPil

    processor = Owlv2ImageProcessorPil(size={"height": out[0], "width": out[1]})
    pixels = OWLv2Pixels(processor)
    assert pixels.kind == "scipy"
    # 2x, 3x (odd: taps 1 and 0), 16x, non-integer, up-scaled, padded wide and tall, tiny
    sizes = [(64, 64), (96, 96), (512, 512), (100, 100), (47, 47), (80, 48), (17, 400), (3, 3), (2, 5)]
    for seed in range(3):
        pictures = _pictures(10 + seed, sizes)
        for picture in pictures:  # one at a time: every size its own batch
            want = processor(images=[picture], return_tensors="pt")["pixel_values"]
            assert torch.equal(pixels([picture], "cpu"), want), (out, picture.size, seed)
        same = _pictures(20 + seed, [(64, 64)] * 4)
        assert torch.equal(pixels(same, "cpu"), processor(images=same, return_tensors="pt")["pixel_values"])


def test_decoded_detections_equal_checked_ones(detector):
    """The detector builds its Detections without re-checking them: the same objects as the
    checked constructor makes, field for field."""
    import dataclasses

    from lmms_genbench.metrics.functional.geneval import Detection

    assert [f.name for f in dataclasses.fields(Detection)] == ["box", "score", "color"]
    sizes = [(64, 64), (48, 80), (100, 37), (32, 32)] * 3
    found = detector.detect_batch(_pictures(6, sizes), [["cat", "dog", "bus"]] * len(sizes))
    seen = 0
    for per_class in found:
        for dets in per_class.values():
            for d in dets:
                checked = Detection(d.box, d.score)
                assert d == checked and dataclasses.astuple(d) == dataclasses.astuple(checked)
                assert type(d.box) is tuple and all(type(v) is float for v in (*d.box, d.score))
                assert hash(d) == hash(checked)
                seen += 1
    assert seen > 10


def test_query_rows_follow_the_embedding_cache(detector):
    """The batch's query embeddings come from one stacked matrix (a zero row for padding): the
    same detections as the reference's per-picture stacking, also after the cache is emptied and
    refilled with other queries (the matrix is rebuilt, not read stale)."""
    pictures = _pictures(8, [(64, 64), (48, 80), (64, 64)])
    classes = [["cat"], ["dog", "bus"], ["cat", "horse", "dog"]]
    first = detector.detect_batch(pictures, classes)
    assert first == reference_detect_batch(detector, pictures, classes)
    detector._query_embeds.clear()
    detector.detect_batch(pictures[:1], [["apple", "bench", "person", "car"]])
    assert detector.detect_batch(pictures, classes) == first
