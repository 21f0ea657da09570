"""``lmms-genbench autobench {build,cost,bias}``: argument parsing and handlers.

Heavy imports (lmms-eval models, generators, datasets) happen in the handlers.
"""

from __future__ import annotations

import argparse
import json
import sys

from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, group


def _thresholds(text: str) -> dict[str, float]:
    out = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--thresholds: expected level=value pairs such as easy=1.0,medium=0.8,hard=0.8; got {text!r}"
            ) from None
        if not eq:
            raise argparse.ArgumentTypeError(f"--thresholds: {part!r} has no '='")
    return out


def _config(args):
    from ..autobench.build import PAPER_THRESHOLDS, BuildConfig

    thresholds = {**PAPER_THRESHOLDS, **(args.thresholds or {})}
    return BuildConfig(
        capability=args.capability, definition=args.definition, n_general=args.n_general,
        m_fine=args.m_fine, per_level=args.per_level, levels=tuple(args.levels),
        thresholds=thresholds, max_redraws=args.max_redraws, max_retries=args.max_retries,
        n_validation_questions=args.validation_questions, seed=args.seed,
        max_new_tokens=args.examiner_max_new_tokens, temperature=args.examiner_temperature,
        avoid_list=args.avoid_list, yes_no_reader=args.yes_no_reader,
    )


