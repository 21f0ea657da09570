"""AutoBench-V end to end, offline: a tiny benchmark built with lmms-eval's own
`dummy` model class as examiner (one fixed answer that every stage's parser
accepts) and the smoke generator (tiny random SD) runs through the real
`lmms-eval` command; the tiny random llava as examiner through the real
`llava_hf` class fails cleanly (its words are no aspect list) and a rerun
repeats no call. lmms-eval exits 0 even when a task crashed: every test reads
the results files."""

import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support.lmms_eval_runs import BIN, response, results_file, run, samples


ROOT = Path(__file__).resolve().parents[2]


def _run(cmd, tmp_path, log, timeout=900, **env):
    # the test-only examiner fakes are imported by the build subprocess from this checkout
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return run(cmd, tmp_path, log, timeout=timeout, PYTHONPATH=pythonpath, **env)


_results = results_file
_samples = samples
_resp = response


def _tiny(kind):
    from lmms_genbench.smoke import llava as smoke_describer

    return str(getattr(smoke_describer, f"tiny_{kind}_path")())


# One text that parses at every stage: "Yes" first for the checks, the aspect,
# guidance and description lines, and one JSON object with checks and Q&A.
DUMMY_RESPONSE = "\n".join([
    "Yes.",
    "General Aspect: Layout",
    "Fined-grained Aspect: Left and right",
    "Introduction: which object is on which side",
    "Guidance: Place one object clearly left of another.",
    "Prompt: A red cube to the left of a blue ball on a white table.",
    "Topic word: toys",
    "Key word: cube, ball, table",
    json.dumps({"questions": ["Is there a red cube?", "Is there a blue ball?"],
                "question": "Where is the cube?",
                "options": {"A": "left of the ball", "B": "right of the ball", "C": "on the ball", "D": "under it"},
                "reference_answer": "A"}),
])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from lmms_genbench.autobench.build import BuildConfig, build_benchmark
    from lmms_genbench.autobench.examiner import build_examiner
    from lmms_genbench.generators import build_generator

    out = tmp_path_factory.mktemp("autobench") / "bench"
    cfg = BuildConfig(capability="spatial", n_general=1, m_fine=1, per_level=2, levels=("easy", "hard"),
                      max_redraws=0, n_validation_questions=2, seed=0)
    examiner = build_examiner("dummy", {"response": DUMMY_RESPONSE})  # lmms-eval's class, via Instances
    result = build_benchmark(cfg, examiner, build_generator("smoke", size=32), out)
    assert len(result.items) == 4 and result.dropped == []
    assert all(i.alignment_score == 1.0 and i.image.size == (32, 32) for i in result.items)
    assert result.manifest["examiner"].startswith("dummy-")
    return out


def test_built_benchmark_runs_through_lmms_eval_with_position_variants(built, tmp_path):
    out = tmp_path / "eval"
    model_args = f"pretrained={_tiny('llava')},device_map=cpu,device=cpu,dtype=float32"
    proc = _run([str(BIN / "lmms-eval"), "--model", "llava_hf", "--model_args", model_args,
                 "--tasks", "autobench,autobench_posA,autobench_posD", "--output_path", str(out),
                 "--log_samples", "--gen_kwargs", "max_new_tokens=6"],
                tmp_path, "lmms_eval.log", AUTOBENCH_DATASET=str(built))
    assert proc.returncode == 0, proc.stderr[-3000:]
    path, results = _results(out)
    from lmms_genbench.metrics.functional.autobench import EXTRACTION_RULES, extract_choice, extract_choice_by_rule

    for task, letters in (("autobench", None), ("autobench_posA", {"A"}), ("autobench_posD", {"D"})):
        r = results["results"][task]
        samples = _samples(out, task)
        assert r["n_docs,none"] == 4 == len(samples)
        targets = {s["target"] for s in samples}
        assert targets == letters if letters else len(targets) == 4  # built: one item per letter
        resps = [_resp(s) for s in samples]
        unparsed = sum(extract_choice(x) is None for x in resps)
        correct = sum(extract_choice(x) == s["target"] for x, s in zip(resps, samples))
        assert r["n_unparsed,none"] == unparsed
        # every answer is counted under the one extraction rule that read it
        rules = Counter(extract_choice_by_rule(x)[1] for x in resps)
        assert {rule: r[f"n_rule_{rule},none"] for rule in EXTRACTION_RULES} == {x: rules[x] for x in EXTRACTION_RULES}
        assert r["acc,none"] == pytest.approx(correct / 4)
        assert 0.0 <= r["acc_easy,none"] <= 1.0 and 0.0 <= r["acc_hard,none"] <= 1.0
        b = r["breakdown,none"]
        assert b["n_level:easy"] == b["n_level:hard"] == 2 and b["n_capability:spatial understanding"] == 4
        assert b["n_aspect:Left and right"] == 4
    # the candidate saw the paper's answer template with four lettered options
    prompt = _samples(out, "autobench")[0]["input"]
    assert "[[A]]" in prompt and "\nD. " in prompt and "Where is the cube?" in prompt
    # position bias: R = (S_X - S_U) / S_U from the same results file
    proc = _run([sys.executable, "-m", "lmms_genbench.cli", "autobench", "bias", path], tmp_path, "bias.log")
    assert proc.returncode == 0, proc.stderr
    bias = json.loads(proc.stdout)
    assert set(bias) == {"uniform", "at_A", "R_A", "at_D", "R_D"}


