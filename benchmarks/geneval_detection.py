"""OWLv2 detection for GenEval/MGG against its floor, on the tiny OWLv2 or a real-size OWLv2-large.

The MGG scorer hands each block of drawn pictures (``batch_size`` of them) to the detector at
once. Arms, on the same pictures and GenEval-like class lists (1-3 classes of the 80 COCO
names, queries repeating across pictures as GenEval's 553 prompts do):

* ours: ``OWLv2Detector.detect_batch`` per block: pictures to ``pixel_values`` as batched
  tensors, one vision pass, batched box decoding and NMS. Query text embeddings are cached for a
  run (GenEval's 553 prompts name 80 classes), so the steady state is timed with them known;
  ``ours cold`` also encodes every query once;
* reference: the code before issue 24 (tests/support/owlv2_reference.py): the image processor on PIL
  pictures, then box decoding and NMS one picture and one class at a time;
* floor: the vision tower and the heads alone on the block's ``pixel_values``, with the query
  embeddings given (no preprocessing, no post-processing).

Ours must give the reference's detections exactly (same boxes, same scores); the run stops if not.

``--size tiny``: the 2-layer random-weight OWLv2 (32-px input), 64-px pictures: call overhead.
``--size real``: OWLv2-large's layer sizes (ViT-L/14 at 960 px: 4,624 boxes; 12-layer text
tower), random weights, no download, 512-px pictures (SD 1.5's), the model's torch image
processor (what ``Owlv2Processor.from_pretrained`` gives). A forward pass takes about a minute on
two CPU cores, so use few pictures (default one block of 2); only ours and the floor are timed
(the reference runs once, for the equality check).

    python benchmarks/geneval_detection.py [--size tiny|real] [--images 64] [--batch-size 8] [--repeats 5]

The last line reads ``overhead_vs_floor=<median> cold_overhead_vs_floor=<median> speedup_vs_reference=<median>``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

COCO = ("person bicycle car motorcycle airplane bus train truck boat bench bird cat dog horse sheep cow "
        "elephant bear zebra giraffe backpack umbrella handbag tie suitcase frisbee skis snowboard kite "
        "bottle cup fork knife spoon bowl banana apple sandwich orange broccoli carrot pizza donut cake "
        "chair couch bed toilet tv laptop mouse remote keyboard sink refrigerator book clock vase").split()


def spread(values, fmt="{:.2f}"):
    return " ".join(f"{k} {fmt.format(v)}" for k, v in
                    (("min", min(values)), ("median", statistics.median(values)), ("max", max(values))))


def real_owlv2(seed=0):
    """OWLv2-large's sizes (google/owlv2-large-patch14-ensemble), random weights, byte tokenizer."""
    import torch
    from transformers import Owlv2Config, Owlv2ForObjectDetection, Owlv2ImageProcessor, Owlv2Processor

    from lmms_genbench.smoke.vision import _byte_tokenizer

    tokenizer = _byte_tokenizer("real_owlv2")
    config = Owlv2Config(
        text_config={"vocab_size": len(tokenizer), "hidden_size": 768, "intermediate_size": 3072,
                     "num_hidden_layers": 12, "num_attention_heads": 12, "max_position_embeddings": 16,
                     "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
                     "pad_token_id": tokenizer.pad_token_id},
        vision_config={"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                       "num_attention_heads": 16, "image_size": 960, "patch_size": 14},
        projection_dim=768,
    )
    torch.manual_seed(seed)
    model = Owlv2ForObjectDetection(config).eval()
    return model, Owlv2Processor(image_processor=Owlv2ImageProcessor(), tokenizer=tokenizer)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("tiny", "real"), default="tiny")
    parser.add_argument("--images", type=int, default=None, help="default 64 (tiny), 2 (real)")
    parser.add_argument("--batch-size", type=int, default=None, help="pictures per block; default 8 (tiny), 2 (real)")
    parser.add_argument("--picture", type=int, default=None, help="picture side in pixels; default 64 (tiny), 512 (real)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    real = args.size == "real"
    n_images = args.images or (2 if real else 64)
    batch_size = args.batch_size or (2 if real else 8)
    side = args.picture or (512 if real else 64)

    import numpy as np
    import torch
    from PIL import Image

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from lmms_genbench.metrics.networks.detection import OWLv2Detector, build_detector
    from owlv2_reference import reference_detect_batch, reference_pixels

    rng = np.random.default_rng(0)
    pictures = [Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)) for _ in range(n_images)]
    classes = [list(rng.choice(COCO, size=int(rng.integers(1, 4)), replace=False)) for _ in range(n_images)]
    blocks = [(pictures[i : i + batch_size], classes[i : i + batch_size]) for i in range(0, n_images, batch_size)]

    detector = OWLv2Detector(*real_owlv2()) if real else build_detector("tiny-owlv2")
    model, processor = detector.model, detector.processor

    def ours():
        return [d for imgs, cls in blocks for d in detector.detect_batch(imgs, cls)]

    def ours_cold():
        detector._query_embeds.clear()  # each query encoded again, once
        return ours()

    def reference():
        return [d for imgs, cls in blocks for d in reference_detect_batch(detector, imgs, cls)]

    want = reference()  # also learns every query embedding
    prepared = []
    for imgs, cls in blocks:
        pixels = reference_pixels(processor, imgs)
        width = max(len(c) for c in cls)
        queries = torch.zeros((len(imgs), width, next(iter(detector._query_embeds.values())).shape[-1]))
        mask = torch.zeros((len(imgs), width), dtype=torch.bool)
        for i, c in enumerate(cls):
            for j, name in enumerate(c):
                queries[i, j] = detector._query_embeds[detector.query_template.format_map({"class": name})]
                mask[i, j] = True
        prepared.append((pixels, queries, mask))

    def floor():
        with torch.inference_mode():
            for pixels, queries, mask in prepared:
                feature_map, _ = model.image_embedder(pixel_values=pixels)
                b, h, w, d = feature_map.shape
                feats = feature_map.reshape(b, h * w, d)
                model.class_predictor(feats, queries, mask)
                model.box_predictor(feats, feature_map)

    got = ours()
    kept = 0
    for g, w in zip(got, want):
        assert list(g) == list(w)
        for cls in w:
            assert [(d.box, d.score) for d in g[cls]] == [(d.box, d.score) for d in w[cls]], cls
            kept += len(w[cls])
    gap = max(float((detector._pixels(imgs, "cpu") - reference_pixels(processor, imgs)).abs().max()) for imgs, _ in blocks)
    arms = {"ours": ours, "ours cold": ours_cold, "reference": reference, "floor": floor}
    if real:  # a minute a forward pass: time ours and the floor only (the reference ran above)
        arms = {"ours": ours, "floor": floor}
    times = {name: [] for name in arms}
    names = list(arms)
    for r in range(args.repeats):
        for name in names[r % len(names):] + names[: r % len(names)]:  # rotate the order
            t0 = time.perf_counter()
            arms[name]()
            times[name].append(time.perf_counter() - t0)
    overheads = [o / f - 1.0 for o, f in zip(times["ours"], times["floor"])]
    cold = [o / f - 1.0 for o, f in zip(times.get("ours cold", [math.nan]), times["floor"])]
    speedups = [b / o for b, o in zip(times.get("reference", [math.nan]), times["ours"])]
    print(f"size={args.size} images={n_images} of {side} px, blocks of {batch_size}, distinct queries="
          f"{len({c for cs in classes for c in cs})}, threads={torch.get_num_threads()}, repeats={args.repeats}; "
          f"detections identical to the reference ({kept} kept), max pixel difference {gap:.1e}")
    for name in arms:
        print(f"{name:>10}: seconds {spread(times[name], '{:.3f}')}")
    print(f"ours/floor - 1 (overhead):      {spread(overheads)}")
    print(f"ours cold/floor - 1:            {spread(cold)}")
    print(f"reference/ours (speedup):       {spread(speedups)}")
    print(f"overhead_vs_floor={statistics.median(overheads):.3f} cold_overhead_vs_floor={statistics.median(cold):.3f} "
          f"speedup_vs_reference={statistics.median(speedups):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
