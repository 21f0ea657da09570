"""Hooks of the autobench tasks; the scoring lives in lmms_genbench.metrics.functional.autobench."""

from __future__ import annotations

import math
import os

from lmms_genbench.autobench.balance import LETTERS, move_answer
from lmms_genbench.autobench.prompts import ANSWER, ANSWER_NO_IMAGE, render
from lmms_genbench.metrics.functional.autobench import (
    EXTRACTION_RULES,
    AccuracyStats,
    accuracy_interval,
    score_record,
)

DATASET_ENV = "AUTOBENCH_DATASET"


def load_docs(dataset):
    from lmms_genbench.autobench.dataset import load

    source = os.environ.get(DATASET_ENV)
    if not source:
        raise ValueError(f"the autobench tasks need the environment variable {DATASET_ENV} set to a build folder, a save_to_disk folder or a hub id (from `lmms-genbench autobench build`)")
    return load(source)


def _moved(dataset, target):
    def move(doc):
        doc["options"], doc["answer"] = move_answer(doc["options"], doc["answer"], target)
        return doc

    return dataset.map(move)


def load_docs_pos_a(dataset):
    return _moved(load_docs(dataset), "A")


def load_docs_pos_d(dataset):
    return _moved(load_docs(dataset), "D")


def doc_to_visual(doc):
    return [doc["image"].convert("RGB")]


def doc_to_visual_none(doc):
    return []


def _options(doc):
    return "\n".join(f"{x}. {o}" for x, o in zip(LETTERS, doc["options"]))


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return render(ANSWER, aspect=doc["aspect"], question=doc["question"], options=_options(doc))


def doc_to_text_noimage(doc, lmms_eval_specific_kwargs=None):
    return render(ANSWER_NO_IMAGE, aspect=doc["aspect"], question=doc["question"], options=_options(doc), description=doc["description"])


# what each metric reads from the accuracy statistics of the task's records
_METRICS = {
    "acc": lambda stats: stats.acc(),
    "acc_easy": lambda stats: stats.acc("level:easy"),
    "acc_medium": lambda stats: stats.acc("level:medium"),
    "acc_hard": lambda stats: stats.acc("level:hard"),
    "n_docs": lambda stats: stats.n,
    "n_unparsed": lambda stats: stats.unparsed,
    # the authors' accuracy: the first [[...]] of the reply equals the gold letter
    "acc_strict": lambda stats: stats.acc_strict(),
    "acc_strict_easy": lambda stats: stats.acc_strict("level:easy"),
    "acc_strict_medium": lambda stats: stats.acc_strict("level:medium"),
    "acc_strict_hard": lambda stats: stats.acc_strict("level:hard"),
    # how many answers each extraction rule of acc read
    **{f"n_rule_{rule}": (lambda stats, rule=rule: stats.by_rule[rule]) for rule in EXTRACTION_RULES},
    "breakdown": lambda stats: stats.breakdown(),
    "pred_letters": lambda stats: stats.pred_letters,
}


# accuracies with a bootstrap standard error, `<m>_stderr` right after `m` (lmms-eval shows
# it as m's ±; the order matters: see lmms_genbench.metrics.scorers.base.with_stderr)
_STDERR = {"acc": None, "acc_easy": "easy", "acc_medium": "medium", "acc_hard": "hard"}
METRICS = [x for m in _METRICS for x in ((m, f"{m}_stderr") if m in _STDERR else (m,))]


def process_results(doc, results):
    """Each metric gets ``(its name, the doc's record)``, so one ``aggregate`` serves all."""
    resp = results[0] if results else None
    rec = score_record(resp if isinstance(resp, str) else None, doc["answer"], doc["level"], doc["aspect"], doc["capability"])
    # the doc's share of acc, for lmms-eval's --baseline (lmms_genbench.hooks.host_scores)
    rec["score"] = float(rec["correct"])
    return {m: (m, rec) for m in METRICS}


def aggregate(items):
    """The metric's value; None (N/A in lmms-eval, null in its results file) for NaN."""
    metric = items[0][0]
    records = [rec for _, rec in items]
    if metric.endswith("_stderr"):
        value = accuracy_interval(records, _STDERR[metric[: -len("_stderr")]])["stderr"]
    else:
        value = _METRICS[metric](AccuracyStats.of(records))
    return None if isinstance(value, float) and math.isnan(value) else value
