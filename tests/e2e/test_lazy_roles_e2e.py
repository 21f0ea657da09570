"""Nothing starts that has nothing to do, end to end through the real `lmms-eval` command
(issue 24, item 3): a rerun over a complete store whose describer would not load (an
operational argument, so the same store) computes nothing, loads nothing and scores the
same; the same arguments over an empty store fail with the describer's one line."""

import json

from tests.support.lmms_eval_runs import BIN, results_file, run


BROKEN = "describer.attn_implementation=no_such_attention"  # not in the store key; fails at load


def _run(tmp_path, name, art, extra=""):
    out = tmp_path / name
    args = f"preset=smoke,artifacts={art}" + (f",{extra}" if extra else "")
    proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args, "--tasks", "mmeception_smoke",
                "--limit", "3", "--output_path", str(out), "--verbosity", "INFO"],
               tmp_path, log=f"{name}.log", timeout=900)
    return proc, out


def _metrics(out):
    results = results_file(out)[1]["results"]["mmeception_smoke"]
    return {k.split(",")[0]: v for k, v in results.items() if "," in k}


def test_a_rerun_over_a_complete_store_never_loads_a_describer_that_would_fail(tmp_path):
    art = tmp_path / "art"
    proc, out = _run(tmp_path, "first", art)
    first = _metrics(out)
    assert first["n_scored"] == 3, proc.stderr[-3000:]

    proc, out = _run(tmp_path, "again", art, BROKEN)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _metrics(out) == first
    runs = [json.loads(line) for line in next(art.rglob("runs.jsonl")).read_text().splitlines()]
    assert runs[-1]["hops_computed"] == 0 and runs[-1]["hops_reused"] == 3 * 7

    proc, _ = _run(tmp_path, "fresh", tmp_path / "empty", BROKEN)  # the argument does fail where work is left
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and last.startswith("lmms-genbench: error: the describer llava_hf did not load"), last
