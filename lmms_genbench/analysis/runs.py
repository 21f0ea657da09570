"""One lmms-eval run as the analysis commands read it.

A run is what ``lmms-eval --output_path OUT --log_samples`` wrote: ``<date>_results.json``
(every task's scores and lmms-eval's ``<metric>_stderr``) and, beside it, one
``<date>_samples_<task>.jsonl`` per task. For a cycle task each sample's answer is a
:class:`~lmms_genbench.engine.Chain` naming where the chain lives in the artifact store,
and the store holds the scorer's report beside the chains: per-doc scores, how each
headline score is estimated from them, and its interval. So ``compare``, ``ranks`` and
``report`` read a run through :func:`load_run` and nothing else.

The samples files are needed for what is per doc (paired comparison, the chain
gallery); without them (no ``--log_samples``) a run still gives its scores.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..store import Chain, NotAChainError
from .results import (
    RESULTS_SUFFIX,
    ResultsError,
    find_results,
    finite_or_none,
    label_from_config,
    read_results,
    task_metrics,
)

__all__ = ["Run", "RunError", "TaskRun", "find_results", "load_run"]

#: keys every scorer report carries (metrics/scorers/base.py ``write``)
_REPORT_KEY = "scorer"


class RunError(ResultsError):
    """A run that cannot be read; the message names the file and what is wrong."""


@dataclass
class TaskRun:
    """One task of a run.

    Attributes:
        task: the lmms-eval task name.
        scores: metric -> value from the results file (lmms-eval's ``"<metric>,none"``
            keys, filter suffix dropped; None where the value is not a finite number).
        stderr: metric -> lmms-eval's ``<metric>_stderr`` where it is a number.
        higher_is_better: metric -> bool, as the task's YAML states.
        chains: doc id -> the doc's chain (cycle tasks with ``--log_samples``).
        reports: scorer name -> the store report the scores came from.
        samples_file: the samples file read, if any.
    """

    task: str
    scores: dict[str, float | None] = field(default_factory=dict)
    stderr: dict[str, float] = field(default_factory=dict)
    higher_is_better: dict[str, bool] = field(default_factory=dict)
    chains: dict[str, Chain] = field(default_factory=dict)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    samples_file: Path | None = None

    def report_for(self, metric: str) -> dict[str, Any] | None:
        """The store report that holds ``metric``'s per-doc estimator, if any."""
        for report in self.reports.values():
            if metric in (report.get("estimators") or {}):
                return report
        return None

    def interval(self, metric: str) -> dict[str, Any] | None:
        """``metric``'s interval from its store report (``low``, ``high``, ``stderr`` ...)."""
        for report in self.reports.values():
            found = (report.get("intervals") or {}).get(metric)
            if found is not None:
                return found
        return None


@dataclass
class Run:
    """One results file with its tasks.

    Attributes:
        path: the ``*_results.json`` file.
        model: lmms-eval's ``--model``; model_args: its ``--model_args`` string.
        date: lmms-eval's run stamp (the file name's prefix).
        tasks: task name -> :class:`TaskRun`.
    """

    path: Path
    model: str
    model_args: str
    date: str
    tasks: dict[str, TaskRun]
    config: dict[str, Any] = field(default_factory=dict)
    #: lmms-eval's ``"throughput"`` summary (the cycle model's engine figures; see :mod:`.rates`)
    throughput: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return label_from_config(self.config, self.path.stem)


def _split_metrics(task_results: Mapping[str, Any]) -> tuple[dict[str, float | None], dict[str, float]]:
    scores: dict[str, float | None] = {}
    stderr: dict[str, float] = {}
    for metric, value in task_metrics(task_results).items():
        if metric.endswith("_stderr"):
            number = finite_or_none(value)
            if number is not None:
                stderr[metric[: -len("_stderr")]] = number
        elif not metric.endswith(("_stderr_clt", "_stderr_clustered")):
            scores[metric] = finite_or_none(value)
    return scores, stderr


