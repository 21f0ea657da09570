"""A doc ``--model t2i`` could not draw is N/A in a host task's numbers, never a 0
(``lmms_genbench.hooks.host_failures``), checked through lmms-eval's own ``TaskOutput``
aggregation on hand-worked numbers, inside the hooks of a ``--model t2i`` run
(``lmms_genbench.hooks.run.scope``); the WISE run end to end is in ``test_t2i_host.py``."""

import json
import statistics
from types import SimpleNamespace

from lmms_genbench.hooks.run import Run, scope
from lmms_genbench.hooks.host_failures import FailedDoc, failed_answer, mark

FAILED = json.dumps({"text": "", "images": [], "status": "failed", "reason": "refused", "doc_id": 2})
DRAWN = json.dumps({"text": "", "images": ["/x/0000_s0.png"]})


def test_a_failed_answer_is_recognised_and_anything_else_is_not():
    assert failed_answer([FAILED]) == FailedDoc("refused")
    assert failed_answer([[DRAWN, FAILED]]) == FailedDoc("refused")  # one list per request
    from lmms_genbench.store import Chain, ChainFailure

    chain = Chain(chain_id="c", direction="image_first", length=2, hops=1, namespace="ns", folder="f",
                  failure=ChainFailure(1, "describe", "refused"))  # a failed cycle doc's answer
    assert '"status": "failed"' in chain.to_json()
    for other in ([chain.to_json()], [DRAWN], ["an answer that mentions \"status\": \"failed\""],
                  ['{"status": "failed" broken'], [json.dumps({"status": "ok"})], [], [None], [3]):
        assert failed_answer(other) is None, other


def test_mark_keeps_the_tasks_none_and_replaces_every_value():
    failed = FailedDoc("refused")
    assert mark({"score": 0.0, "other": None, "entry": {"score": 0.0}}, failed) == {
        "score": failed, "other": None, "entry": failed}
    assert mark("not a dict", failed) == "not a dict"


class _Task:
    """A task whose two metrics average their values (``score``) and count docs (``seen``)."""

    def aggregation(self):
        return {"score": lambda items: statistics.fmean(x for x in items if x is not None),
                "only_failed": lambda items: 0.0}  # a task calling "no doc" 0.0, as WISE does


def _output(**samples):
    sample_metrics = {(name, "none"): list(items) for name, items in samples.items()}
    return SimpleNamespace(task=_Task(), sample_metrics=sample_metrics, agg_metrics={}, sample_len=0,
                           logged_samples=[{"doc_id": 1, "score": samples["score"][1]}],
                           per_sample_metrics={("score", "none"): [[x, x] for x in samples["score"]]})


def _aggregate(task_output, model="t2i"):
    from lmms_eval.evaluator_utils import TaskOutput

    with scope(Run(model)):  # the hooks of a run of that model: set_aside and report around lmms-eval's own
        TaskOutput.calculate_aggregate_metric(task_output, bootstrap_iters=0)
    return task_output.agg_metrics


def test_failed_docs_are_left_out_not_zero_and_counted():
    failed = FailedDoc("refused")
    out = _output(score=[0.5, failed, 1.0, failed], only_failed=[None, failed, None, None])
    agg = _aggregate(out)
    assert agg["score,none"] == 0.75  # (0.5 + 1.0) / 2; scored as 0 it would be 0.375
    assert agg["only_failed,none"] is None and agg["only_failed_stderr,none"] == "N/A"
    assert agg["n_failed,none"] == 2 and agg["n_failed_stderr,none"] == "N/A"
    # lmms-eval writes the metrics sample_metrics names: the two added ones are there
    assert out.sample_metrics[("score", "none")] == [0.5, 1.0]
    assert out.sample_metrics[("only_failed", "none")] == [] == out.sample_metrics[("n_failed", "none")]
    assert out.logged_samples[0]["score"] == {"score": None, "status": "failed", "reason": "refused"}
    assert out.per_sample_metrics[("score", "none")] == [[0.5, 0.5], [1.0, 1.0]]  # repeats: the same


def test_a_run_without_failures_is_untouched():
    out = _output(score=[0.5, 1.0], only_failed=[None, None])
    agg = _aggregate(out)
    assert agg["score,none"] == 0.75 and agg["only_failed,none"] == 0.0
    assert "n_failed,none" not in agg and ("n_failed", "none") not in out.sample_metrics


def test_process_results_marks_a_failed_answer_in_a_t2i_run_only():
    from lmms_eval.api.task import ConfigurableTask

    task = SimpleNamespace(OUTPUT_TYPE="generate_until", config=SimpleNamespace(
        process_results=lambda doc, results: {"score": 0.0, "other": None}))
    with scope(Run("t2i")):
        assert ConfigurableTask.process_results(task, {}, [FAILED]) == {"score": FailedDoc("refused"), "other": None}
        assert ConfigurableTask.process_results(task, {}, [DRAWN]) == {"score": 0.0, "other": None}
    # the answer's shape decides nothing: outside a t2i run the task scores it as it would
    assert ConfigurableTask.process_results(task, {}, [FAILED]) == {"score": 0.0, "other": None}
    with scope(Run("cycle")):
        assert ConfigurableTask.process_results(task, {}, [FAILED]) == {"score": 0.0, "other": None}


def test_another_models_run_adds_no_failure_count():
    out = _output(score=[0.5, 1.0, 0.0], only_failed=[None, None, None])
    agg = _aggregate(out, model="cycle")
    assert agg["score,none"] == 0.5 and "n_failed,none" not in agg
