"""Resume and verification throughput of the artifact store (issue 34, item 7).

Builds a store of about ``--hops`` hops (chains of ``2 * --iterations + 1`` hops, images of
``--side`` px drawn by a stand-in generator, texts by a stand-in describer: no model runs) with
the cycle engine, then times, each the median of ``--repeats``:

* ``verify``: ``store verify`` over the whole store (one sha256 per hop, read only);
* ``rerun``: the engine over the complete store (planning verifies each chain once, unlocked;
  nothing is computed);
* ``resume``: the engine over the store with every chain's last hop deleted: each chain is
  verified at planning and again under its lock (the second hashing), then its last hop computed;
* ``one pass``: one ``check_chain`` over the same chains, what the second hashing costs: the
  resume without it is ``resume - one pass``.

    python benchmarks/store_throughput.py [--hops 10000] [--iterations 5] [--side 128] [--repeats 3]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

from PIL import Image


class Describer:
    name = "bench-describer"

    def describe(self, images, prompt, gen_kwargs):
        return [f"a picture whose corner is {img.getpixel((0, 0))}" for img in images]


class Generator:
    name = "bench-generator"
    batch_size = 8

    def __init__(self, side: int) -> None:
        self.side = side

    def generate(self, prompts, seeds):
        out = []
        for prompt, seed in zip(prompts, seeds):
            img = Image.linear_gradient("L").resize((self.side, self.side)).convert("RGB")
            img.putpixel((0, 0), (seed % 256, len(prompt) % 256, 7))
            out.append(img)
        return out


def _jobs(root: Path, chains: int, iterations: int, side: int):
    from lmms_genbench.engine import ArtifactStore, ChainJob, ChainSpec

    store = ArtifactStore(root)
    spec = ChainSpec.from_request("Describe the image.", {"iterations": iterations})
    ns = store.namespace("bench", "gen", spec.protocol_id("bench"))
    seeds = [Image.new("RGB", (side, side), (i % 256, (i // 256) % 256, 99)) for i in range(chains)]
    return [ChainJob(str(i), spec, store.chain(ns, str(i)), (lambda s=s: [s])) for i, s in enumerate(seeds)]


def _engine(side: int):
    from lmms_genbench.engine import CycleEngine

    return CycleEngine(Describer(), Generator(side), progress=False)


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hops", type=int, default=10_000)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--side", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from lmms_genbench.store import check_chain, verify_store

    per_chain = 2 * args.iterations + 1
    chains = math.ceil(args.hops / per_chain)
    hops = chains * per_chain
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        jobs = _jobs(root, chains, args.iterations, args.side)
        built = _timed(lambda: _engine(args.side).run(jobs))
        size = sum(p.stat().st_size for p in root.rglob("0[0-9][0-9].*"))
        print(f"store: {chains} chains x {per_chain} hops = {hops} hops, {size / 2**20:.1f} MiB "
              f"({args.side} px images), built in {built:.1f} s; cpus {os.cpu_count()}")
        rows = {"verify": [], "rerun": [], "resume": [], "one pass": []}
        last = per_chain - 1
        for _ in range(args.repeats):
            rows["verify"].append(_timed(lambda: [c for _, c in verify_store(root)]))
            rows["rerun"].append(_timed(lambda: _engine(args.side).run(jobs)))
            for job in jobs:  # every chain loses its last hop and its record
                job.location.path(last, job.spec.kind(last)).unlink()
                lines = (job.location.directory / "hops.jsonl").read_text().splitlines()
                (job.location.directory / "hops.jsonl").write_text("\n".join(lines[:-1]) + "\n")
            dirs = [(j.location.directory, j.spec.kind) for j in jobs]
            rows["one pass"].append(_timed(lambda: [check_chain(d, k, last, repair=False) for d, k in dirs]))
            rows["resume"].append(_timed(lambda: _engine(args.side).run(jobs)))
        for name, times in rows.items():
            t = statistics.median(times)
            counted = hops if name in ("verify", "rerun") else chains * last
            print(f"{name:>9}: {t:7.2f} s  {counted / t:9.0f} hops/s  ({counted} hops)")
        second = statistics.median(rows["one pass"])
        resume = statistics.median(rows["resume"])
        print(f"resume without the second hashing (resume - one pass): {resume - second:.2f} s, "
              f"{chains * last / (resume - second):.0f} hops/s; the second hashing is {100 * second / resume:.0f} % "
              "of the resume")


if __name__ == "__main__":
    main()
