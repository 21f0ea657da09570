"""Cycle engine vs the authors' per-doc loop, on the smoke stack.

Both arms use the same describer (by default lmms-eval's ``qwen2_vl`` class on
a tiny random-weight Qwen2-VL, which generates in batches as real describers
do; ``--describer llava_hf`` uses the smoke preset's LLaVA, whose lmms-eval
class describes one image per forward pass), the same smoke generator and the
same tiny ViT encoder,
and do the same work: N images, T iterations, GC@T per image. The sequential
arm is the GenCeption reference loop (describe one image, draw it, next;
embeddings one image at a time). The engine arm is the code ``lmms-eval
--model cycle`` runs: breadth-first hops, artifacts streamed to disk, then
the task's batched scorer (FID off in both arms: it is identical work).

    python benchmarks/cycle_throughput.py [--n 32] [--iterations 3] [--max-new-tokens 32]

Prints the figures and ends with one line:
``speedup_vs_sequential=X overhead=Y peak_rss_mb=Z``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from contextlib import contextmanager

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny networks: threads only contend


class Clock:
    """Time spent inside model calls, by kind, and the intervals themselves
    (describe and draw calls overlap in the engine, so busy time is their union)."""

    def __init__(self):
        self.seconds = {"describe": 0.0, "generate": 0.0, "encode": 0.0}
        self.intervals = []

    def wrap(self, obj, method, kind):
        original = getattr(obj, method)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                t1 = time.perf_counter()
                self.seconds[kind] += t1 - t0
                self.intervals.append((t0, t1))

        setattr(obj, method, timed)
        return original

    def busy(self) -> float:
        """Wall time during which at least one model call was running."""
        total, end = 0.0, float("-inf")
        for start, stop in sorted(self.intervals):
            if stop > end:
                total += stop - max(start, end)
                end = stop
        return total


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def seed_images(n):
    """``n`` distinct seeds: the package photos, then flipped and cropped variants."""
    from PIL import ImageOps

    from lmms_genbench.data.photos import PACKAGE_PHOTOS, load_package_photo

    base = [load_package_photo(cid).convert("RGB") for cid, _ in PACKAGE_PHOTOS]
    out = []
    k = 0
    while len(out) < n:
        img = base[k % len(base)]
        variant = k // len(base)
        if variant % 2 == 1:
            img = ImageOps.mirror(img)
        if variant >= 2:
            w, h = img.size
            img = img.crop((w // 8 * (variant - 1) % (w // 2), 0, w, h))
        out.append(img)
        k += 1
    return out


@contextmanager
def timed_models(describer, generator, encoder):
    clock = Clock()
    restore = [
        (describer, "describe", clock.wrap(describer, "describe", "describe")),
        (generator, "generate", clock.wrap(generator, "generate", "generate")),
        (encoder, "encode", clock.wrap(encoder, "encode", "encode")),
    ]
    try:
        yield clock
    finally:
        for obj, name, original in restore:
            setattr(obj, name, original)


def run_sequential(images, spec, describer, generator, encoder, iterations):
    """The authors' loop: one image at a time through every iteration."""
    import numpy as np

    from lmms_genbench.engine import generation_seed
    from lmms_genbench.metrics import gc_at_t

    scores = []
    for k, seed in enumerate(images):
        z0 = encoder.encode([seed])[0].numpy()
        image, sims = seed, []
        for t in range(1, iterations + 1):
            text = describer.describe([image], spec.describe_prompt, spec.describer_kwargs)[0]
            prompt = spec.generate_prompt.format(description=text)
            image = generator.generate([prompt], [generation_seed(spec, str(k), 2 * t)])[0]
            z = encoder.encode([image])[0].numpy()
            sims.append(float(z0 @ z / (np.linalg.norm(z0) * np.linalg.norm(z))))
        scores.append(gc_at_t(sims))
    return float(np.mean(scores))