def default_device() -> str:
    """``cuda`` where a GPU is visible, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def with_device(args: dict, parameters: list[str], device: str) -> dict:
    """``args`` with ``device`` (and ``device_map``, which transformers 5 needs for
    lmms-eval's llava_hf) filled in where the class takes them and neither was given;
    lmms-eval's and diffusers' own default is ``cuda``, which fails on a CPU machine."""
    if "device" not in parameters or "device" in args or "device_map" in args:
        return args
    filled = {**args, "device": device}
    if "device_map" in parameters:
        filled["device_map"] = device
    return filled


def _run_build(args) -> int:
    from .. import host
    from ..autobench.build import BuildError, build_benchmark
    from ..autobench.examiner import build_examiner, parse_model_args
    from ..core.errors import load_failure
    from ..core.model_args import identity_args
    from ..core.registry import parameter_names
    from ..generators import build_generator
    from ..generators.registry import GENERATORS

    try:
        config = _config(args)
        ex_args = parse_model_args(args.examiner_args)
        gen_args = parse_model_args(args.generator_args)
        device = default_device()
        gen_params = parameter_names(GENERATORS.load(args.generator)) if args.generator in GENERATORS else []
        gen_args = with_device(gen_args, gen_params, device)
        ex_args = with_device(ex_args, host.model_parameters(args.examiner), device)
        generator = build_generator(args.generator, **gen_args)
    except (ValueError, argparse.ArgumentTypeError) as exc:
        print(f"lmms-genbench autobench build: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # weights that do not load: one line naming the argument
        raise load_failure(exc, "generator", args.generator, gen_args, "--generator-args ")
    examiner = build_examiner(args.examiner, ex_args, text_only=args.examiner_text_only)
    # the settings a reader needs to repeat the build, without credentials
    extra = {"examiner_spec": {"model": args.examiner, "args": identity_args(ex_args),
                               "text_only": args.examiner_text_only},
             "generator_spec": {"name": args.generator, "args": identity_args(gen_args)}}
    try:
        result = build_benchmark(
            config, examiner, generator, args.out, cache_dir=args.cache_dir,
            push_to_hub=args.push_to_hub, log=lambda m: print(m, file=sys.stderr),
            manifest_extra=extra,
        )
    except BuildError as exc:
        print(f"lmms-genbench autobench build: error: {exc}", file=sys.stderr)
        return EXIT_FAIL
    m = result.manifest
    m_path = f"{args.out}/manifest.json"
    print(json.dumps({"dataset": f"{args.out}/dataset", "manifest": m_path, "items": m["n_items"],
                      "planned": m["n_planned"], "dropped_by_reason": m["dropped_by_reason"],
                      "answer_letters": m["answer_letters"], "cost_this_run": m["cost_this_run"]}, indent=2))
    if not m["n_items"]:
        print("lmms-genbench autobench build: error: every item was dropped; no dataset written "
              f"(see dropped_by_reason in {m_path})", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def _run_cost(args) -> int:
    from ..autobench.build import default_build_cost

    try:
        print(json.dumps(default_build_cost(_config(args)), indent=2))
    except ValueError as exc:
        print(f"lmms-genbench autobench cost: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _task_accs(paths: list[str]) -> dict[str, dict[str, float | None]]:
    """Per AutoBench task in the files, its accuracies (None where a file has no number)."""
    from ..analysis.results import finite_or_none, read_results, task_metrics

    keys = ("acc", "acc_easy", "acc_medium", "acc_hard")
    out: dict[str, dict[str, float | None]] = {}
    for path in paths:
        results = read_results(path)["results"]
        for task in ("autobench", "autobench_posA", "autobench_posD"):
            if task in results:
                metrics = task_metrics(results[task])
                out[task] = {k: finite_or_none(metrics.get(k)) for k in keys}
    return out


def _run_bias(args) -> int:
    """§4.6 deviation rates R = (S_X - S_U) / S_U from results files."""
    from ..analysis.results import finite_or_none
    from ..metrics.functional.autobench import deviation_rate

    try:
        accs = _task_accs(args.results)
    except ValueError as exc:  # analysis.results.ResultsError: names the file and the fix
        print(f"lmms-genbench autobench bias: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if "autobench" not in accs or len(accs) < 2:
        print("lmms-genbench autobench bias: error: need results of task autobench and of "
              f"autobench_posA and/or autobench_posD; found {sorted(accs) or 'none'}", file=sys.stderr)
        return EXIT_USAGE
    uniform = accs["autobench"]
    out: dict[str, dict] = {"uniform": uniform}
    for x in ("A", "D"):
        acc = accs.get(f"autobench_pos{x}")
        if acc is not None:
            out[f"at_{x}"] = acc
            # a level without a number in either run (no doc of that difficulty, or S_U = 0)
            # has no rate: null, never a KeyError or a NaN that is not JSON
            out[f"R_{x}"] = {k: None if acc[k] is None or uniform[k] is None
                             else finite_or_none(deviation_rate(acc[k], uniform[k])) for k in acc}
    print(json.dumps(out, indent=2))
    return EXIT_OK


def _add_config_args(p: argparse.ArgumentParser) -> None:
    from ..autobench.prompts import CAPABILITIES, LEVELS

    p.add_argument("--capability", default="spatial",
                   help=f"one of {', '.join(CAPABILITIES)}, or your own text with --definition")
    p.add_argument("--definition", default=None, help="definition of a custom capability")
    p.add_argument("--n-general", type=int, default=4, help="general aspects n (paper: 4)")
    p.add_argument("--m-fine", type=int, default=6, help="fine-grained aspects per general one m (paper: 6)")
    p.add_argument("--per-level", type=int, default=10,
                   help="descriptions per fine aspect and level ω (paper: 10)")
    p.add_argument("--levels", nargs="+", default=list(LEVELS), choices=LEVELS)
    p.add_argument("--thresholds", type=_thresholds, default=None,
                   help="ζ per level, e.g. easy=1.0,medium=0.8,hard=0.8 (the paper's, the default)")
    p.add_argument("--max-redraws", type=int, default=3, help="redraws below ζ before dropping (default 3)")
    p.add_argument("--max-retries", type=int, default=2,
                   help="extra examiner attempts on a malformed output before dropping (default 2)")
    p.add_argument("--validation-questions", type=int, default=6, help="yes/no checks per image (default 6)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--avoid-list", choices=("per_level", "shared_withheld"), default="per_level",
                   help="per_level (the authors'): a fresh semantic graph per level, listed words kept in it; "
                        "shared_withheld: one graph across the levels, listed words removed (the list grows much faster)")
    p.add_argument("--yes-no-reader", choices=("package", "authors"), default="package",
                   help="how the examiner's yes/no self-validation answers are read: package (\"Yes.\" is yes; "
                        "\"yes or no\", \"not yes\" unclear) or authors (tifa.py: exactly yes/no after \"answer: \")")
    p.add_argument("--examiner-max-new-tokens", type=int, default=1024)
    p.add_argument("--examiner-temperature", type=float, default=0.0)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    sub = group(
        subparsers, "autobench", dest="autobench_command",
        help="AutoBench-V: build a capability-targeted VQA benchmark",
        description="Build an AutoBench-V benchmark (paper 002) with any lmms-eval model as "
        "examiner and any generator backend; evaluate it with the lmms-eval task "
        "`autobench` (AUTOBENCH_DATASET=<out>).",
    )

    b = sub.add_parser("build", help="build a benchmark into an output folder (resumable)")
    _add_config_args(b)
    b.add_argument("--examiner", required=True, help="lmms-eval model name, e.g. openai or llava_hf")
    b.add_argument("--examiner-args", default="", help="its --model_args, e.g. model_version=gpt-4o")
    b.add_argument("--examiner-text-only", default="none", choices=("none", "blank"),
                   help="text-only prompts without an image (none) or with a blank image, for "
                   "model classes that need one (blank; e.g. llava_hf)")
    b.add_argument("--generator", required=True, help="generator backend: diffusers, openai or smoke")
    b.add_argument("--generator-args", default="", help="its arguments, e.g. pretrained=...,steps=4")
    b.add_argument("--out", required=True, help="output folder: dataset/, manifest.json, cache/")
    b.add_argument("--cache-dir", default=None, help="call cache (default <out>/cache)")
    b.add_argument("--push-to-hub", default=None, metavar="REPO_ID", help="also push the dataset (private)")
    b.set_defaults(func=_run_build)

    c = sub.add_parser("cost", help="examiner calls and images a build needs at least")
    _add_config_args(c)
    c.set_defaults(func=_run_cost)

    s = sub.add_parser("bias", help="position-bias deviation rates (§4.6) from results files")
    s.add_argument("results", nargs="+", metavar="RESULTS.json",
                   help="lmms-eval results files holding tasks autobench and autobench_posA/posD")
    s.set_defaults(func=_run_bias)
