"""The one shape every scorer of stored chains takes.

A task's ``process_results`` turns each doc's answer (a :class:`~lmms_genbench.engine.Chain`)
into a small :class:`ChainRecord` and hands it to lmms-eval once per metric name, as a
:class:`MetricItem`; every metric of the task points at the same ``aggregate``, which
scores the chains once (memoised per set of chains and settings) and reads its metric
from the report. So a scorer subclass holds only its maths, its networks and the names
of what it reports:

* ``fields(doc, chain)``: the doc fields the scorer needs later (a category, a source);
* ``metric_names(length, settings)``: the names it reports for a chain length;
* ``score(records, settings, length)``: the report, a flat dict, with each chain's verdict
  under ``report["verdicts"]`` (``Triage.reasons()``: read for ``failed_docs``, never written);
* ``payload(report)``: what goes to ``<namespace>/<report_file>`` beside the chains;
* ``prepare(record, length)``: what scoring reads of a chain, or why it cannot be scored
  (the report lists each refused doc with that reason); ``score`` sorts its records with
  ``triage`` (one loop for every scorer: each chain prepared once, each refusal counted);
* ``estimators(report, settings)``: per headline metric, the spec that recomputes it from
  ``report["doc_scores"]`` (each scored doc's few values, returned by ``score``); the base
  class adds a bootstrap interval of each (``report["intervals"]``, its ``stderr`` is the
  metric ``<m>_stderr``), and ``no_intervals`` says why a metric gets none.

Report files are plain JSON (``allow_nan=False``): a value that is not a number is written as
null and ``null_reasons`` maps its JSON pointer to ``null_reason(pointer, report)``.

Reports are keyed by scorer: ``<namespace>/<stem>-<key>.json`` holds the report of the
scorer settings whose short hash is ``key`` (networks and options, not device or batch
size), so a rerun with other networks writes beside it; ``<namespace>/<report_file>``
is a copy of the latest one. Both name the settings and list the failed chains with
their reasons (the first :data:`MAX_FAILED_LISTED`, by chain id).

Failures a person must fix (a response that is not a chain, a network that does not
load) stop the run with one line naming the cause and the fix
(:class:`~lmms_genbench.core.errors.ActionableError`), never a retried traceback.

Settings: the task's ``generation_kwargs.scorer`` mapping travels on every chain
(``preset`` picks one of the scorer's ``PRESETS``, other keys override it), then the
``LMMS_GENBENCH_*`` environment overrides the networks, device and batch size.

The pieces beside this module (import their names from them): ``records`` (a doc's
:class:`ChainRecord`, :class:`MetricItem`, the sorting of records into chains to score and
counted failures), ``settings`` (the environment, the report key, the one-line network
failure), ``blocks`` (stored images decoded and worked on in threads) and ``reports`` (the
report memo, the no-score notice at exit).

The chain length comes from the chains (the task's ``iterations``/``generations``), never
from a constant here. One rule for every scorer: a chain with fewer generations than the
task asks is a counted failure with its reason; a chain with more is scored on its first
``length`` hops, which are identical by construction to a chain of that length.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ...core.errors import WrongModelError, from_exception
from ...core.keys import atomic_write, json_nulls, strict_json
from ...core.registry import lookup
from ...store import Chain, NotAChainError, text_cut_summary
from ..functional.intervals import bootstrap_intervals, check_spec, no_interval
from .records import ChainRecord, MetricItem, Triage, host_key, unique_records, verdict_key
from .reports import ReportCache, no_score
from .settings import bootstrap_settings, network_failure, settings_dict, settings_key
from .stored import FEATURES

__all__ = ["MAX_FAILED_LISTED", "NO_DATA", "TABLE_KEYS", "VERDICTS", "ChainScorer", "macro_mean", "with_stderr"]

logger = logging.getLogger(__name__)

#: failed chains listed by id in a report (all are counted in its failure_reasons)
MAX_FAILED_LISTED = 100
#: report keys that go to the report file beside the payload, never into a metric
TABLE_KEYS = ("doc_scores", "estimators", "intervals", "bootstrap")
#: the report key under which ``score`` returns each chain's verdict (taken out before writing)
VERDICTS = "verdicts"
#: why a report value is null, unless the scorer knows better (``null_reason``)
NO_DATA = "not a number: no scored doc contributes to it"


def macro_mean(values: Iterable[float]) -> float:
    """Mean of the non-NaN values; NaN if there are none."""
    vals = [v for v in values if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


def with_stderr(names: Sequence[str], headline: Iterable[str]) -> list[str]:
    """``names`` with ``<m>_stderr`` right after each headline ``m``.

    lmms-eval 0.7.3 writes ``<m>_stderr`` = "N/A" when it aggregates ``m`` (it knows no
    standard error of our aggregations) and then aggregates the metrics in the order
    ``process_results`` first returned them; ``<m>_stderr`` aggregated after ``m`` therefore
    overwrites "N/A" with the bootstrap standard error, which its table shows as ``m``'s ±."""
    headline = set(headline)
    return [x for name in names for x in ((name, f"{name}_stderr") if name in headline else (name,))]