def test_scores_through_lmms_eval_with_a_fixed_answer(built, tmp_path):
    """lmms-eval's dummy candidate always answers "The answer is [[a]]." (prose, lower case)."""
    out = tmp_path / "eval"
    proc = _run([str(BIN / "lmms-eval"), "--model", "dummy", "--model_args", "response=The answer is [[a]].",
                 "--tasks", "autobench,autobench_posA,autobench_posD", "--output_path", str(out), "--log_samples"],
                tmp_path, "lmms_eval.log", AUTOBENCH_DATASET=str(built))
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, results = _results(out)
    r = results["results"]
    assert r["autobench_posA"]["acc,none"] == 1.0 and r["autobench_posD"]["acc,none"] == 0.0
    assert r["autobench"]["acc,none"] == 0.25  # built letters: one per letter
    # the bootstrap's standard error is lmms-eval's; a level with no doc is null, not NaN
    assert 0 < r["autobench"]["acc_stderr,none"] < 0.5 and r["autobench"]["acc_medium,none"] is None
    for task in ("autobench", "autobench_posA", "autobench_posD"):
        assert r[task]["n_unparsed,none"] == 0 and r[task]["pred_letters,none"] == {"A": 4, "B": 0, "C": 0, "D": 0}
    assert r["autobench_posA"]["acc_easy,none"] == r["autobench_posA"]["acc_hard,none"] == 1.0
    assert r["autobench_posA"]["breakdown,none"]["acc_aspect:Left and right"] == 1.0
    # each logged sample's score (lmms-eval's --baseline pairs these) is its share of acc
    for task in ("autobench", "autobench_posA", "autobench_posD"):
        rows = [json.loads(x) for f in out.rglob(f"*_samples_{task}.jsonl") for x in f.read_text().splitlines()]
        assert len(rows) == 4 and sum(x["score"] for x in rows) / 4 == r[task]["acc,none"], task
        assert all(isinstance(x["aspect"], str) for x in rows)


def test_examiner_bias_variant_answers_from_the_description(built, tmp_path):
    out = tmp_path / "eval"
    # llava_hf cannot run text-only in lmms-eval 0.7.3; the tiny qwen2-vl can
    proc = _run([str(BIN / "lmms-eval"), "--model", "qwen2_vl", "--model_args",
                 f"pretrained={_tiny('qwen2_vl')},device_map=cpu,device=cpu",
                 "--tasks", "autobench_noimage", "--output_path", str(out), "--log_samples",
                 "--gen_kwargs", "max_new_tokens=6"],
                tmp_path, "lmms_eval.log", AUTOBENCH_DATASET=str(built / "dataset"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, results = _results(out)
    r = results["results"]["autobench_noimage"]
    assert r["n_docs,none"] == 4 and 0 <= r["n_unparsed,none"] <= 4
    sample = _samples(out, "autobench_noimage")[0]
    assert "the description it was drawn from: A red cube" in sample["input"]


def test_tiny_llava_examiner_through_llava_hf(tmp_path):
    """The real lmms-eval class as examiner: text-only (blank image) and image calls."""
    from PIL import Image

    from lmms_genbench.autobench.examiner import build_examiner

    ex = build_examiner("llava_hf", {"pretrained": _tiny("llava"), "device_map": "cpu", "device": "cpu",
                                     "dtype": "float32"}, text_only="blank")
    assert ex.name.startswith("llava_hf-")
    for images in ([], [Image.new("RGB", (40, 30), "red")]):
        text = ex.generate("Is there a red cube?", images, {"max_new_tokens": 4, "temperature": 0, "until": []})
        assert isinstance(text, str)


def test_tiny_llava_examiner_build_drops_cleanly_and_rerun_repeats_no_call(tmp_path):
    out = tmp_path / "bench"
    cmd = [sys.executable, "-m", "lmms_genbench.cli", "autobench", "build",
           "--examiner", "llava_hf",
           "--examiner-args", f"pretrained={_tiny('llava')},device_map=cpu,device=cpu,dtype=float32",
           "--examiner-text-only", "blank", "--examiner-max-new-tokens", "12",
           "--generator", "smoke", "--generator-args", "size=32",
           "--n-general", "1", "--m-fine", "1", "--per-level", "1", "--levels", "easy",
           "--max-retries", "1", "--out", str(out)]
    first = _run(cmd, tmp_path, "build1.log", timeout=600)
    # random words are no aspect list: 1 + 1 retry, then a typed error, exit 1
    assert first.returncode == 1, first.stderr[-2000:]
    assert "no usable aspect list after 2 attempts (too_few_aspects" in first.stderr
    entries = sorted((out / "cache" / "text").rglob("*.json"))
    assert len(entries) == 2
    record = json.loads(entries[0].read_text())
    assert record["purpose"] == "aspects" and record["model"].startswith("llava_hf-")
    stamps = [p.stat().st_mtime_ns for p in entries]
    second = _run(cmd, tmp_path, "build2.log", timeout=600)
    assert second.returncode == 1
    assert sorted((out / "cache" / "text").rglob("*.json")) == entries
    assert [p.stat().st_mtime_ns for p in entries] == stamps  # replayed, not called again
