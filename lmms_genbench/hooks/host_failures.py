"""A doc that ``--model t2i`` could not draw is N/A in an lmms-eval task's numbers, never a 0.

lmms-eval 0.7.3's text-to-image tasks score a doc without an image as they score a missing
image (WISE: 0, status ``missing_image``), so a generator that fails some prompts would lower
the task's score as if it had drawn them badly. Our ``t2i`` answers such a doc with
``"status": "failed"`` and its ``reason`` (:mod:`lmms_genbench.models.t2i`). During a run of
``--model t2i`` (decided from the model that runs, never from an answer's shape: another
model's answers are never touched), two hooks of :mod:`lmms_genbench.hooks.run` keep it out of
the numbers:

* the ``ConfigurableTask.process_results`` wrapper: the task scores the doc as it would, then
  :func:`mark` turns each of its per-doc values (``None``, the task's "does not apply", stays)
  into a :class:`FailedDoc`;
* :func:`set_aside`, run by the aggregation wrapper before lmms-eval aggregates, takes those out of the metric's items (a metric left with no value
  but ``None`` is not aggregated) and writes ``{"score": None, "status": "failed",
  "reason": …}`` in their place in the logged samples; then :func:`report` writes ``None``
  (lmms-eval prints N/A) for such a metric and adds ``n_failed,<filter>``: the docs left out.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["N_FAILED", "FailedDoc", "failed_answer", "mark", "put_back", "report", "set_aside"]

#: the count of docs left out, the name our own tasks give it
N_FAILED = "n_failed"
_MARK = '"status": "failed"'  # as json.dumps writes it in t2i's answer: a cheap first test
#: the keys every t2i answer has (lmms-eval's text-to-image format)
T2I_KEYS = frozenset({"text", "images"})


@dataclass(frozen=True)
class FailedDoc:
    """A per-doc value of a doc the model could not answer (picklable: ranks gather it), and the
    value the task gave it, put back if the task cannot aggregate without the doc."""

    reason: str
    original: Any = field(default=None, compare=False, repr=False)

    def logged(self) -> dict[str, Any]:
        return {"score": None, "status": "failed", "reason": self.reason}


def failed_answer(results: Any) -> FailedDoc | None:
    """The failure of the first answer in ``results`` (the task's responses for one doc) that
    is a failed ``t2i`` answer, else None."""
    answers = results if isinstance(results, (list, tuple)) else [results]
    for answer in answers:
        if isinstance(answer, (list, tuple)):  # one list per request when a doc asks for several
            found = failed_answer(answer)
            if found is not None:
                return found
        elif isinstance(answer, str) and answer.startswith("{") and _MARK in answer:
            try:
                parsed = json.loads(answer)
            except ValueError:
                continue
            # t2i's answer shape: a cycle chain's record also says "status": "failed", and our
            # own scorers count those
            if isinstance(parsed, Mapping) and parsed.get("status") == "failed" and T2I_KEYS <= parsed.keys():
                return FailedDoc(str(parsed.get("reason") or "unknown"))
    return None


def mark(metrics: Any, failed: FailedDoc) -> Any:
    """``metrics`` (one doc's ``{metric: value}``) with every value but ``None`` replaced by
    ``failed``."""
    if not isinstance(metrics, Mapping):
        return metrics
    return {metric: value if value is None else FailedDoc(failed.reason, value) for metric, value in metrics.items()}


@dataclass
class SetAside:
    """What :func:`set_aside` took out of one task's items."""

    left_out: dict[str, int]  # filter -> docs left out (the most of any one metric)
    emptied: list[tuple[str, str]]  # (metric, filter) with no item left
    before: list[tuple[Any, Any, Any]] = field(default_factory=list)  # (container, key, value) changed


def set_aside(task_output: Any) -> SetAside:
    """Take the :class:`FailedDoc` values out of ``task_output``'s items and logged samples."""
    left_out: dict[str, int] = defaultdict(int)
    emptied, before = [], []
    sample_metrics = getattr(task_output, "sample_metrics", None) or {}
    for key, items in list(sample_metrics.items()):
        kept = [item for item in items if not isinstance(item, FailedDoc)]
        if len(kept) == len(items):
            continue
        before.append((sample_metrics, key, items))
        filter_key = key[1]
        left_out[filter_key] = max(left_out[filter_key], len(items) - len(kept))
        if any(item is not None for item in kept):
            sample_metrics[key] = kept
        else:  # nothing left to aggregate (WISE would call a category with no doc 0.0)
            del sample_metrics[key]
            emptied.append(key)
    per_sample = getattr(task_output, "per_sample_metrics", None) or {}  # repeats > 1: one list per doc
    for key, groups in list(per_sample.items()):
        before.append((per_sample, key, groups))
        per_sample[key] = [kept for group in groups
                           if (kept := [x for x in group if not isinstance(x, FailedDoc)])]
    for sample in getattr(task_output, "logged_samples", None) or ():
        for name, value in list(sample.items()):
            if isinstance(value, FailedDoc):
                before.append((sample, name, value))
                sample[name] = value.logged()
    return SetAside(dict(left_out), emptied, before)


def put_back(held: SetAside) -> None:
    """Undo :func:`set_aside`, each failed doc with the value its task gave it: for a task whose
    own aggregation cannot do without the doc (MME asserts two answers per image)."""
    def original(value):
        if isinstance(value, FailedDoc):
            return value.original
        return [original(x) for x in value] if isinstance(value, list) else value

    for container, key, value in reversed(held.before):
        container[key] = original(value)
    held.left_out.clear()
    held.emptied.clear()


def report(task_output: Any, held: SetAside) -> None:
    """After aggregation: each emptied metric reads ``None`` (lmms-eval prints N/A), each filter
    with failures gets ``n_failed``. lmms-eval writes the metrics its ``sample_metrics`` names,
    so both go back there, with no items."""
    agg = getattr(task_output, "agg_metrics", None)
    sample_metrics = getattr(task_output, "sample_metrics", None)
    if agg is None or sample_metrics is None:
        return
    named = [(key, None) for key in held.emptied]
    named += [((N_FAILED, filter_key), count) for filter_key, count in held.left_out.items()]
    for (metric, filter_key), value in named:
        sample_metrics[(metric, filter_key)] = []
        agg[f"{metric},{filter_key}"] = value
        agg[f"{metric}_stderr,{filter_key}"] = "N/A"
