"""What a full benchmark costs: exact call counts from the protocol, wall time from measured rates.

    python benchmarks/cost.py                          # every workload at the measured preset
    python benchmarks/cost.py --rate describe=2.0 --rate draw=1.1 --rate encode=0.006
    python benchmarks/cost.py --from-store ./artifacts/<describer>/<generator>/<task namespace>
    python benchmarks/cost.py --from-results ./logs/<model>/<date>_results.json
    python benchmarks/cost.py --json

Counts are exact: chains come from the datasets' documented sizes (``DOCS`` below, sources
named), hops from each task's YAML (``iterations`` / ``generations``, ``direction``), and which
hops describe and which draw from ``store.chain.hop_kind``, the function the engine itself
uses. They count first attempts on an empty store; a resumed run computes only what is
missing, and failed requests retried by a client add to them.

Times are ``calls x seconds per item``. Rates are seconds per item at the batch sizes they were
measured with: a preset (``RATES``, with the date and machine that measured it), your own
``--rate stage=seconds``, or a finished run's own figures: the engine's ``describe_seconds /
describe_items`` and ``generate_seconds / generate_items``, from the namespace's ``runs.jsonl``
(``--from-store``) or from the results file's ``throughput`` (``--from-results``), both read by
``lmms_genbench.analysis.rates``. A stage without a rate prints ``-``: nothing is guessed.
Describe time is scaled linearly from the measured new tokens to the task's
``max_new_tokens`` (an upper bound: prefill is counted as decode and replies may stop early).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "lmms_genbench" / "tasks"

# Documented sizes of what each task reads (../shared/DATASET_SCHEMAS.md and the task YAMLs).
DOCS = {
    # lmms-lab/MME test: 2,374 rows, two questions per image; GenCeption uses each image once
    "mmeception": {"chains": 2374 // 2, "yaml": "mmeception/mmeception.yaml"},
    # mollahsabbir/nd400: 400 pairs, each run as a text-first and an image-first chain
    "sdp_nocaps": {"chains": 400 * 2, "yaml": "sdp/sdp_nocaps.yaml"},
    # djghosh13/geneval evaluation_metadata.jsonl (or its rewrites, GenEval-R): 553 prompts
    "sdp_geneval": {"chains": 553, "yaml": "sdp/sdp_geneval.yaml"},
}

# Measured rates, seconds per item. Each preset names its date, machine and networks; the
# figures are the README's Speed section (cycle_throughput.py --size real --device cuda, floor by
# stage, median of 5: describe 1.60 s for 16 images, draw 2.68 s for 16, encode 0.19 s for 32).
RATES = {
    "h100-real-size": {
        "measured": "2026-11, one H100 80GB, bf16, random weights at real layer sizes",
        "describer": "Qwen2-VL-2B sizes, batch 16",
        "generator": "SD 1.5 UNet+VAE, 512 px, 20 DDIM steps, batch 8",
        "describe": 1.60 / 16,
        "describe_tokens": 32,
        "draw": 2.68 / 16,
        "encode": 0.19 / 32,  # ViT-B/16, GenCeption's similarity encoder size
    },
}
STAGES = ("describe", "draw", "encode", "detect")


class _Loader(yaml.SafeLoader):
    """Task YAML without lmms-eval: ``!function`` tags are read as their text."""


_Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def task_config(path: Path) -> dict:
    """A task YAML with its ``include:`` chain applied (the including file wins)."""
    cfg = yaml.load(path.read_text(), Loader=_Loader) or {}
    base = cfg.pop("include", None)
    if base is None:
        return cfg
    merged = task_config(path.parent / base)
    kwargs = {**merged.get("generation_kwargs", {}), **cfg.get("generation_kwargs", {})}
    merged.update(cfg)
    merged["generation_kwargs"] = kwargs
    return merged


def protocol_counts(task: str) -> dict:
    """Describe and draw calls, images to encode or detect, for one task on an empty store."""
    from lmms_genbench.store import hop_kind

    entry = DOCS[task]
    kw = task_config(TASKS / entry["yaml"])["generation_kwargs"]
    hops = kw["generations"] if "generations" in kw else 2 * kw.get("iterations", 3)
    directions = ["text_first", "image_first"] if "direction_field" in kw else [kw["direction"]]
    per_direction = entry["chains"] // len(directions)
    describe = draw = images = 0
    for direction in directions:
        kinds = [hop_kind(direction, h) for h in range(1, hops + 1)]
        describe += per_direction * kinds.count("text")
        draw += per_direction * kinds.count("image")
        # every image of a chain (the seed, if it is one, and each drawing) is scored once
        images += per_direction * (kinds.count("image") + (hop_kind(direction, 0) == "image"))
    counts = {"task": task, "chains": entry["chains"], "hops": hops, "describe": describe, "draw": draw,
              "tokens": kw.get("max_new_tokens")}
    if task == "sdp_geneval":
        counts["detect"] = draw  # GenEval's checks run on every drawn generation
    else:
        counts["encode"] = images
    return counts


def autobench_counts() -> dict:
    """An AutoBench-V build at the paper's settings (4 x 6 aspects, 3 levels, 10 each)."""
    from lmms_genbench.autobench.build import default_build_cost

    cost = default_build_cost()
    return {"task": "autobench build", "examiner": cost["examiner_calls"], "draw": cost["images"],
            "worst_examiner": cost["worst_case_examiner_calls"], "worst_draw": cost["worst_case_images"]}


