"""Per-doc scores for lmms-eval's own statistics (``--baseline``, clustered stderr):
each scorer's per-chain score, and how :mod:`lmms_genbench.hooks.host_scores` writes it into
lmms-eval's logged samples and the headline metric's items."""

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from lmms_eval.utils import load_yaml_config

from lmms_genbench.hooks import host_scores
from lmms_genbench.metrics.scorers.records import ChainRecord, MetricItem, host_key
from lmms_genbench.metrics.scorers.genception import GENCEPTION
from lmms_genbench.metrics.scorers.mcd import MCD
from lmms_genbench.metrics.scorers.mgg import MGG

TASKS = Path(__file__).resolve().parents[2] / "lmms_genbench" / "tasks"


def _record(chain_id, status="ok", length=3):
    return ChainRecord(chain_id=chain_id, status=status, reason=None if status == "ok" else "boom",
                       namespace="/store/test_host_scores", folder=f"f-{chain_id}", direction="image_first",
                       length=length, hops=length + 1, settings='{"preset": "smoke"}')


def test_genception_scores_each_image_by_its_gc_and_category():
    report = {"iterations": 3, "doc_scores": {"chain_ids": ["a", "b", "c"], "columns": {
        "gc": [0.5, None, 0.25], "category": ["scene", "scene", "OCR"]}}}
    metric, scores = GENCEPTION.host_scores(report)
    assert metric == "gc@3"
    assert scores == {"a": (0.5, "scene"), "c": (0.25, "OCR")}  # a NaN (None) GC is no score


def test_mcd_scores_each_chain_by_the_mean_of_its_own_mappings():
    cols = {"mcd_text->text": [0.9, None], "mcd_text->image": [0.3, None],
            "mcd_image->image": [None, 0.8], "mcd_image->text": [None, 0.2], "source": ["docci", "nocaps"]}
    metric, scores = MCD.host_scores({"doc_scores": {"chain_ids": ["p#text_first", "p#image_first"], "columns": cols}})
    assert metric == "mcd_avg"
    assert scores["p#text_first"] == (pytest.approx(0.6), "docci")
    assert scores["p#image_first"] == (pytest.approx(0.5), "nocaps")
    # one chain per direction: their mean is the mean of the four mapping means, MCD_avg
    assert (0.6 + 0.5) / 2 == pytest.approx((0.9 + 0.3 + 0.8 + 0.2) / 4)


def test_mgg_scores_each_prompt_by_its_pass_rate_over_the_scored_generations():
    report = {"scored_generations": [1, 3], "doc_scores": {"chain_ids": ["x", "y"], "columns": {
        "correct@1": [1.0, 0.0], "correct@3": [0.0, 0.0], "tag": ["counting", "colors"]}}}
    metric, scores = MGG.host_scores(report)
    assert metric == "mgg"
    assert scores == {"x": (0.5, "counting"), "y": (0.0, "colors")}


def _task_output(records, config):
    """What lmms-eval 0.7.3 holds per task after its gather and its own aggregation (each
    metric's items through the scorer's ``aggregate``, as ``calculate_aggregate_metric``):
    logged samples (the metrics of ``process_results`` merged in, copies after a gather) and,
    per (metric, filter), the items."""
    import copy

    names = ("gc@3", "gc@3_stderr", "n_scored")
    samples, metrics = [], {(n, "none"): [] for n in names}
    for i, rec in enumerate(records):
        items = {n: MetricItem(n, rec) for n in names}
        samples.append({"doc_id": i, "doc_hash": "h", **copy.deepcopy(items)})
        for n in names:
            metrics[(n, "none")].append(items[n])
    for items in metrics.values():
        GENCEPTION.aggregate(items)
    return SimpleNamespace(task_config=config, logged_samples=samples, sample_metrics=metrics)


def _scored(monkeypatch, report):
    """The scorer's memoised report of the items lmms-eval just aggregated is ``report``."""
    seen = []
    monkeypatch.setattr(GENCEPTION, "report", lambda records: seen.append(list(records)) or report)
    return seen


