"""The support matrix: one short GenCeption chain per generator family and per describer class,
through the real ``lmms-eval`` command, on tiny random-weight replicas built offline.

Each test runs all its backends in ONE ``lmms-eval --config`` call (a YAML list of runs:
one process start, one import of the stack) and records what passed in
``build/support_matrix/<role>.json``; ``scripts/support_table.py`` renders
docs/support.md from those files. A chain passes when every doc of
``mmeception_smoke --limit 2`` is scored (``n_scored`` 2, ``n_failed`` 0, a ``gc@3``).
These verify plumbing on tiny replicas, not the quality of real weights.
"""

import importlib
import json
import time
from pathlib import Path

import yaml

from tests.support.lmms_eval_runs import BIN, results_file, run
from tests.support.openai_stub import StubHandler, chat_completion, serve


RESULTS_DIR = Path(__file__).resolve().parents[2] / "build" / "support_matrix"
DOCS = 2
# Kandinsky 3 sizes its latents for a scale-8 MoVQ in 64-px steps; the others draw 32 px
SIZES = {"kandinsky3": 64}


def _run_matrix(tmp_path, runs: dict[str, str], **env) -> dict[str, dict]:
    """``runs``: name -> cycle model_args. One lmms-eval call; each run's outcome by name."""
    configs = [{"model": "cycle", "model_args": f"{args},artifacts={tmp_path / 'art'}", "tasks": "mmeception_smoke",
                "limit": DOCS, "output_path": str(tmp_path / "out" / name)} for name, args in runs.items()]
    config = tmp_path / "matrix.yaml"
    config.write_text(yaml.safe_dump(configs))
    start = time.monotonic()
    proc = run([str(BIN / "lmms-eval"), "--config", str(config)], tmp_path, cwd=tmp_path, timeout=1200, **env)
    seconds = round(time.monotonic() - start, 1)
    outcomes = {}
    for name in runs:
        try:
            metrics = results_file(tmp_path / "out" / name)[1]["results"]["mmeception_smoke"]
        except (AssertionError, KeyError) as exc:
            outcomes[name] = {"passed": False, "reason": f"no results: {exc}"[:300]}
            continue
        scored, failed = metrics.get("n_scored,none"), metrics.get("n_failed,none")
        passed = scored == DOCS and failed == 0 and isinstance(metrics.get("gc@3,none"), float)
        outcomes[name] = {"passed": passed, "n_scored": scored, "n_failed": failed, "gc@3": metrics.get("gc@3,none")}
    return outcomes, seconds, proc


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("lmms_eval", "transformers", "diffusers", "torch")}


def _write(role: str, entries: dict[str, dict], seconds: float) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    payload = {"role": role, "wall_seconds": seconds, "docs_per_chain": DOCS, "task": "mmeception_smoke",
               "versions": _versions(), "entries": entries}
    (RESULTS_DIR / f"{role}.json").write_text(json.dumps(payload, indent=2, sort_keys=True))


def test_every_diffusers_family_draws_a_chain(tmp_path):
    from lmms_genbench.smoke.pipelines import FAMILIES, PIPELINE_CLASSES, tiny_family_path

    runs, entries = {}, {}
    for family in FAMILIES:
        size = SIZES.get(family, 32)
        folder = tiny_family_path(family)
        runs[family] = (f"preset=smoke,generator=diffusers,generator.pretrained={folder},generator.device=cpu,"
                        f"generator.dtype=float32,generator.steps=2,generator.width={size},generator.height={size}")
        entries[family] = {"class": PIPELINE_CLASSES[family], "given_as": "generator=diffusers", "size": size}
    outcomes, seconds, proc = _run_matrix(tmp_path, runs)
    for family, outcome in outcomes.items():
        entries[family].update(outcome)
    _write("generator", entries, seconds)
    failed = {f: e for f, e in entries.items() if not e["passed"]}
    assert not failed, f"{failed}\n{proc.stderr[-3000:]}"
    # each chain was drawn by its own replica (the store keys chains by the generator)
    drawn = {json.loads(p.read_text())["generator"] for p in (tmp_path / "art").rglob("protocol.json")}
    assert len(drawn) == len(FAMILIES), drawn


class _Describer(StubHandler):
    def answer(self, body):
        return 200, chat_completion(body.get("model", "stub"), "a red photo of a cat on a blue dog")


def test_every_describer_class_describes_a_chain(tmp_path):
    from lmms_genbench.smoke.describers import DESCRIBERS, describer_args, tiny_describer_path

    runs, entries = {}, {}
    for checkpoint, model_type in DESCRIBERS.items():
        args = describer_args(checkpoint, tiny_describer_path(checkpoint))
        runs[checkpoint] = f"preset=smoke,describer={model_type}," + ",".join(f"describer.{k}={v}" for k, v in args.items())
        entries[checkpoint] = {"class": model_type, "given_as": f"describer={model_type}"}
    runs["openai"] = "preset=smoke,describer=openai,describer.model_version=stub-model"
    entries["openai"] = {"class": "openai", "given_as": "describer=openai + OPENAI_API_BASE",
                         "note": "an OpenAI-compatible stub server on 127.0.0.1"}
    vllm_missing = _vllm_missing()
    if not vllm_missing:  # the tiny Qwen2-VL with the head size vLLM's CPU attention takes
        from lmms_genbench.smoke.llava import VLLM_HEAD_DIM, tiny_qwen2_vl_path

        runs["vllm"] = f"preset=smoke,describer=vllm,describer.model={tiny_qwen2_vl_path(head_dim=VLLM_HEAD_DIM)}"
    entries["vllm"] = {"class": "vllm", "given_as": "describer=vllm", "note": "the tiny Qwen2-VL (head size 32)"}
    server = serve(_Describer)
    try:
        outcomes, seconds, proc = _run_matrix(
            tmp_path, runs, OPENAI_API_KEY="stub-key", NO_PROXY="127.0.0.1,localhost",
            OPENAI_API_BASE=f"http://127.0.0.1:{server.server_port}/v1",
        )
    finally:
        server.shutdown()
    for name, outcome in outcomes.items():
        entries[name].update(outcome)
    if vllm_missing:
        entries["vllm"].update(passed=False, skipped=True, reason=vllm_missing)
    _write("describer", entries, seconds)
    failed = {n: e for n, e in entries.items() if not e["passed"] and not e.get("skipped")}
    assert not failed, f"{failed}\n{proc.stderr[-3000:]}"
    assert server.count == DOCS * 3  # the stub answered every openai description
    # each chain was described by its own class (the store keys chains by the describer)
    described = {json.loads(p.read_text())["describer"] for p in (tmp_path / "art").rglob("protocol.json")}
    for name, entry in entries.items():
        if entry.get("passed"):
            assert any(d.startswith(f"{entry['class']}-") for d in described), (name, described)


def _vllm_missing() -> str:
    """Why vLLM cannot run here, or "" when it imports."""
    try:
        importlib.import_module("vllm")
    except Exception as exc:  # noqa: BLE001 - any import failure means it cannot run here
        return f"vLLM does not import in this environment ({type(exc).__name__}: {str(exc)[:120]})"
    return ""