def _samples(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except ValueError as exc:
                raise RunError(f"{path}: line {number} is not JSON ({exc})") from None


def _response(sample: Mapping[str, Any]) -> Any:
    """The doc's answer: lmms-eval logs ``filtered_resps`` as a string or a list of them."""
    resp = sample.get("filtered_resps", sample.get("resps"))
    while isinstance(resp, list) and resp:
        resp = resp[0]
    return resp


def _read_chains(path: Path) -> dict[str, Chain]:
    chains: dict[str, Chain] = {}
    for sample in _samples(path):
        try:
            chain = Chain.from_json(_response(sample))
        except NotAChainError:
            return {}  # not a cycle task: its samples hold no chains
        chains[str(sample.get("doc_id"))] = chain
    return chains


def _store_reports(chains: Mapping[str, Chain], scores: Mapping[str, float | None]) -> dict[str, dict[str, Any]]:
    """Per scorer, the report in the chains' store that these ``scores`` came from.

    A store keeps one keyed report per scorer settings (``<stem>-<key>.json``) and a copy
    of the latest; the report taken is the one whose headline values equal the run's
    scores, so a later rescoring with other networks does not change what a run shows."""
    namespaces = sorted({c.namespace for c in chains.values()})
    found: dict[str, tuple[int, dict[str, Any]]] = {}
    for namespace in namespaces:
        folder = Path(namespace)
        if not folder.is_dir():
            continue
        for file in sorted(folder.glob("*.json")):
            try:
                report = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(report, dict) or not isinstance(report.get(_REPORT_KEY), dict):
                continue
            name = str(report[_REPORT_KEY].get("name"))
            agreement = _agreement(report, scores)
            if agreement >= 0 and (name not in found or agreement > found[name][0]):
                found[name] = (agreement, report)
    return {name: report for name, (_, report) in found.items()}


def _flat(report: Mapping[str, Any]) -> dict[str, Any]:
    flat = dict(report)
    for part in ("summary",):
        if isinstance(report.get(part), Mapping):
            flat.update(report[part])
    return flat


def _agreement(report: Mapping[str, Any], scores: Mapping[str, float | None]) -> int:
    """How many of the run's scores the report holds with the same value; -1 if one differs."""
    flat, same = _flat(report), 0
    for metric, value in scores.items():
        theirs = finite_or_none(flat.get(metric))
        if value is None or theirs is None:
            continue
        if not math.isclose(value, theirs, rel_tol=1e-9, abs_tol=1e-12):
            return -1
        same += 1
    return same


def load_run(path: str | Path) -> Run:
    """Read one lmms-eval results file, its samples files and its chains' store reports.

    Raises:
        RunError: the file is missing, not JSON, or has no ``results`` mapping."""
    path = Path(path)
    if path.is_dir():
        found = find_results(path)
        if len(found) != 1:
            raise RunError(f"{path}: expected one *{RESULTS_SUFFIX} under it, found {len(found)}; name the file")
        path = found[0]
    try:
        data = read_results(path)
    except ResultsError as exc:
        raise RunError(str(exc)) from None
    results = data["results"]
    date = path.name[: -len(RESULTS_SUFFIX)] if path.name.endswith(RESULTS_SUFFIX) else str(data.get("date", ""))
    tasks: dict[str, TaskRun] = {}
    for task, task_results in results.items():
        if not isinstance(task_results, dict):
            continue
        scores, stderr = _split_metrics(task_results)
        run = TaskRun(task=task, scores=scores, stderr=stderr)
        hib = (data.get("higher_is_better") or {}).get(task) or {}
        run.higher_is_better = {k: bool(v) for k, v in hib.items() if isinstance(v, bool)}
        samples = path.with_name(f"{date}_samples_{task}.jsonl")
        if samples.is_file():
            run.samples_file = samples
            run.chains = _read_chains(samples)
            run.reports = _store_reports(run.chains, scores) if run.chains else {}
        tasks[task] = run
    config = data["config"]
    return Run(
        path=path,
        model=str(config.get("model") or ""),
        model_args=str(config.get("model_args") or ""),
        date=date,
        tasks=tasks,
        config=config,
        throughput=dict(data.get("throughput") or {}) if isinstance(data.get("throughput"), dict) else {},
    )