def test_fill_writes_each_scored_docs_score_and_cluster_and_the_headline_items(monkeypatch):
    ok, other, failed = _record("a"), _record("b"), _record("c", status="failed")
    report = {"iterations": 3, "doc_scores": {"chain_ids": ["a", "b"], "columns": {
        "gc": [0.75, 0.5], "category": ["scene", "OCR"]}}}
    scores = GENCEPTION.scores_by_record([ok, other, failed], report)
    assert scores[host_key(ok)] == (0.75, "scene", "gc@3")
    assert host_key(failed) not in scores
    seen = _scored(monkeypatch, report)

    out = _task_output([ok, other, failed], {"score_key": "score", "cluster_key": "category"})
    assert seen == [[ok, other, failed]] * 3  # each aggregation reads the report of its items (memoised)
    assert [i.host for i in out.sample_metrics[("n_scored", "none")]] == [scores[host_key(r)] for r in (ok, other)] + [None]
    assert host_scores.fill(out) == 2
    assert len(seen) == 3  # filling asks no scorer for anything: the scores came on the items
    s0, s1, s2 = out.logged_samples
    assert (s0["score"], s0["category"]) == (0.75, "scene")
    assert (s1["score"], s1["category"]) == (0.5, "OCR")
    assert "score" not in s2 and "category" not in s2  # a failed doc is left out of the pairing
    # lmms-eval's CLT stderr reads {score_key, cluster_key} from the headline's items only
    items = out.sample_metrics[("gc@3", "none")]
    assert items[:2] == [{"score": 0.75, "category": "scene"}, {"score": 0.5, "category": "OCR"}]
    assert isinstance(items[2], MetricItem)
    assert all(isinstance(x, MetricItem) for x in out.sample_metrics[("n_scored", "none")])
    # the records lmms-eval writes per metric stay what they were ("ok")
    assert str(s0["gc@3"]) == "ok"


def test_the_filled_items_are_in_chain_order_whatever_the_gather_order(monkeypatch):
    """lmms-eval sums the items for its CLT and clustered errors in list order; in chain order
    the two-machine run's sums equal the single run's to the last bit (tests/e2e/test_scale_e2e.py)."""
    records = [_record(c) for c in ("d", "a", "c", "b")]
    report = {"iterations": 3, "doc_scores": {"chain_ids": ["a", "b", "c", "d"], "columns": {
        "gc": [0.1, 0.2, 0.3, 0.4], "category": ["x", "y", "x", "y"]}}}
    _scored(monkeypatch, report)
    failed = _record("e", status="failed")
    out = _task_output([records[0], failed, *records[1:]], {"score_key": "score", "cluster_key": "category"})
    host_scores.fill(out)
    items = out.sample_metrics[("gc@3", "none")]
    assert [i["score"] for i in items if isinstance(i, dict)] == [0.1, 0.2, 0.3, 0.4]
    assert isinstance(items[1], MetricItem)  # an unscored doc keeps its place
    assert [s["score"] for s in out.logged_samples if "score" in s] == [0.4, 0.1, 0.3, 0.2]  # samples: as logged


def test_fill_leaves_other_tasks_and_unscored_chains_alone(monkeypatch):
    plain = SimpleNamespace(task_config={}, logged_samples=[{"doc_id": 0, "exact_match": 1.0}],
                            sample_metrics={("exact_match", "none"): [1.0]})
    assert host_scores.fill(plain) == 0
    assert plain.logged_samples == [{"doc_id": 0, "exact_match": 1.0}]
    _scored(monkeypatch, {})
    never_scored = _task_output([_record("never-scored-anywhere", length=97)], {})
    assert host_scores.fill(never_scored) == 0
    assert "score" not in never_scored.logged_samples[0]


