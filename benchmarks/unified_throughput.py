"""The unified systems' hops per second on the CPU (a hop = one describe + one draw, the cycle's
unit), three arms measured side by side in one run, at the tiny parity size and a mid size:

    nice -n 10 python benchmarks/unified_throughput.py            # tiny: every system; mid: Show-o (6 min, 2 busy cores)
    python benchmarks/unified_throughput.py --quick               # tiny size, batch 1 and 4 (< 3 min)
    python benchmarks/unified_throughput.py --models showo,bagel --device cuda

(a) ``authors``: a port of the authors' own per-sample inference calls, their script's order,
    one sample at a time, over the same networks at the same weights (``unified_authors.py``
    names the file and function of theirs each follows); nothing of our engine.
(b) ``ours``: the class's public ``describe`` / ``generate`` as the cycle calls them, the model
    built with ``build_unified`` (tiny: the parity folders) at ``batch_size`` 1, 4 and 8.
(c) ``floor``: the same networks' forward passes alone, at the same batch: the seconds spent
    inside the networks' own calls during (b)'s run (every module of the model's networks down to
    three levels is timed, and a module's ``forward_many``, the outermost call counted once; on CUDA each is synchronised), i.e. (b)
    without a single line of Python between the forwards (tokenising, sampling, guidance
    arithmetic, PIL conversion, batching, our loops). The same prefill and key-value-cached
    decoding forwards, sampler steps and decoders (b) runs, so a forward (b) wastes is in the
    floor too: the authors' arm is what shows a forward saved.

Sizes: ``tiny`` = the parity checkpoints (tests/support/data/parity/<model>/, a source checkout;
Janus-Pro has no tiny folder there, so Janus is Janus-1.3B's); ``mid`` = the published widths,
vocabularies and token counts with 2 layers per stack, random float32 weights
(``published_widths._cut`` and the ports' ``random_*`` builders), with small images where the
model allows. The default run measures Show-o at mid size (8 x 8 codes, 128 px; MAGVIT-v2 whole);
Janus (its 576 codes, 384 px) and VILA-U (256 x 4 codes, 256 px) draw every code with one forward
at 2048 / 4096 wide, minutes a batch here, so they run at mid size only when named with
``--models``; BLIP3-o (its SDXL UNet is built whole: 10 GB of float32) and BAGEL (the 3584-wide,
152k-vocabulary MoT with two experts) are not built at mid size on a shared 2-core CPU.
Describing runs ``--new-tokens`` greedy tokens (an end-of-text token stops it earlier, the same in
every arm); drawing the model's own sampler with ``--steps`` steps where it has steps.

Goals (issue 48): ours@1 within 5% of the authors' loop (ours@1 / authors >= 0.95), ours@8 at least
2x the authors' loop, ours within 5% of the floor at every batch (ours / floor >= 0.95, as hops per
second). The table flags each goal not reached with ``NOT MET``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PARITY = ROOT / "tests" / "support" / "data" / "parity"
SYSTEMS = ("showo", "janus", "vila_u", "blip3o", "bagel")
#: systems not built at mid size, and why
NO_MID = {"blip3o": "SDXL UNet built whole (10 GB float32)", "bagel": "14B MoT at published widths (> 12 GB float32)"}
#: the systems the default run measures at mid size; the others draw hundreds of codes one forward
#: at a time at 2048 or 4096 wide (minutes a batch on a shared 2-core CPU: over the ~15 min budget)
MID_DEFAULT = ("showo",)
MID_COST = {"janus": "576 codes drawn one forward at a time, 2048 wide: over 8 min on 2 shared cores",
            "vila_u": "256 x 4 codes drawn one forward at a time, 4096 wide"}
QUESTION = "Describe this image in one detailed paragraph."
PROMPTS = ("a red bicycle leaning on a blue wall", "two cats", "a lighthouse at dusk over a calm sea, oil painting",
           "a bowl of green apples", "a city street in the rain at night", "a small wooden boat",
           "an astronaut riding a horse on the moon", "a yellow umbrella")


def tiny(name: str, device: str, steps: int, tokens: int):
    """The parity checkpoint of ``name``, as ``unified=<name>,unified.pretrained=<folder>,...`` builds it."""
    from lmms_genbench.generators.unified import build_unified

    common = {"device": device, "dtype": "float32", "max_new_tokens": tokens}
    if name == "showo":
        folder = PARITY / "showo"
        return build_unified("showo", pretrained=str(folder / "show-o-512x512"), vq_model=str(folder / "magvitv2"),
                             tokenizer=str(folder / "phi-1_5"), generation_timesteps=steps, **common)
    if name == "janus":
        return build_unified("janus", pretrained=str(PARITY / "janus13" / "Janus-1.3B"), **common)
    if name == "vila_u":
        return build_unified("vila_u", pretrained=str(PARITY / "vila_u" / "vila-u-7b-256"), **common)
    if name == "blip3o":
        folder = PARITY / "blip3o"
        return build_unified("blip3o", pretrained=str(folder / "BLIP3o-Model-4B"),
                             processor=str(folder / "Qwen2.5-VL-7B-Instruct"), dit_steps=steps, decoder_steps=steps,
                             image_size=64, **common)
    return build_unified("bagel", pretrained=str(PARITY / "bagel" / "BAGEL-7B-MoT-tiny"), num_timesteps=max(steps, 2),
                         image_size=64, **common)


def mid(name: str, device: str, steps: int, tokens: int):
    """Published widths, 2 layers per stack, random float32 weights, small images (the module docstring)."""
    import torch

    from benchmarks import gpu_check, published_widths

    if name in NO_MID:
        raise RuntimeError(f"not built at mid size: {NO_MID[name]}")
    torch.manual_seed(0)
    key = "janus_1_3b" if name == "janus" else name
    with published_widths._cut(key, 2):
        if name == "showo":
            from lmms_genbench.generators.unified.showo.real import random_showo

            model = random_showo(device=device, dtype="float32", generation_timesteps=steps, max_new_tokens=tokens)
            model.num_codes, model.image_size = 64, 8 * model.vq.geometry.downsample  # 8 x 8 codes, 128 px
            return model
        if name == "janus":
            model = gpu_check.janus_1_3b(device, "float32")
        else:
            model = gpu_check.vila_u(device, "float32")
    model.max_new_tokens = tokens
    return model


def _images(n: int):
    """``n`` images of two shapes, one the other turned: the same work each, as every arm runs a
    different count of them. BAGEL describes at an image's own resolution (attention quadratic in
    its ViT tokens): images growing one by one made batch 8 describe 2,095 tokens an image on
    average against batch 1's 1,591, and look slower than singles (it is not: benchmarks/README.md)."""
    from PIL import Image

    return [Image.new("RGB", (96, 80) if i % 2 == 0 else (80, 96), (40 + 25 * i, 200 - 20 * i, 90)) for i in range(n)]