def run_engine(images, spec, describer, generator, iterations, root, describer_batch):
    from lmms_genbench.engine import ArtifactStore, ChainJob, CycleEngine
    from lmms_genbench.metrics.scorers.genception import GENCEPTION, GenCeptionSettings

    store = ArtifactStore(root)
    ns = store.namespace(describer.name, generator.name, spec.protocol_id("bench"))
    jobs = [ChainJob(str(k), spec, store.chain(ns, str(k)), (lambda img=img: [img])) for k, img in enumerate(images)]
    del images  # from here on the engine reads seeds and steps from disk
    outcomes, stats = CycleEngine(describer, generator, describer_batch=describer_batch).run(jobs)
    records = [GENCEPTION.record({"category": "all"}, o.to_chain("bench").to_json()) for o in outcomes]
    config = GenCeptionSettings(image_encoder="tiny-vit", fid_features=None, device="cpu", batch_size=32)
    report = GENCEPTION.score(records, config, length=2 * iterations)
    return report[f"gc@{iterations}"], stats


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=32, help="number of seed images")
    parser.add_argument("--iterations", type=int, default=3, help="T")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="description length")
    parser.add_argument("--describer-batch", type=int, default=16)
    parser.add_argument("--describer", choices=("llava_hf", "qwen2_vl"), default="qwen2_vl",
                        help="lmms-eval class on a tiny random model: llava_hf describes one image per "
                             "forward pass, qwen2_vl batches (what real describers do)")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from lmms_genbench.engine import ChainSpec
    from lmms_genbench.generators import build_generator
    from lmms_genbench.metrics import get_image_encoder
    from lmms_genbench.models.cycle import _smoke_describer_args, build_describer
    from lmms_genbench.tasks.mmeception.utils import P_DESC

    if args.describer == "qwen2_vl":
        from lmms_genbench.smoke.llava import QWEN2_VL_MAX_PIXELS, QWEN2_VL_MIN_PIXELS, tiny_qwen2_vl_path

        describer = build_describer("qwen2_vl", {
            "pretrained": str(tiny_qwen2_vl_path()), "device": "cpu", "device_map": "cpu",
            "batch_size": args.describer_batch, "min_pixels": QWEN2_VL_MIN_PIXELS, "max_pixels": QWEN2_VL_MAX_PIXELS,
        })
    else:
        describer = build_describer("llava_hf", _smoke_describer_args())
    generator = build_generator("smoke")
    encoder = get_image_encoder("tiny-vit", device="cpu", batch_size=32)
    spec = ChainSpec.from_request(
        P_DESC, {"iterations": args.iterations, "max_new_tokens": args.max_new_tokens, "temperature": 0, "do_sample": False}
    )
    # warm every model once so neither arm pays first-call costs
    warm = seed_images(1)
    describer.describe(warm, P_DESC, spec.describer_kwargs)
    generator.generate(["warm up"], [0])
    encoder.encode(warm)

    with tempfile.TemporaryDirectory() as root:
        # a small engine run first: peak memory must not grow from N=8 to N
        run_engine(seed_images(8), spec, describer, generator, args.iterations, os.path.join(root, "small"), args.describer_batch)
        rss_small = peak_rss_mb()
        with timed_models(describer, generator, encoder) as clock:
            t0 = time.perf_counter()
            gc_engine, stats = run_engine(
                seed_images(args.n), spec, describer, generator, args.iterations, os.path.join(root, "full"), args.describer_batch
            )
            engine_wall = time.perf_counter() - t0
        engine_busy = dict(clock.seconds)
        engine_union = clock.busy()
        rss_full = peak_rss_mb()

    images = seed_images(args.n)
    with timed_models(describer, generator, encoder) as clock:
        t0 = time.perf_counter()
        gc_seq = run_sequential(images, spec, describer, generator, encoder, args.iterations)
        seq_wall = time.perf_counter() - t0
    seq_busy = dict(clock.seconds)

    speedup = seq_wall / engine_wall
    overhead = engine_wall / engine_union - 1.0
    print(f"N={args.n} T={args.iterations} describer={args.describer} max_new_tokens={args.max_new_tokens} describer_batch={args.describer_batch}")
    print(f"engine:     wall {engine_wall:7.2f} s  inside models {engine_union:7.2f} s (union; calls overlap)  {json.dumps({k: round(v, 2) for k, v in engine_busy.items()})}")
    print(f"sequential: wall {seq_wall:7.2f} s  inside models {sum(seq_busy.values()):7.2f} s  {json.dumps({k: round(v, 2) for k, v in seq_busy.items()})}")
    print(f"engine calls: describe {stats.describe_calls} ({stats.describe_items} images), generate {stats.generate_calls} ({stats.generate_items} prompts)")
    print(f"GC@{args.iterations}: engine {gc_engine:.4f}  sequential {gc_seq:.4f}")
    print(f"peak RSS after N=8 engine run {rss_small:.0f} MB, after N={args.n} {rss_full:.0f} MB (growth {rss_full - rss_small:.0f} MB)")
    print(f"speedup_vs_sequential={speedup:.2f} overhead={overhead:.3f} peak_rss_mb={rss_full:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
