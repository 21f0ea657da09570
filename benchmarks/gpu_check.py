"""Every unified model of the Semantic Drift paper at its REAL published size, random weights, on one
CUDA GPU: peak GPU memory and seconds per describe and per draw at the paper's resolution.

    bash benchmarks/gpu_check.sh                 # every model below, one table (under 8 minutes on an H100/H200)
    python benchmarks/gpu_check.py --models showo,janus_pro --draws 1

For whoever is lent a GPU: nothing is downloaded (each model's ``random_*`` builder makes the
network at the published configuration in bf16 directly on the GPU; tokenizers are the test data's
small ones, which shortens prompts by a few tokens and does not change the cost). Random weights
describe with random tokens: every description is cut at ``--new-tokens`` tokens, so "seconds per
describe" is the cost of that many tokens. Drawing runs the model's full default sampler (steps,
guidance) at its own resolution. One line per model; a model that fails says why and the rest go on.
Refuses in one line without CUDA.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

#: model -> (builder "module:function" returning a UnifiedModel at real size, what the paper ran)
BUILDERS: dict[str, tuple[str, str]] = {
    "bagel": ("benchmarks.gpu_check:bagel", "BAGEL 7B MoT (14B), 1024 px, 50 steps, text guidance 4"),
    "showo": ("benchmarks.gpu_check:showo", "Show-o 1.3B, 512 px, 50 steps, guidance 5"),
    "vila_u": ("benchmarks.gpu_check:vila_u", "VILA-U 7B, 256 px, guidance 3"),
    "janus_1_3b": ("benchmarks.gpu_check:janus_1_3b", "Janus 1.3B, 384 px, guidance 5"),
    "janus_pro_7b": ("benchmarks.gpu_check:janus_pro_7b", "Janus-Pro 7B, 384 px, guidance 5"),
    "blip3o": ("lmms_genbench.generators.unified.blip3o.real:random_blip3o",
               "BLIP3-o 4B, 1024 px, DiT 30 steps + decoder 50 steps, guidance 3"),
}

#: the test data's tiny tokenizers and processors (a source checkout): no download
PARITY = Path(__file__).resolve().parents[1] / "tests" / "support" / "data" / "parity"


def bagel(device: str, dtype: str):
    import torch
    from transformers import AutoTokenizer

    from lmms_genbench.generators.unified.bagel import BagelUnified
    from lmms_genbench.generators.unified.bagel.loading import random_real_size

    tokenizer = AutoTokenizer.from_pretrained(str(PARITY / "bagel" / "BAGEL-7B-MoT-tiny"))  # Qwen2.5's markers
    network, vae = random_real_size(device, getattr(torch, dtype))
    return BagelUnified.from_parts(network, vae, tokenizer, device=device, dtype=dtype)


def showo(device: str, dtype: str):
    from lmms_genbench.generators.unified.showo.real import random_showo

    return random_showo(device=device, dtype=dtype)


def vila_u(device: str, dtype: str):
    from lmms_genbench.generators.unified.vila_u.real import random_model

    return random_model(str(PARITY / "vila_u" / "vila-u-7b-256" / "llm"), device=device, dtype=dtype)


def _janus(device: str, dtype: str, text: dict):
    """transformers' Janus at deepseek-ai/Janus-1.3B's sizes (``text`` overrides its language model),
    behind our class loaded from the tiny DeepSeek-layout checkpoint (its tokenizer and chat format)."""
    import dataclasses

    import torch
    from transformers import JanusConfig, JanusForConditionalGeneration

    from lmms_genbench.generators.unified import build_unified
    from lmms_genbench.generators.unified.janus_deepseek import real_config

    janus = build_unified("janus", pretrained=str(PARITY / "janus13" / "Janus-1.3B"), device=device, dtype=dtype)
    config = real_config().to_dict()
    config["text_config"].update(text)
    width = config["text_config"]["hidden_size"]
    config["vision_config"]["projection_dim"] = width
    config["vq_config"].update(projection_dim=width, image_token_embed_dim=width)
    config = JanusConfig(**config)
    config.image_token_id = janus._chat.image_id
    with torch.device(device):
        model = JanusForConditionalGeneration._from_config(config, dtype=getattr(torch, dtype))
    model.generation_config = janus.model.generation_config
    janus.model = model.eval()
    tokens, size = int(config.vision_config.num_image_tokens), int(config.vision_config.image_size)  # 576, 384
    janus._chat = dataclasses.replace(janus._chat, num_image_tokens=tokens, image_size=size)
    janus.image_tokens = tokens
    janus.image_size = int(config.vq_config.num_patches) * 2 ** (len(config.vq_config.channel_multiplier) - 1)
    return janus


def janus_1_3b(device: str, dtype: str):
    return _janus(device, dtype, {})


def janus_pro_7b(device: str, dtype: str):
    # deepseek-community/Janus-Pro-7B's language model (LLaMA 4096 wide, 30 layers, 32 heads, MLP 11008)
    return _janus(device, dtype, {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 30,
                                  "num_attention_heads": 32, "num_key_value_heads": 32})


def _measure(name: str, spec: str, device: str, new_tokens: int, draws: int) -> dict:
    import torch
    from PIL import Image

    module, _, func = spec.partition(":")
    if module == "benchmarks.gpu_check":  # run as a script: the builders are in this module
        module = __name__
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    model = getattr(importlib.import_module(module), func)(device=device, dtype="bfloat16")
    torch.cuda.synchronize()
    row = {"model": name, "build_s": time.perf_counter() - started,
           "weights_gb": torch.cuda.memory_allocated() / 2**30}
    image = Image.new("RGB", (512, 512), (120, 80, 40))
    gen = {"max_new_tokens": new_tokens, "temperature": 0, "do_sample": False}
    model.describe([image], "Describe this image.", gen)  # warm-up (kernels, caches)
    torch.cuda.synchronize()
    t = time.perf_counter()
    texts = model.describe([image], "Describe this image in one detailed paragraph.", gen)
    torch.cuda.synchronize()
    row["describe_s"] = time.perf_counter() - t
    t = time.perf_counter()
    images = model.generate(["a red bicycle leaning on a blue wall"] * draws, list(range(draws)))
    torch.cuda.synchronize()
    row["draw_s"] = (time.perf_counter() - t) / draws
    failed = [r for r in [*texts, *images] if not isinstance(r, (str, Image.Image))]
    row["size"] = next((f"{i.width}x{i.height}" for i in images if isinstance(i, Image.Image)), "-")
    row["peak_gb"] = torch.cuda.max_memory_allocated() / 2**30
    row["note"] = f"{len(failed)} failed: {failed[0]}" if failed else ""
    del model
    return row


def chosen_models(text: str, known, prog: str) -> list[str] | None:
    """The models ``--models`` names (comma-separated), or None after one line naming the unknown ones."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = sorted(set(names) - set(known))
    if unknown:
        print(f"{prog}: --models: unknown {unknown}; choose from {sorted(known)}", file=sys.stderr)
        return None
    return names

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(BUILDERS), help=f"comma list of {', '.join(BUILDERS)}")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--new-tokens", type=int, default=128, help="tokens per description (default 128)")
    parser.add_argument("--draws", type=int, default=1, help="drawings timed per model (default 1)")
    parser.add_argument("--budget", type=float, default=450.0, help="seconds; models not started by then are skipped")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("gpu_check: needs torch with CUDA; none is installed here", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_check: needs a CUDA GPU and none is visible (torch.cuda.is_available() is False); run it on a GPU machine",
              file=sys.stderr)
        return 2
    names = chosen_models(args.models, BUILDERS, "gpu_check")
    if names is None:
        return 2
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, bf16, random weights at real size")
    print("| model | paper's setting | weights GB | peak GB | describe s | draw s | image | build s | note |")
    print("|---|---|---|---|---|---|---|---|---|")
    start, failures = time.perf_counter(), 0
    for name in names:
        spec, paper = BUILDERS[name]
        if time.perf_counter() - start > args.budget:
            print(f"| {name} | {paper} | - | - | - | - | - | - | skipped: past the {args.budget:.0f} s budget |")
            continue
        try:
            r = _measure(name, spec, args.device, args.new_tokens, args.draws)
            print(f"| {name} | {paper} | {r['weights_gb']:.1f} | {r['peak_gb']:.1f} | {r['describe_s']:.2f} | "
                  f"{r['draw_s']:.2f} | {r['size']} | {r['build_s']:.0f} | {r['note']} |", flush=True)
        except Exception as exc:  # one model's failure is its row; the rest still run
            failures += 1
            print(f"| {name} | {paper} | - | - | - | - | - | - | failed: {type(exc).__name__}: {str(exc)[:160]} |", flush=True)
        finally:
            import gc

            gc.collect()
            torch.cuda.empty_cache()
    print(f"total {time.perf_counter() - start:.0f} s, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