class NetworkClock:
    """Seconds spent inside a model's networks: every module of its ``nn.Module`` attributes down to
    ``depth`` levels is timed by hooks, the outermost call counted once (nested calls are inside it)."""

    def __init__(self, model: Any, device: str, depth: int = 3) -> None:
        import torch

        self.seconds, self._open, self._start = 0.0, 0, 0.0
        self._sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
        self._handles = []
        for part in vars(model).values():
            if isinstance(part, torch.nn.Module):
                for path, module in part.named_modules():
                    if path.count(".") < depth:
                        self._handles.append(module.register_forward_pre_hook(self._enter))
                        self._handles.append(module.register_forward_hook(self._leave))
                        if callable(getattr(module, "forward_many", None)):
                            self._wrap_many(module)

    def _enter(self, *_):
        if self._open == 0:
            self._sync()
            self._start = time.perf_counter()
        self._open += 1

    def _leave(self, *_):
        self._open -= 1
        if self._open == 0:
            self._sync()
            self.seconds += time.perf_counter() - self._start

    def _wrap_many(self, module: Any) -> None:
        """A batched entry point beside ``forward`` (BAGEL's ``NaViT.forward_many`` runs its encoder
        layers, four levels down, directly): timed as a forward, or its layers would not be."""
        inner = module.forward_many

        def timed(*args: Any, **kwargs: Any) -> Any:
            self._enter()
            try:
                return inner(*args, **kwargs)
            finally:
                self._leave()

        module.forward_many = timed
        self._handles.append(_Unwrap(module))

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


