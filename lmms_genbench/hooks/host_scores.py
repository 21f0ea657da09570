"""Per-doc scores in lmms-eval's own statistics: ``--baseline`` and clustered standard errors.

lmms-eval 0.7.3 pairs two runs (``--baseline <samples JSONL>``: a paired t-test matched on
``doc_id``) on each logged sample's numeric ``score`` (the task's ``score_key``), and its
CLT standard errors read ``score`` and the task's ``cluster_key`` from each metric's
per-doc items. A chain's score is known only once the task's chains are scored together in
``aggregate``, after lmms-eval has logged the sample, so during a run with our tasks
:mod:`lmms_genbench.hooks.run` wraps ``TaskOutput.calculate_aggregate_metric`` (rank 0, after
the gather, before the samples are written or paired). Right after lmms-eval's own
aggregation, :func:`fill` gives each scored doc of one of our tasks:

* ``sample[score_key]``: the chain's share of the headline (``MetricItem.host``, which the
  scorer's ``aggregate`` set from the report it computed of these items, as
  ``ChainScorer.scores_by_record`` reads it: the image's GC@T, the chain's MCD, the prompt's
  MGG pass rate) and, if the task names
  one, ``sample[cluster_key]``: its MME category, ND400 source or GenEval tag;
* in place of the headline metric's items, ``{score_key: score, cluster_key: cluster}``,
  from which lmms-eval computes ``<headline>_stderr_clt`` and ``<headline>_stderr_clustered``
  (the headline's own value and our bootstrap ``<headline>_stderr`` are already computed).

AutoBench-V's records know their score when lmms-eval logs them (a doc's 0/1 correctness,
``record["score"]``); :func:`fill` copies it and the record's cluster to the sample the same
way (its items stay as they are). A failed doc gets no score; lmms-eval leaves it out of the
pairing. The hook calls :func:`fill` for our tasks only (:func:`lmms_genbench.hooks.scope.is_our_task`):
lmms-eval's own tasks are never touched, whatever their records look like.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..metrics.scorers.records import MetricItem, host_key

__all__ = ["fill"]

DEFAULT_SCORE_KEY = "score"  # lmms-eval's default score_key


def fill(task_output: Any) -> int:
    """Write each scored chain's score (and cluster) into ``task_output``'s logged samples
    and its headline metric's items; returns how many samples got a score."""
    config = task_output.task_config if isinstance(getattr(task_output, "task_config", None), Mapping) else {}
    score_key = config.get("score_key") or DEFAULT_SCORE_KEY
    cluster_key = config.get("cluster_key")
    scores = _chain_scores(getattr(task_output, "sample_metrics", {}))
    filled = 0
    for sample in getattr(task_output, "logged_samples", None) or ():
        found = _score_of(sample.values(), scores, cluster_key)
        if found is not None:
            sample[score_key] = found[0]
            if cluster_key and found[1] is not None:
                sample[cluster_key] = found[1]
            filled += 1
    for (metric, _filter), items in list(getattr(task_output, "sample_metrics", {}).items()):
        scored = []
        for i, item in enumerate(items):
            found = _score_of((item,), scores)
            if found is not None and found[2] == metric:
                scored.append((i, (item.record.folder, item.record.namespace),
                               {score_key: found[0], **({cluster_key: found[1]} if cluster_key else {})}))
        # in chain order, not gather order: lmms-eval's CLT and clustered errors sum these
        # floats, and the sums should not depend on how many processes ran the task
        for i, (_i, _key, replacement) in zip([i for i, _k, _r in scored], sorted(scored, key=lambda s: s[1])):
            items[i] = replacement
    return filled


def _chain_scores(sample_metrics: Mapping) -> dict[tuple, tuple[float, str | None, str]]:
    """Per :func:`host_key`, each scored chain's score, cluster and metric, as the items carry
    them since lmms-eval aggregated them (:attr:`MetricItem.host`); logged samples hold copies
    of the items (after a gather), so they are matched by key."""
    return {host_key(item.record): item.host for items in list(sample_metrics.values()) for item in items
            if isinstance(item, MetricItem) and item.host is not None}


def _score_of(values, scores: Mapping[tuple, tuple[float, str | None, str]],
              cluster_key: str | None = None) -> tuple[float, str | None, str] | None:
    """The host score of the first record among ``values``: a chain's, once scored; or a
    ``(metric, record)`` pair's whose record carries its own numeric ``score`` (AutoBench-V)."""
    for value in values:
        if isinstance(value, MetricItem):
            return scores.get(host_key(value.record))
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], Mapping):
            score = value[1].get(DEFAULT_SCORE_KEY)
            if isinstance(score, (int, float)) and not isinstance(score, bool):
                cluster = value[1].get(cluster_key) if cluster_key else None
                return float(score), None if cluster is None else str(cluster), ""
    return None