# --------------------------------------------------------------------------- the scorer
class ChainScorer:
    """Base of the scorers of stored chains (see the module docstring).

    Subclasses set ``name``, ``report_file``, ``PRESETS`` (``"paper"`` first: the
    default) and ``Settings`` (a frozen dataclass with ``resolve(mapping)`` that applies
    the environment), and implement ``metric_names`` and ``score``.
    """

    name: ClassVar[str]
    report_file: ClassVar[str]
    PRESETS: ClassVar[Mapping[str, Mapping[str, Any]]]
    Settings: ClassVar[Any]

    def __init__(self) -> None:
        self._cache = ReportCache()

    # ----------------------------------------------------------- per subclass
    def fields(self, doc: Mapping[str, Any], chain: Chain) -> Mapping[str, Any]:
        """Doc fields kept on the record. Raise ValueError to fail the doc with a reason."""
        return {}

    def metric_names(self, length: int, settings: Mapping[str, Any]) -> list[str]:
        raise NotImplementedError

    def score(self, records: Sequence[ChainRecord], settings: Any, length: int) -> dict[str, Any]:
        raise NotImplementedError

    def payload(self, report: Mapping[str, Any]) -> dict[str, Any]:
        return dict(report)

    def estimators(self, report: Mapping[str, Any], settings: Any) -> dict[str, dict[str, Any]]:
        """Metric -> estimator spec (:mod:`~lmms_genbench.metrics.functional.intervals`) that
        recomputes the metric from ``report["doc_scores"]``; each gets a bootstrap interval."""
        return {}

    def no_intervals(self, report: Mapping[str, Any], settings: Any) -> dict[str, str]:
        """Metric -> why it gets no interval (FID: a set-level statistic)."""
        return {}

    def null_reason(self, pointer: str, report: Mapping[str, Any]) -> str:
        """Why the report value at JSON ``pointer`` is not a number (written as null)."""
        return NO_DATA

    def host_scores(self, report: Mapping[str, Any]) -> tuple[str, dict[str, tuple[float, str | None]]]:
        """The headline metric made of per-doc scores and, per scored chain id, its score
        and cluster, read from ``report["doc_scores"]`` (lmms-eval's per-sample ``score``)."""
        return "", {}

    def scores_by_record(self, records: Sequence[ChainRecord],
                         report: Mapping[str, Any] | None = None) -> dict[tuple, tuple[float, str | None, str]]:
        """Per :func:`host_key` of each scored record: its score, cluster and the headline metric
        it makes up, from ``report`` (default: :meth:`report` of ``records``, the memoised one
        when lmms-eval's aggregation read the same items)."""
        report = self.report(records) if report is None else report
        if not report:  # no records, nothing scored
            return {}
        metric, scores = self.host_scores(report)
        return {host_key(rec): (float(scores[rec.chain_id][0]), scores[rec.chain_id][1], metric)
                for rec in records if rec.chain_id in scores}

    def prepare(self, record: ChainRecord, length: int) -> Any:
        """What scoring reads of the chain, or why it cannot be scored (a ``str``): the one
        verdict on a chain (:meth:`triage` asks it once per chain; the report lists each refusal)."""
        return record if record.ok else record.reason or "failed"

    # ----------------------------------------------------------- helpers for score
    def triage(self, records: Iterable[ChainRecord], length: int, key: Callable[[ChainRecord], Any]) -> Triage:
        """Each record once, in ``key`` order (:func:`unique_records`: the scores do not depend on
        the order records arrive in), with what :meth:`prepare` made of it: what scoring reads,
        or the reason it is refused, counted in ``failures`` (the report's ``failure_reasons``);
        ``score`` returns ``out.reasons()`` as ``report["verdicts"]``, so the report's
        ``failed_docs`` does not prepare (and read the texts of) every chain a second time."""
        out = Triage(length=length)
        for rec in unique_records(records, key):
            out.add(rec, self.prepare(rec, length))
        return out

    # ----------------------------------------------------------- settings
    def task_settings(self, scorer: Mapping[str, Any]) -> dict[str, Any]:
        """The task's settings: its preset's values overridden by its own keys."""
        if not isinstance(scorer, Mapping):
            raise ValueError(f"generation_kwargs.scorer must be a mapping, got {scorer!r}")
        preset = lookup(self.PRESETS, scorer.get("preset", "paper"), f"the {self.name} scorer's generation_kwargs.scorer.preset")
        return {**preset, **{k: v for k, v in scorer.items() if k != "preset"}}

    def resolve(self, scorer: Mapping[str, Any]) -> Any:
        """Settings for scoring: the task's, then the ``LMMS_GENBENCH_*`` environment."""
        return self.Settings.resolve(self.task_settings(scorer))

    # ----------------------------------------------------------- lmms-eval glue
    def record(self, doc: Mapping[str, Any], response: Any, **settings: Any) -> ChainRecord:
        """The doc's record. ``settings`` add to the task's scorer settings (a task's
        ``process_results`` may state facts of its data, such as MME's category groups).

        A response that is not a chain stops the run (:class:`WrongModelError`): it means
        the task ran on another model type, and every score would be meaningless."""
        try:
            chain = Chain.from_json(response)
        except NotAChainError as exc:
            raise WrongModelError(
                "cycle", "cycle tasks (mmeception*, sdp_*)", f"the {self.name} scorer got {exc}",
                " (--model_args describer=...,generator=... or unified=...)",
            ) from None
        status, reason, fields = chain.status, None if chain.ok else str(chain.failure), {}
        try:
            fields = dict(self.fields(doc, chain))
        except ValueError as exc:
            status, reason = "failed", str(exc)
        return ChainRecord(
            chain_id=chain.chain_id,
            status=status,
            reason=reason,
            namespace=chain.namespace,
            folder=chain.folder,
            direction=chain.direction,
            length=chain.length,
            hops=chain.hops,
            settings=json.dumps({**chain.scorer, **settings}, sort_keys=True, default=str),
            fields=fields,
            task=chain.task,
        )

    def process_results(self, doc: Mapping[str, Any], results: Sequence[Any], **settings: Any) -> dict[str, MetricItem]:
        """lmms-eval's ``process_results``: the doc's record under each metric name.

        lmms-eval retries this call on any ``Exception`` and then raises a ``RetryError``
        around it; a failure here is deterministic, so it ends the run at once with one
        line instead."""
        try:
            record = self.record(doc, results[0], **settings)
            names = self.metric_names(record.length, self.task_settings(json.loads(record.settings)))
        except Exception as exc:
            raise from_exception(
                exc, f"the {self.name} scorer could not read a doc's answer",
                "check the task's generation_kwargs.scorer and its doc fields (--verbosity DEBUG shows the traceback)",
            )
        return {name: MetricItem(name, record) for name in names}

    def aggregate(self, items: Sequence[MetricItem]) -> Any:
        """One metric's value: every metric of a task points here. ``<m>_stderr`` is the
        bootstrap standard error of ``m``. A value that is not a number is None (lmms-eval
        prints N/A and its results file stays plain JSON)."""
        if not items:
            return None
        metric = items[0].metric
        records = [item.record for item in items]
        report = self.report(records)
        # each doc's share of the headline travels on its item, from the report it belongs to
        # (read by lmms_genbench.hooks.host_scores after lmms-eval's aggregation)
        host = self.scores_by_record(records, report)
        for item in items:
            item.host = host.get(host_key(item.record))
        value = report.get(metric)
        if value is None and metric.endswith("_stderr"):
            value = (report.get("intervals") or {}).get(metric[: -len("_stderr")], {}).get("stderr")
        return None if isinstance(value, float) and not math.isfinite(value) else value

    # ----------------------------------------------------------- report
    def report(self, records: Sequence[ChainRecord]) -> dict[str, Any]:
        """The report of ``records``, scored once per set of chains and settings and
        written beside the chains.

        Raises:
            ActionableError: the settings are invalid or a network does not load."""
        if not records:
            return {}
        settings = _one("scorer settings", {r.settings for r in records})
        length = _one("chain length", {r.length for r in records})
        task = records[0].task or "the task"
        try:
            resolved = self.resolve(json.loads(settings))
        except Exception as exc:
            raise from_exception(
                exc, f"the {self.name} scorer settings of {task} are not valid",
                "correct generation_kwargs.scorer or the LMMS_GENBENCH_* variable the message names",
            )
        try:
            boot = bootstrap_settings(self.task_settings(json.loads(settings)))
        except ValueError as exc:
            raise from_exception(exc, f"the {self.name} scorer settings of {task} are not valid",
                                 "correct generation_kwargs.scorer.bootstrap")
        key = (resolved, length, tuple(sorted(boot.items())), tuple(r.cache_key() for r in records))

        def compute() -> dict[str, Any]:
            try:
                report = self.score(records, resolved, length)
            except Exception as exc:
                raise network_failure(exc, self.name, resolved, task)
            verdicts = report.pop(VERDICTS, None)
            features = report.pop(FEATURES, None)
            if features is not None:
                from ...generators.common import log_info  # shown at lmms-eval's INFO too

                log_info(logger, "%s features: %d read from the store, %d computed; networks loaded: %s", self.name,
                         features["from_store"], features["computed"], ", ".join(features["networks_loaded"]) or "none")
            self.add_intervals(report, resolved, boot)
            self.write(records, report, resolved, verdicts, features)
            if not report.get("n_scored"):
                docs = len({(r.chain_id, r.folder) for r in records})
                where = Path(min(r.namespace for r in records)) / self.report_file
                no_score(task, docs, report.get("failure_reasons") or {}, where)
            return report

        return self._cache.get(key, compute)

    def add_intervals(self, report: dict[str, Any], resolved: Any, boot: Mapping[str, Any]) -> None:
        """``report["estimators"]`` and ``report["intervals"]``: a bootstrap interval of each
        metric the scorer has an estimator for (over ``report["doc_scores"]``), and an entry
        saying why for each metric that gets none."""
        table = (report.get("doc_scores") or {}).get("columns") or {}
        specs = {m: check_spec(spec) for m, spec in self.estimators(report, resolved).items()} if table else {}
        intervals = bootstrap_intervals(table, specs, boot["resamples"], boot["level"], boot["seed"]) if specs else {}
        for metric, reason in self.no_intervals(report, resolved).items():
            intervals[metric] = no_interval(reason)
        report["estimators"] = specs
        report["intervals"] = intervals
        report["bootstrap"] = dict(boot)

    def report_key(self, resolved: Any) -> str:
        """Short hash of the settings that decide a report's numbers (not device or batch size)."""
        return settings_key(resolved)

    def keyed_report_file(self, resolved: Any) -> str:
        """``report.json`` -> ``report-<key>.json``: this scorer's settings' own report."""
        stem, dot, suffix = self.report_file.rpartition(".")
        return f"{stem}-{self.report_key(resolved)}{dot}{suffix}"

    def failed_docs(
        self, records: Sequence[ChainRecord], verdicts: Mapping[tuple, str | None] | None = None
    ) -> list[dict[str, str]]:
        """Every chain that could not be scored, with its reason, by chain id. ``verdicts``:
        what scoring already found per chain (:meth:`prepare`); others are prepared here."""
        out: dict[tuple[str, str], dict[str, str]] = {}
        verdicts = verdicts or {}
        for rec in sorted(records, key=lambda r: (r.chain_id, r.folder)):
            key = verdict_key(rec, rec.length)
            if key in verdicts:
                reason = verdicts[key]
            else:
                prepared = self.prepare(rec, rec.length)
                reason = prepared if isinstance(prepared, str) else None
            if reason is not None:
                out.setdefault((rec.chain_id, rec.folder), {"chain_id": rec.chain_id, "reason": reason})
        return list(out.values())

    def write(self, records: Sequence[ChainRecord], report: Mapping[str, Any], resolved: Any = None,
              verdicts: Mapping[tuple, str | None] | None = None, features: Mapping[str, Any] | None = None) -> None:
        """Write the full report to each store namespace the records live in, as this
        scorer's keyed report and as the latest ``report_file``; an unwritable store
        only logs a warning (the scores are already computed). ``features``: what the
        scoring pass read from the store's feature cache and computed (:mod:`.stored`)."""
        failed = self.failed_docs(records, verdicts)
        tables = {k: report[k] for k in TABLE_KEYS if k in report}
        payload = {
            **self.payload({k: v for k, v in report.items() if k not in TABLE_KEYS}),
            **tables,
            "scorer": {"name": self.name, "settings": settings_dict(resolved), "key": self.report_key(resolved)},
            "failed_docs": failed[:MAX_FAILED_LISTED],
            "failed_docs_total": len(failed),
        }
        if features is not None:
            payload[FEATURES] = dict(features)
        budget = text_cut_summary((Path(r.namespace) / r.folder, r.hops) for r in records)
        if budget:  # the share of drawn descriptions each text encoder cut (store.verify)
            payload["text_budget"] = budget
        payload, nulls = json_nulls(payload)
        payload["null_reasons"] = {p: self.null_reason(p, report) for p in nulls}
        blob = strict_json(payload, indent=2, sort_keys=True, default=str).encode("utf-8")
        for namespace in sorted({r.namespace for r in records}):
            for name in (self.keyed_report_file(resolved), self.report_file):
                target = Path(namespace) / name
                try:
                    atomic_write(target, lambda fh: fh.write(blob))
                    logger.info("%s report written to %s", self.name, target)
                except OSError as exc:
                    logger.warning("could not write %s: %s", target, exc)


def _one(what: str, values: set) -> Any:
    if len(values) != 1:
        raise ValueError(
            f"the chains of one task must share one {what}; found {len(values)}: "
            f"{sorted(map(str, values))[:4]} (was the task changed between runs of one process?)"
        )
    return next(iter(values))
