"""A task run with a model type that cannot serve it stops with one line naming the
``--model`` to use, and writes no results (no NaN scores that look like results); through the
lmms-eval command: tests/e2e/test_wrong_model_e2e.py."""

import json

import pytest

from lmms_genbench.chef import results as chef_results
from lmms_genbench.core.errors import ActionableError, WrongModelError
from lmms_genbench.tasks.mmeception import utils as mmeception_utils


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
    assert set(out) == {"n_docs", "n_failed", "n_unmatched", "unreadable"}


def test_cycle_tasks_refuse_a_plain_answer():
    with pytest.raises(WrongModelError, match=r"cycle tasks \(mmeception\*, sdp_\*\) must run with --model cycle"):
        mmeception_utils.process_results({"chain_id": "q1", "category": "scene"}, ["A photo of a cat."])