class _Unwrap:
    """Undoes :meth:`NetworkClock._wrap_many` (the instance attribute shadows the method)."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def remove(self) -> None:
        self.module.__dict__.pop("forward_many", None)


def _timed(call: Callable[[], Any], clock: NetworkClock, device: str) -> tuple[float, float, Any]:
    """(wall seconds, seconds inside the networks, result) of ``call``."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    inside, started = clock.seconds, time.perf_counter()
    out = call()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - started, clock.seconds - inside, out


def measure(name: str, size: str, device: str, batches: list[int], samples: int, steps: int, tokens: int,
            repeats: int = 1) -> list[dict]:
    """The rows of one system at one size: authors (per sample), then ours and the floor per batch,
    the arms taking turns ``repeats`` times; each arm's fastest turn is kept (a shared machine's
    load only ever slows a turn down), the floor with ours' fastest turn (it is timed inside it)."""
    import torch

    from benchmarks.unified_authors import AUTHORS

    model = (tiny if size == "tiny" else mid)(name, device, steps, tokens)
    clock = NetworkClock(model, device)
    describe_one, draw_one = AUTHORS[name]
    gen = {"max_new_tokens": tokens, "temperature": 0, "do_sample": False}
    try:
        model.batch_size = 1  # warm-up: first-call costs (allocations, lazy tables) in no arm
        model.describe(_images(1), QUESTION, gen)
        model.generate(PROMPTS[:1], [0])

        def authors():
            for i, image in enumerate(_images(samples)):
                describe_one(model, image, QUESTION, tokens)
                draw_one(model, PROMPTS[i % len(PROMPTS)], i)

        best: dict[tuple[str, int], dict] = {}

        def keep(arm: str, batch: int, hops: float, note: str = "", floor: float | None = None) -> None:
            row = best.setdefault((arm, batch), {"arm": arm, "batch": batch, "hops_s": 0.0, "note": note})
            if hops > row["hops_s"]:
                row["hops_s"] = hops
                if floor is not None:  # the floor of ours' fastest turn: the two are one run
                    best[("floor", batch)] = {"arm": "floor", "batch": batch, "hops_s": floor}

        for _ in range(repeats):
            if ("authors", 1) not in best or "hops_s" in best[("authors", 1)]:
                try:
                    wall, _, _ = _timed(authors, clock, device)
                    keep("authors", 1, samples / wall)
                except Exception as exc:  # noqa: BLE001 - one arm's failure is its row; the others still run
                    best[("authors", 1)] = {"arm": "authors", "batch": 1,
                                            "note": f"failed: {type(exc).__name__}: {str(exc)[:120]}"}
            for batch in batches:
                model.batch_size = batch
                prompts = [PROMPTS[i % len(PROMPTS)] for i in range(batch)]
                wall_d, net_d, texts = _timed(lambda: model.describe(_images(batch), QUESTION, gen), clock, device)
                wall_g, net_g, images = _timed(lambda: model.generate(prompts, list(range(batch))), clock, device)
                failed = [r for r in [*texts, *images] if not isinstance(r, str) and not hasattr(r, "size")]
                keep("ours", batch, batch / (wall_d + wall_g), f"{len(failed)} failed: {failed[0]}" if failed else "",
                     floor=batch / max(net_d + net_g, 1e-9))
        rows = [best[("authors", 1)]] + [best[(arm, b)] for b in batches for arm in ("ours", "floor")]
    finally:
        clock.close()
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return rows


def ratios(rows: list[dict]) -> dict[tuple[str, int], str]:
    """The goals' ratios (arm, batch) -> text, ``NOT MET`` where a goal is not reached."""
    rate = {(r["arm"], r["batch"]): r.get("hops_s") for r in rows}
    authors = rate.get(("authors", 1))
    out: dict[tuple[str, int], str] = {}
    for (arm, batch), hops in rate.items():
        if arm != "ours" or not hops:
            continue
        parts = []
        if authors and batch == 1:
            x = hops / authors
            parts.append(f"ours@1/authors {x:.2f}" + ("" if x >= 0.95 else " NOT MET (goal >= 0.95)"))
        if authors and batch == 8:
            x = hops / authors
            parts.append(f"ours@8/authors {x:.2f}" + ("" if x >= 2.0 else " NOT MET (goal >= 2)"))
        floor = rate.get(("floor", batch))
        if floor:
            x = hops / floor
            parts.append(f"ours/floor {x:.2f}" + ("" if x >= 0.95 else " NOT MET (goal >= 0.95)"))
        out[(arm, batch)] = "; ".join(parts)
    return out