def test_the_lmms_eval_clt_stderr_reads_the_filled_items():
    """lmms-eval's own calculate_clt_aggregate_metric on the filled items: the naive stderr
    of the per-doc scores, and a clustered one because the task names a cluster_key."""
    from lmms_eval.evaluator_utils import TaskOutput

    scores = [0.25, 0.5, 0.75, 1.0]
    out = TaskOutput(task=SimpleNamespace(aggregation=lambda: {"gc@3": None}),
                     task_config={"score_key": "score", "cluster_key": "category"})
    out.sample_metrics[("gc@3", "none")] = [{"score": s, "category": c} for s, c in zip(scores, "aabb")]
    out.calculate_clt_aggregate_metric()
    mean = sum(scores) / 4
    naive = math.sqrt(sum((s - mean) ** 2 for s in scores) / 3 / 4)
    assert out.agg_metrics["gc@3_stderr_clt,none"] == pytest.approx(naive)
    assert isinstance(out.agg_metrics["gc@3_stderr_clustered,none"], float)


CYCLE_TASKS = sorted(p for p in TASKS.glob("*/*.yaml")
                     if p.parent.name in ("mmeception", "sdp") and not p.name.startswith("_"))


@pytest.mark.parametrize("path", CYCLE_TASKS, ids=lambda p: p.stem)
def test_each_cycle_task_names_its_score_and_cluster_for_lmms_eval(path):
    config = load_yaml_config(str(path))
    assert config.get("score_key") == "score"
    mgg = "mgg" in config["process_results"].__name__
    assert config.get("cluster_key") == ("tag" if mgg else "category" if path.parent.name == "mmeception" else "source")
    # the score is made of the task's headline, which lmms-eval aggregates
    listed = {m["metric"] for m in config["metric_list"]}
    assert ("mgg" if mgg else "mcd_avg" if path.parent.name == "sdp" else
            f"gc@{config['generation_kwargs']['iterations']}") in listed


def test_autobench_samples_get_each_docs_correctness_as_score_and_aspect_as_cluster():
    from lmms_genbench.tasks.autobench import utils

    doc = {"answer": "B", "level": "easy", "aspect": "spatial", "capability": "count"}
    right, wrong = utils.process_results(doc, ["[[B]]"]), utils.process_results(doc, ["[[C]]"])
    out = SimpleNamespace(task_config={"score_key": "score", "cluster_key": "aspect"},
                          logged_samples=[{"doc_id": 0, **right}, {"doc_id": 1, **wrong}],
                          sample_metrics={("acc", "none"): [right["acc"], wrong["acc"]]})
    assert host_scores.fill(out) == 2
    assert [(s["score"], s["aspect"]) for s in out.logged_samples] == [(1.0, "spatial"), (0.0, "spatial")]
    assert out.sample_metrics[("acc", "none")] == [right["acc"], wrong["acc"]]  # items unchanged
    assert utils.aggregate(out.sample_metrics[("acc", "none")]) == 0.5


def test_chef_samples_get_whether_the_unperturbed_variant_is_right_as_score():
    import json

    from lmms_genbench.chef import results as chef

    def response(pred, gold=1):
        return json.dumps({"desideratum": "robustness", "group": "q7", "variants": [
            {"name": "clean", "pred": pred, "gold": gold, "n_options": 4, "confidence": None},
            {"name": "noisy", "pred": 0, "gold": gold, "n_options": 4, "confidence": None}]})

    right, wrong = chef.process_results({}, [response(1)]), chef.process_results({}, [response(2)])
    failed = chef.process_results({}, [json.dumps({"error": "no image", "desideratum": "robustness"})])
    out = SimpleNamespace(task_config={"score_key": "score", "cluster_key": "group"},
                          logged_samples=[{"doc_id": i, **r} for i, r in enumerate((right, wrong, failed))],
                          sample_metrics={("acc", "none"): [right["acc"], wrong["acc"]]})
    assert host_scores.fill(out) == 2
    assert [(s.get("score"), s.get("group")) for s in out.logged_samples] == [(1.0, "q7"), (0.0, "q7"), (None, None)]
    assert chef.aggregate(out.sample_metrics[("acc", "none")]) == 0.5  # acc is the mean of the scores
