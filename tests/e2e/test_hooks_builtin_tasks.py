"""lmms-eval's own tasks score and log exactly as without this package (issue 32).

``mme``, ``pope`` and ``ocrbench``, as lmms-eval 0.7.3 ships them, run through ``simple_evaluate``
on hand-made docs (tests/support/builtin_tasks_run.py) with a fake model that is not ours, answering
plain text, empty text and the record ``--model t2i`` writes for a failed drawing: once with our
entry point hidden, once installed. Every score and every logged sample must be equal, and the
failure record is scored as any other text (before issue 32 pope read 0.5, ocrbench 0.002, an
``n_failed`` row was added, and mme stopped with "MME only supports pairwise evaluation")."""

import json
import os
import subprocess
import sys

from tests.support.lmms_eval_runs import PTH_LINE, ROOT, offline_env


def _run(mode, tmp_path):
    out = tmp_path / mode
    out.mkdir()
    env = offline_env(tmp_path)
    env.pop("OMP_NUM_THREADS")  # the smoke-preset thread setting is one of the hooks looked for
    # run from the test's folder: lmms-eval's ocrbench writes results/ under the working directory
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    # the wheel's start-up line runs first, as in every process of a wheel install (CI's)
    start = (f"{PTH_LINE}\nimport runpy, sys\nsys.argv = ['builtin_tasks_run', {mode!r}, {str(out)!r}]\n"
             "runpy.run_module('tests.support.builtin_tasks_run', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", start], cwd=out,
                          env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "run.json").read_text())


def test_builtin_tasks_score_and_log_the_same_with_and_without_the_plugin(tmp_path):
    without, with_plugin = _run("without", tmp_path), _run("with", tmp_path)
    scores = without["results"]
    # worked out by hand from the docs: 2 of 5 pope answers right (the failure record is a wrong
    # answer), 3 OCRBench answers contain their ground truth (one of them the record), out of 1000
    assert scores["pope_fixture"]["pope_accuracy,none"] == 0.4
    assert scores["ocrbench_fixture"]["ocrbench_accuracy,none"] == 0.003
    # mme: existence 1 of 2 right (acc 50, acc+ 0) and code_reasoning 1 of 2 (50, 0)
    assert scores["mme_fixture"]["mme_perception_score,none"] == 50.0
    assert scores["mme_fixture"]["mme_cognition_score,none"] == 50.0
    assert not any(metric.startswith("n_failed") for task in scores.values() for metric in task)

    assert with_plugin["results"] == without["results"]
    assert with_plugin["samples"] == without["samples"]
    # the plugin was there, with its hooks installed (not a vacuous comparison)
    assert "lmms_eval.evaluator.evaluate" in with_plugin["hooks"] and not without["hooks"]


def test_under_t2i_a_failed_drawing_is_na_and_the_declared_hooks_are_what_is_in_place(tmp_path):
    """The same docs answered by a subclass of our t2i model: its failure record is left out and
    counted (pope 2 of 4, OCRBench 2 right), except in mme, whose aggregation asserts two answers
    per image: it scores as without us. During the run exactly the declared hooks are in place,
    after it only those that last for the process; lmms-eval's own log lines are masked during
    our run only."""
    from lmms_genbench.hooks import TABLE

    from tests.support.builtin_tasks_run import SECRET

    without, t2i = _run("without", tmp_path), _run("t2i", tmp_path)
    scores = t2i["results"]
    assert scores["pope_fixture"]["pope_accuracy,none"] == 0.5 and scores["pope_fixture"]["n_failed,none"] == 1
    assert scores["ocrbench_fixture"]["ocrbench_accuracy,none"] == 0.002
    assert scores["ocrbench_fixture"]["n_failed,none"] == 1
    failed = next(s for s in t2i["samples"]["pope_fixture"] if s["doc_id"] == 3)
    assert failed["pope_accuracy"] == {"score": None, "status": "failed", "reason": "refused"}
    assert scores["mme_fixture"] == without["results"]["mme_fixture"]
    assert t2i["samples"]["mme_fixture"] == without["samples"]["mme_fixture"]

    assert set(t2i["during"]) == {hook.target for hook in TABLE if hook.when in ("import", "run")
                                  and not hook.target.startswith("lmms_eval.__main__.")}
    # lmms_eval.__main__ is the lmms-eval command's module: never imported by simple_evaluate from Python
    assert set(t2i["hooks"]) == {hook.target for hook in TABLE if hook.when == "import"
                                 and not hook.target.startswith("lmms_eval.__main__.")}
    inside, after = t2i["logged"][0], t2i["logged"][-1]
    assert inside.startswith("Attempt 4/5 failed") and SECRET not in inside and "***" in inside
    assert SECRET in after  # the patcher is gone with the run
    assert not any("cannot leave out" in line for line in without["logged"])