HEADER = "| system | size | arm | batch | hops/s | goals (issue 48) | note |\n|---|---|---|---|---|---|---|"


def table_rows(name: str, size: str, rows: list[dict]) -> str:
    """One system's lines of the table (printed as soon as it is measured)."""
    goals = ratios(rows)
    lines = []
    for r in rows:
        hops = f"{r['hops_s']:.3f}" if r.get("hops_s") else "-"
        lines.append(f"| {name} | {size} | {r['arm']} | {r['batch']} | {hops} | "
                     f"{goals.get((r['arm'], r['batch']), '')} | {r.get('note', '')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=None,
                        help=f"comma list of {', '.join(SYSTEMS)} (default all; at mid size {', '.join(MID_DEFAULT)})")
    parser.add_argument("--sizes", default="tiny,mid", help="comma list of tiny, mid (default both)")
    parser.add_argument("--batches", default="1,4,8", help="ours' batch sizes (default 1,4,8)")
    parser.add_argument("--samples", type=int, default=2, help="samples the authors' loop runs (default 2)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="turns of every arm, the fastest kept (default 3 at tiny size, 1 at mid)")
    parser.add_argument("--steps", type=int, default=2, help="sampler steps per drawing (default 2)")
    parser.add_argument("--new-tokens", type=int, default=8, help="greedy tokens per description (default 8)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2,
                        help="torch threads at mid size (default 2); the tiny networks run on one thread, where more only "
                             "contend (tests/support/threads.py)")
    parser.add_argument("--quick", action="store_true", help="tiny size only, batches 1 and 4 (< 3 min)")
    args = parser.parse_args(argv)
    from benchmarks.gpu_check import chosen_models

    chosen = args.models is not None
    names = chosen_models(args.models or ",".join(SYSTEMS), SYSTEMS, "unified_throughput")
    if names is None:
        return 2
    sizes = ["tiny"] if args.quick else [s.strip() for s in args.sizes.split(",") if s.strip()]
    if not sizes or set(sizes) - {"tiny", "mid"}:
        print(f"unified_throughput: --sizes: expected tiny and/or mid; got {args.sizes!r}", file=sys.stderr)
        return 2
    batches = [1, 4] if args.quick else [int(b) for b in args.batches.split(",")]
    import torch

    print(f"# {args.device}, {os.cpu_count()} cores, 1 thread at tiny size, {args.threads} at mid, torch {torch.__version__}; "
          f"{args.new_tokens} tokens a description, {args.steps} sampler steps, authors' loop over {args.samples} samples, "
          f"each arm's fastest of {args.repeats or '3 (tiny) / 1 (mid)'} turns")
    print(HEADER, flush=True)
    started, failures = time.perf_counter(), 0
    for size in sizes:
        torch.set_num_threads(1 if size == "tiny" else args.threads)
        for name in names:
            skip = NO_MID.get(name) or (None if chosen or name in MID_DEFAULT else
                                        f"not in the default run: {MID_COST[name]}; ask for it with --models")
            if size == "mid" and skip:
                print(table_rows(name, size, [{"arm": "-", "batch": "-", "note": f"skipped: {skip}"}]), flush=True)
                continue
            try:
                repeats = args.repeats or (3 if size == "tiny" else 1)
                rows = measure(name, size, args.device, batches, args.samples, args.steps, args.new_tokens, repeats)
            except Exception as exc:  # noqa: BLE001 - one system's failure is its row
                failures += 1
                rows = [{"arm": "-", "batch": "-", "note": f"failed: {type(exc).__name__}: {str(exc)[:160]}"}]
            print(table_rows(name, size, rows), flush=True)
    print(f"total {time.perf_counter() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
