"""Every unified model of the Semantic Drift paper at its PUBLISHED widths on a CPU: the published
hidden sizes, heads, vocabulary, image resolution and token counts, with each transformer stack
cut to ``--layers`` layers (default 2) so that it fits a 24 GB machine; random bfloat16 weights.

    nice -n 10 python benchmarks/published_widths.py                    # every system, one table
    python benchmarks/published_widths.py --models showo,janus_1_3b --layers 2

Each system runs in its own child process (its peak RSS is its own): the builders of
``gpu_check.py`` (the classes the cycle builds with ``build_unified``, at the published
configuration) with the stacks cut, then one ``describe`` (``--new-tokens``, default 32; random
weights never stop early, so that many tokens) and one ``generate`` with ``--steps`` sampler steps
(default 2; Janus and VILA-U draw autoregressively: all their image tokens, no steps) at the
published resolution. Convolutional parts (MAGVIT-v2, the VAEs, VILA-U's decoder, BLIP3-o's UNet)
are built whole: they are not stacks of equal layers, and they are where the resolution costs.

Full depth, extrapolated (the table says so): every layer of a cut stack has the same shape, so
  * weights: parameters outside the stacks + the stacks' parameters x (published depth / cut depth), exact;
  * seconds: a forward hook times every stack layer; stage time - layer time + layer time x
    (published depth / cut depth). Linear in depth; ignores that the KV cache is longer per layer;
  * peak: measured peak RSS while describing and drawing, each stage's own (VmHWM reset before
    each stage, so the build's float32 initialisation peak is left out) - cut weights + full weights (activations do not grow with depth at
    inference; the KV cache does, by kv_per_layer x layers: small at these token counts).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: system -> (what is published, the stacks: path regex -> published depth)
SYSTEMS: dict[str, tuple[str, dict[str, int]]] = {
    "showo": ("Show-o 512x512: Phi-1.5 2048 wide, vocab 58498, 1024 codes at 512 px",
              {r"^lm\.model\.layers$": 24}),
    "vila_u": ("VILA-U 7B 256: LLaMA-2 4096 wide, vocab 32004, SigLIP-L 256 px, 256 x 4 codes",
               {r"^llm\.model\.layers$": 32, r"^tower\..*encoder\.layers$": 23, r"^depth\..*blocks$": 6}),
    "blip3o": ("BLIP3-o 4B: Qwen2.5-VL-3B 2048 wide, vocab 151936, DiT 1792 wide, SDXL UNet, 1024 px",
               {r"^lm\..*language_model\.layers$|^lm\.model\.layers$": 36, r"^lm\..*visual\.blocks$": 32,
                r"^dit\..*layers$": 24}),
    "bagel": ("BAGEL 7B MoT: Qwen2.5-7B 3584 wide x2 experts, vocab 152064, SigLIP 980 px, FLUX VAE, 1024 px",
              {r"^network\.language_model\..*layers$": 28, r"^network\.vit.*layers$": 26}),
    "janus_1_3b": ("Janus 1.3B: LLaMA 2048 wide, vocab 102400, SigLIP-L 384 px, 576 codes",
                   {r"^model\..*language_model\.layers$": 24, r"^model\..*vision_model\..*layers$": 24}),
    "janus_pro_7b": ("Janus-Pro 7B: LLaMA 4096 wide, vocab 102400, SigLIP-L 384 px, 576 codes",
                     {r"^model\..*language_model\.layers$": 30, r"^model\..*vision_model\..*layers$": 24}),
}


@contextlib.contextmanager
def _cut(name: str, layers: int):
    """The published configurations with every transformer stack at ``layers`` layers."""
    with contextlib.ExitStack() as stack:
        if name == "showo":
            from lmms_genbench.generators.unified.showo import real

            stack.enter_context(mock.patch.dict(real.PHI_1_5, num_hidden_layers=layers))
        elif name == "vila_u":
            from lmms_genbench.generators.unified.vila_u import real
            from lmms_genbench.generators.unified.vila_u.tower import KNOWN_SIGLIP

            stack.enter_context(mock.patch.dict(real.LLM, num_hidden_layers=layers))
            stack.enter_context(mock.patch.dict(real.RQTRANSFORMER["head"], n_layer=layers))
            stack.enter_context(mock.patch.dict(KNOWN_SIGLIP[real.RQVAESIGLIP["pretrained_model"]],
                                                num_hidden_layers=layers + 1))  # the last layer never runs
        elif name == "blip3o":
            from lmms_genbench.generators.unified.blip3o import real

            stack.enter_context(mock.patch.dict(real.QWEN25_VL_3B, num_hidden_layers=layers))
            stack.enter_context(mock.patch.dict(real.QWEN25_VL_3B["vision_config"], depth=layers,
                                                fullatt_block_indexes=[layers - 1]))
            stack.enter_context(mock.patch.dict(real.DIT, n_layers=layers))
        elif name == "bagel":
            from lmms_genbench.generators.unified.bagel import checkpoint

            original = checkpoint._configs

            def configs(transformers, llm, vit):  # the ViT's config has one layer more than runs
                return original(transformers, {**llm, "num_hidden_layers": layers},
                                {**vit, "num_hidden_layers": layers + 1})

            stack.enter_context(mock.patch.object(checkpoint, "_configs", configs))
        elif name.startswith("janus"):
            from transformers import JanusConfig

            from lmms_genbench.generators.unified import janus_deepseek

            original = janus_deepseek.real_config

            def real_config():
                config = original().to_dict()
                config["text_config"]["num_hidden_layers"] = layers
                config["vision_config"]["num_hidden_layers"] = layers
                return JanusConfig(**config)

            stack.enter_context(mock.patch.object(janus_deepseek, "real_config", real_config))
        yield


def _build(name: str, steps: int):
    from benchmarks import gpu_check

    if name == "showo":
        from lmms_genbench.generators.unified.showo.real import random_showo

        return random_showo(device="cpu", dtype="bfloat16", generation_timesteps=steps)
    if name == "blip3o":
        from lmms_genbench.generators.unified.blip3o.real import random_blip3o

        return random_blip3o(device="cpu", dtype="bfloat16", dit_steps=steps, decoder_steps=steps)
    if name == "bagel":
        import torch
        from transformers import AutoTokenizer

        from lmms_genbench.generators.unified.bagel import BagelUnified
        from lmms_genbench.generators.unified.bagel.loading import random_real_size

        tokenizer = AutoTokenizer.from_pretrained(str(gpu_check.PARITY / "bagel" / "BAGEL-7B-MoT-tiny"))
        network, vae = random_real_size("cpu", torch.bfloat16)
        return BagelUnified.from_parts(network, vae, tokenizer, device="cpu", dtype="bfloat16", num_timesteps=steps)
    if name == "janus_pro_7b":  # text overrides: Janus-Pro's language model; the cut is applied after
        return gpu_check._janus("cpu", "bfloat16", {"hidden_size": 4096, "intermediate_size": 11008,
                                                    "num_attention_heads": 32, "num_key_value_heads": 32})
    return getattr(gpu_check, name)(device="cpu", dtype="bfloat16")


def _stacks(model, patterns: dict[str, int], layers: int) -> list[tuple[str, object, int]]:
    """(path, ModuleList, published depth) of every cut stack; a list of ``layers`` layer-like
    modules that no pattern names is an error (the extrapolation would miss it)."""
    import torch

    found, unnamed = [], []
    for attr, part in vars(model).items():
        if not isinstance(part, torch.nn.Module):
            continue
        for path, module in part.named_modules(prefix=attr):
            if not isinstance(module, torch.nn.ModuleList) or len(module) != layers:
                continue
            depth = next((d for p, d in patterns.items() if re.search(p, path)), None)
            if depth is not None:
                found.append((path, module, depth))
            elif re.search(r"(Layer|Block)$", type(module[0]).__name__) and not re.search(
                    r"Resnet|AttnBlock|BasicTransformerBlock", type(module[0]).__name__):
                # convolutional parts are not cut (a UNet's cross-attention: SDXL's down_blocks.1 has 2)
                unnamed.append(f"{path} ({type(module[0]).__name__})")
    missing = [p for p in patterns if not any(re.search(p, f[0]) for f in found)]
    if missing or unnamed:
        raise RuntimeError(f"stacks not matched: patterns {missing}, lists {unnamed}")
    return found


def _rss_gb() -> tuple[float, float]:
    """(current, peak since the last :func:`_reset_peak`) resident memory of this process, GiB."""
    status = {line.split(":")[0]: int(line.split()[1]) for line in open("/proc/self/status") if line[:5] in ("VmRSS", "VmHWM")}
    return status["VmRSS"] / 2**20, max(status["VmHWM"], status["VmRSS"]) / 2**20


def _reset_peak() -> bool:
    """Start the peak (VmHWM) again from the current RSS, so that a stage's peak is neither the
    build's (a float32 initialisation cast to bfloat16 peaks above everything after it) nor the
    stage's before. Freed heap is handed back first (``malloc_trim``): memory the allocator kept
    would be reused by the stage unseen, and its activations read too small. False where the
    kernel does not allow the reset (the peaks then include what came before)."""
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to hand back
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:  # not Linux, or not allowed
        return False
    return _rss_gb()[1] <= _rss_gb()[0] + 0.01  # VmHWM back at VmRSS: the reset took


def one(name: str, layers: int, new_tokens: int, steps: int) -> dict:
    """Build, describe and draw ``name`` in this process; the measurements as a dict."""
    import torch
    from PIL import Image

    row: dict = {"model": name, "layers": layers, "new_tokens": new_tokens, "steps": steps}
    base, _ = _rss_gb()
    started = time.perf_counter()
    previous = torch.get_default_dtype()
    if name == "blip3o":  # its UNet initialised in float32 first (10 GB) would not fit beside the others
        torch.set_default_dtype(torch.bfloat16)
    try:
        with _cut(name, layers):
            model = _build(name, steps)
    finally:
        torch.set_default_dtype(previous)
    row["build_s"] = time.perf_counter() - started
    stacks = _stacks(model, SYSTEMS[name][1], layers)
    parts = [p for p in vars(model).values() if isinstance(p, torch.nn.Module)]
    params = sum(p.numel() for m in parts for p in m.parameters())
    stack_params = [sum(p.numel() for p in m.parameters()) for _, m, _ in stacks]
    full = params + sum(n * (d / layers - 1) for n, (_, _, d) in zip(stack_params, stacks))
    row.update(params_b=params / 1e9, full_params_b=full / 1e9, stacks={p: d for p, _, d in stacks})
    row["rss_weights_gb"], row["peak_build_gb"] = (x - base for x in _rss_gb())

    spent = [0.0] * len(stacks)  # seconds inside each stack's layers
    calls = [0] * len(stacks)  # forwards of each stack (its first layer's): the decoding steps a stage ran
    for i, (_, module, _) in enumerate(stacks):
        module[0].register_forward_pre_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1))
        for layer in module:
            layer.register_forward_pre_hook(lambda mod, *_: setattr(mod, "_t0", time.perf_counter()))
            layer.register_forward_hook(lambda mod, *_, i=i: spent.__setitem__(
                i, spent[i] + time.perf_counter() - mod._t0))

    def stage(key: str, call):  # its own peak: reset before it, after the build and the stage before
        row["peak_reset"] = _reset_peak() and row.get("peak_reset", True)
        row[f"rss_before_{key}_gb"] = _rss_gb()[0] - base
        before, called = list(spent), list(calls)
        t = time.perf_counter()
        out = call()
        row[f"{key}_s"] = time.perf_counter() - t
        row[f"{key}_forwards"] = {p: c - b for (p, _, _), c, b in zip(stacks, calls, called)}
        inside = [a - b for a, b in zip(spent, before)]
        row[f"{key}_full_s"] = row[f"{key}_s"] + sum(s * (d / layers - 1) for s, (_, _, d) in zip(inside, stacks))
        row[f"peak_{key}_gb"] = _rss_gb()[1] - base
        return out

    image = Image.new("RGB", (512, 512), (120, 80, 40))
    gen = {"max_new_tokens": new_tokens, "temperature": 0, "do_sample": False}
    with torch.inference_mode():
        texts = stage("describe", lambda: model.describe([image], "Describe this image in one detailed paragraph.", gen))
        images = stage("draw", lambda: model.generate(["a red bicycle leaning on a blue wall"], [0]))
    row["reply_chars"] = len(texts[0]) if isinstance(texts[0], str) else None  # random weights: may stop early
    failed = [r for r in [*texts, *images] if not isinstance(r, (str, Image.Image))]
    row["size"] = next((f"{i.width}x{i.height}" for i in images if isinstance(i, Image.Image)), "-")
    row["note"] = f"{len(failed)} failed: {failed[0]}" if failed else ""
    peak = max(row["peak_describe_gb"], row["peak_draw_gb"])  # the build's own peak is row["peak_build_gb"]
    row["peak_gb"] = peak
    row["full_peak_gb"] = peak + (full - params) * 2 / 2**30  # bf16: 2 bytes a parameter
    return row


#: sampler steps each system's draw runs as published (None: autoregressive, every image token, no steps)
PUBLISHED_STEPS = {"showo": 50, "bagel": 50, "blip3o": 50, "vila_u": None, "janus_1_3b": None, "janus_pro_7b": None}


def cost_rows(rows: list[dict], steps: int) -> str:
    """One row per system: hours of sdp_nocaps and sdp_geneval on this CPU at full depth, by
    benchmarks/cost.py's counts and rule (describe scaled from the tokens measured to the task's,
    an upper bound); draws scaled from ``steps`` to the published steps (an upper bound too: the
    decoder's one pass is scaled with them; BLIP3-o: DiT 30 and decoder 50 steps, scaled by 50);
    scoring at the H100 preset's measured encode rate (GeneVal's detector: not measured)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import cost

    h100 = cost.RATES["h100-real-size"]
    lines = ["| system | describe s/call | draw s/call | sdp_nocaps describe h | draw h | scoring h | "
             "sdp_geneval describe h | draw h | scoring h |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        published = PUBLISHED_STEPS[r["model"]]
        draw = r["draw_full_s"] * (published / steps if published else 1)
        rates = {"describe": r["describe_full_s"], "describe_tokens": r["new_tokens"], "draw": draw,
                 "encode": h100["encode"]}
        cells = []
        for task in ("sdp_nocaps", "sdp_geneval"):
            h = cost.hours(cost.protocol_counts(task), rates)
            cells += [f"{h['describe']:,.0f} (extrapolated, CPU)", f"{h['draw']:,.0f} (extrapolated, CPU)",
                      f"{h['encode']:.2f} (measured rate, H100 preset)" if "encode" in h else "- (not measured)"]
        lines.append(f"| {r['model']} | {r['describe_full_s']:.0f} at {r['new_tokens']} tokens (extrapolated, CPU) | "
                     f"{draw:,.0f} (extrapolated, CPU) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def activations(r: dict) -> str:
    """Each stage's activations, GiB: its own peak less the RSS it started from (rows measured with
    the peak reset before each stage; older rows say they are not)."""
    if "rss_before_draw_gb" not in r or not r.get("peak_reset"):
        return "not reset per stage"
    return ", ".join(f"{r[f'peak_{k}_gb'] - r[f'rss_before_{k}_gb']:.2f} ({k})" for k in ("describe", "draw"))


def _line(r: dict, paper: str) -> str:
    return (f"| {r['model']} | {paper} | {r['layers']} | {r['params_b']:.2f} B / {r['full_params_b']:.2f} B | "
            f"{activations(r)} | {r['peak_gb']:.1f} | {r['full_peak_gb']:.1f} | {r['build_s']:.0f} | "
            f"{r['describe_s']:.1f} | {r['describe_full_s']:.1f} | {r['draw_s']:.1f} | {r['draw_full_s']:.1f} | "
            f"{r['size']} | {r['note']} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(SYSTEMS), help=f"comma list of {', '.join(SYSTEMS)}")
    parser.add_argument("--layers", type=int, default=2, help="layers per transformer stack (default 2)")
    parser.add_argument("--new-tokens", type=int, default=32, help="tokens per description (default 32)")
    parser.add_argument("--steps", type=int, default=2, help="sampler steps per drawing (default 2)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads in each child (default 2)")
    parser.add_argument("--json", help="append each system's measurements to this JSON-lines file")
    parser.add_argument("--cost", help="print the cost rows of a --json file's systems (no run)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child: one system, prints one JSON line
    args = parser.parse_args()
    if args.cost:
        rows = [json.loads(line) for line in open(args.cost) if line.strip()]
        print(cost_rows([r for r in rows if r["model"] in PUBLISHED_STEPS], args.steps))
        return 0
    if args.one:
        import torch

        torch.set_num_threads(args.threads)
        print("RESULT " + json.dumps(one(args.one, args.layers, args.new_tokens, args.steps)), flush=True)
        return 0
    from benchmarks.gpu_check import chosen_models

    names = chosen_models(args.models, SYSTEMS, "published_widths")
    if names is None:
        return 2
    import torch

    print(f"# CPU ({os.cpu_count()} cores, {args.threads} threads), torch {torch.__version__}, bf16 random weights, "
          f"published widths, {args.layers} layers per stack, {args.new_tokens} new tokens, {args.steps} steps")
    print("| model | published | layers | params cut / full | activations GiB | peak RSS GiB | "
          "full-depth peak GiB (extrap.) | build s | describe s | full-depth describe s (extrap.) | draw s | "
          "full-depth draw s (extrap.) | image | note |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    failures = 0
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(args.threads)}
    for name in names:  # one at a time: each child's peak is its own
        cmd = [sys.executable, __file__, "--one", name, "--layers", str(args.layers), "--new-tokens",
               str(args.new_tokens), "--steps", str(args.steps), "--threads", str(args.threads)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        result = [line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode or not result:
            failures += 1
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"| {name} | {SYSTEMS[name][0]} | {args.layers} | - | - | - | - | - | - | - | - | - | - | "
                  f"failed: {tail[:200]} |", flush=True)
            continue
        row = json.loads(result[0])
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
        print(_line(row, SYSTEMS[name][0]), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
