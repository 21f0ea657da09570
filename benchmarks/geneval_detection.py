"""OWLv2 detection for GenEval/MGG: batched calls vs one picture per call, on the tiny OWLv2.

The MGG scorer hands each block of drawn pictures (``batch_size`` of them) to the detector at
once. Arms, on the same pictures and GenEval-like class lists (1-3 classes of the 80 COCO
names, queries repeating across pictures as GenEval's 553 prompts do):

* ours: ``OWLv2Detector.detect_batch`` per block: one vision pass, each query's text
  embedding computed once and kept, one device-to-host transfer per block;
* before: one picture per call through the model's own ``forward`` (what ``detect`` did
  before this change: text queries encoded again for every picture, two transfers each);
* floor: the vision tower and the heads alone on the block's preprocessed pixels, with the
  query embeddings given (no preprocessing, no post-processing).

The detections of ours and before must agree (same boxes kept, scores to 1e-5). The tiny
network has random weights: the figures show call overhead, not a real OWLv2's compute.

    python benchmarks/geneval_detection.py [--images 64] [--batch-size 8] [--repeats 5]

The last line reads ``speedup_vs_before=<median> overhead_vs_floor=<median>``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

COCO = ("person bicycle car motorcycle airplane bus train truck boat bench bird cat dog horse sheep cow "
        "elephant bear zebra giraffe backpack umbrella handbag tie suitcase frisbee skis snowboard kite "
        "bottle cup fork knife spoon bowl banana apple sandwich orange broccoli carrot pizza donut cake "
        "chair couch bed toilet tv laptop mouse remote keyboard sink refrigerator book clock vase").split()


def spread(values, fmt="{:.2f}"):
    return " ".join(f"{k} {fmt.format(v)}" for k, v in
                    (("min", min(values)), ("median", statistics.median(values)), ("max", max(values))))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=8, help="pictures per block (the smoke preset's)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    import numpy as np
    import torch
    from PIL import Image

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from lmms_genbench.metrics.networks.detection import build_detector

    rng = np.random.default_rng(0)
    pictures = [Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)) for _ in range(args.images)]
    classes = [list(rng.choice(COCO, size=int(rng.integers(1, 4)), replace=False)) for _ in range(args.images)]
    blocks = [(pictures[i : i + args.batch_size], classes[i : i + args.batch_size])
              for i in range(0, args.images, args.batch_size)]

    detector = build_detector("tiny-owlv2")

    def ours():
        detector._query_embeds.clear()  # each run encodes its queries again (once each)
        return [d for imgs, cls in blocks for d in detector.detect_batch(imgs, cls)]

    def before():
        return [detector._detect_forward(img, list(dict.fromkeys(c))) for img, c in zip(pictures, classes)]

    floor_detector = build_detector("tiny-owlv2")
    floor_detector.detect_batch(pictures, classes)  # learn every query embedding once
    model, processor = floor_detector.model, floor_detector.processor
    prepared = []
    for imgs, cls in blocks:
        pixels = processor(images=imgs, return_tensors="pt")["pixel_values"]
        width = max(len(c) for c in cls)
        queries = torch.zeros((len(imgs), width, next(iter(floor_detector._query_embeds.values())).shape[-1]))
        mask = torch.zeros((len(imgs), width), dtype=torch.bool)
        for i, c in enumerate(cls):
            for j, name in enumerate(c):
                queries[i, j] = floor_detector._query_embeds[floor_detector.query_template.format_map({"class": name})]
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

    got, want = ours(), before()
    worst = 0.0
    for g, w in zip(got, want):
        assert list(g) == list(w)
        for cls in w:
            assert len(g[cls]) == len(w[cls]), cls
            worst = max([worst] + [abs(a.score - b.score) for a, b in zip(g[cls], w[cls])])
    assert worst < 1e-5, worst
    arms = {"ours": ours, "before": before, "floor": floor}
    times = {name: [] for name in arms}
    names = list(arms)
    floor()
    for r in range(args.repeats):
        for name in names[r % 3:] + names[: r % 3]:
            t0 = time.perf_counter()
            arms[name]()
            times[name].append(time.perf_counter() - t0)
    speedups = [b / o for b, o in zip(times["before"], times["ours"])]
    overheads = [o / f - 1.0 for o, f in zip(times["ours"], times["floor"])]
    print(f"images={args.images} blocks of {args.batch_size} distinct queries={len({c for cs in classes for c in cs})} "
          f"threads={torch.get_num_threads()} repeats={args.repeats}; max score difference ours/before {worst:.1e}")
    for name in arms:
        print(f"{name:>6}: seconds {spread(times[name], '{:.3f}')}")
    print(f"before/ours (speedup):    {spread(speedups)}")
    print(f"ours/floor - 1 (overhead): {spread(overheads)}")
    print(f"speedup_vs_before={statistics.median(speedups):.2f} overhead_vs_floor={statistics.median(overheads):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
