"""A task run with a model type that cannot serve it stops with one line naming the
``--model`` to use, and writes no results (no NaN scores that look like results)."""

import glob
import json
import re

import pytest

from lmms_genbench.chef import results as chef_results
from lmms_genbench.core.errors import ActionableError, WrongModelError
from lmms_genbench.tasks.mmeception import utils as mmeception_utils

from tests.support.lmms_eval_runs import BIN, run


def test_the_error_is_not_an_exception_so_lmms_eval_neither_retries_nor_swallows_it():
    # lmms-eval 0.7.3 retries process_results on Exception (tenacity) and its command
    # logs any Exception and exits 0: the error must be outside that hierarchy.
    assert issubclass(WrongModelError, SystemExit) and not issubclass(WrongModelError, Exception)
    err = WrongModelError("cycle", "cycle tasks", "got 'A'")
    assert str(err) == "lmms-genbench: error: got 'A'; cycle tasks must run with --model cycle. Fix: run them with --model cycle"
    assert err.model == "cycle" and isinstance(err, ActionableError)


@pytest.mark.parametrize("answer", ["A", "", '{"answer": "A"}', "[1, 2]", "42",
                                    # an echo of the request payload (it carries the "chef" marker)
                                    '{"chef": 1, "key": "k", "inferencer": "ppl", "variants": []}'])
def test_chef_tasks_refuse_answers_of_another_model(answer):
    with pytest.raises(WrongModelError, match=r"chef_\* tasks must run with --model chef"):
        chef_results.process_results({}, [answer])


def test_chef_tasks_keep_the_chef_models_own_failures_as_counted_records():
    out = chef_results.process_results({}, [json.dumps({"error": "ValueError: context is not a chef payload"})])
    assert set(out) == {"n_docs", "n_failed", "n_unmatched"}


def test_cycle_tasks_refuse_a_plain_answer():
    with pytest.raises(WrongModelError, match=r"cycle tasks \(mmeception\*, sdp_\*\) must run with --model cycle"):
        mmeception_utils.process_results({"chain_id": "q1", "category": "scene"}, ["A photo of a cat."])


@pytest.mark.integration
@pytest.mark.parametrize("task, model", [("mmeception_smoke", "cycle"), ("chef_icl_smoke", "chef")])
def test_lmms_eval_with_a_plain_model_stops_with_one_line_naming_the_model(tmp_path, task, model):
    """lmms-eval's built-in ``dummy`` model answers "A" to every request."""
    out = tmp_path / "out"
    proc = run([str(BIN / "lmms-eval"), "--model", "dummy", "--tasks", task, "--limit", "2",
                "--output_path", str(out), "--log_samples"], tmp_path, timeout=900)
    ours = [line for line in re.split(r"[\r\n]+", proc.stderr) if "lmms-genbench" in line]
    assert len(ours) == 1, proc.stderr[-3000:]  # stopped at the first doc, not retried
    assert ours[0].startswith("lmms-genbench: ") and f"must run with --model {model}. Fix: run them with --model {model}" in ours[0]
    assert proc.returncode == 1
    assert "RetryError" not in proc.stdout + proc.stderr  # not retried, not wrapped
    assert "Traceback" not in proc.stderr
    assert not glob.glob(str(out / "**" / "*_results.json"), recursive=True)