def rates_from_store(namespace: Path) -> dict:
    """Seconds per item of the last run in a namespace that computed anything."""
    from lmms_genbench.analysis.rates import rates_from_runs_jsonl

    found = rates_from_runs_jsonl(namespace / "runs.jsonl")
    if not found:
        raise SystemExit(f"cost: {namespace / 'runs.jsonl'} has no run that computed a hop; "
                         "pass a namespace of a run that described or drew something")
    return {"measured": f"this store's last computing run ({namespace})",
            **{stage: rate["seconds_per_item"] for stage, rate in found.items()}}


def rates_from_results(path: Path) -> dict:
    """Seconds per item that an lmms-eval results file's ``throughput`` holds (the cycle model logs
    them there)."""
    from lmms_genbench.analysis.rates import rates_from_throughput

    found = rates_from_throughput(json.loads(path.read_text(encoding="utf-8")).get("throughput"))
    if not found:
        raise SystemExit(f"cost: {path} has no describe or draw rate in its 'throughput'; pass the results "
                         "file of a --model cycle run that described or drew something")
    return {"measured": f"this run's own figures ({path})",
            **{stage: rate["seconds_per_item"] for stage, rate in found.items()}}


def hours(counts: dict, rates: dict) -> dict:
    """Per-stage and total hours; a stage with calls and no rate makes the total unknown."""
    out, total = {}, 0.0
    for stage in STAGES:
        n = counts.get(stage)
        if not n:
            continue
        rate = rates.get(stage)
        if rate is not None and stage == "describe" and counts.get("tokens") and rates.get("describe_tokens"):
            rate *= counts["tokens"] / rates["describe_tokens"]
        out[stage] = None if rate is None else n * rate / 3600
        total = None if total is None or out[stage] is None else total + out[stage]
    out["total"] = total
    return out


def _h(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(rates: dict) -> str:
    head = ("| workload | chains x hops | describe calls | draw calls | images scored | "
            "describe h | draw h | scoring h | total h | API requests |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for task in DOCS:
        c = protocol_counts(task)
        h = hours(c, rates)
        scored = c.get("encode") or c.get("detect")
        scoring = h.get("encode", h.get("detect"))
        lines.append(f"| {task} | {c['chains']} x {c['hops']} | {c['describe']:,} | {c['draw']:,} | {scored:,} | "
                     f"{_h(h.get('describe'))} | {_h(h.get('draw'))} | {_h(scoring)} | {_h(h['total'])} | "
                     f"{c['describe'] + c['draw']:,} |")
    a = autobench_counts()
    draw_h = None if rates.get("draw") is None else a["draw"] * rates["draw"] / 3600
    lines.append(f"| autobench build (paper settings) | - | {a['examiner']:,} examiner | {a['draw']:,} "
                 f"(worst {a['worst_draw']:,}) | - | - | {_h(draw_h)} | - | - | "
                 f"{a['examiner'] + a['draw']:,} (worst {a['worst_examiner'] + a['worst_draw']:,}) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="h100-real-size", choices=sorted(RATES))
    parser.add_argument("--rate", action="append", default=[], metavar="STAGE=SECONDS",
                        help=f"seconds per item for a stage ({', '.join(STAGES)}); overrides the preset")
    parser.add_argument("--describe-tokens", type=int, help="new tokens the describe rate was measured at")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--from-store", type=Path, help="a task namespace folder holding runs.jsonl")
    source.add_argument("--from-results", type=Path, help="an lmms-eval *_results.json of a --model cycle run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rates = dict(RATES[args.preset])
    if args.from_store is not None:
        rates = rates_from_store(args.from_store)
    if args.from_results is not None:
        rates = rates_from_results(args.from_results)
    entered = []
    for item in args.rate:
        stage, _, value = item.partition("=")
        try:
            seconds = float(value)
        except ValueError:
            seconds = math.nan
        if stage not in STAGES or not math.isfinite(seconds) or seconds < 0:
            parser.error(f"--rate takes STAGE=SECONDS with STAGE one of {', '.join(STAGES)} and SECONDS >= 0, "
                         f"got {item!r}")
        rates[stage] = seconds
        entered.append(stage)
    if "describe" in entered:
        rates.pop("describe_tokens", None)  # a describe rate you enter is taken as it is ...
    if args.describe_tokens is not None:
        rates["describe_tokens"] = args.describe_tokens  # ... unless you say at how many new tokens
    if entered:
        rates["measured"] = f"{rates.get('measured')}; entered: {', '.join(entered)}"
    if args.json:
        out = {t: {"counts": protocol_counts(t), "hours": hours(protocol_counts(t), rates)} for t in DOCS}
        out["autobench"] = autobench_counts()
        print(json.dumps({"rates": rates, "workloads": out}, indent=2))
        return 0
    print(f"rates: {rates.get('measured')}")
    for key in ("describer", "generator"):
        if key in rates:
            print(f"  {key}: {rates[key]}")
    print(table(rates))
    print("hours are one device's wall time (GPU-hours on one GPU); API requests are describe + draw calls "
          "(autobench: examiner calls + images), first attempts on an empty store")
    return 0


if __name__ == "__main__":
    sys.exit(main())
