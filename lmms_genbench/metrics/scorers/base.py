"""The one shape every scorer of stored chains takes.

A task's ``process_results`` turns each doc's answer (a :class:`~lmms_genbench.engine.Chain`)
into a small :class:`ChainRecord` and hands it to lmms-eval once per metric name, as a
:class:`MetricItem`; every metric of the task points at the same ``aggregate``, which
scores the chains once (memoised per set of chains and settings) and reads its metric
from the report. So a scorer subclass holds only its maths, its networks and the names
of what it reports:

* ``fields(doc, chain)``: the doc fields the scorer needs later (a category, a source);
* ``metric_names(length, settings)``: the names it reports for a chain length;
* ``score(records, settings, length)``: the report, a flat dict;
* ``payload(report)``: what goes to ``<namespace>/<report_file>`` beside the chains;
* ``prepare(record, length)``: what scoring reads of a chain, or why it cannot be scored
  (the report lists each refused doc with that reason);
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

The chain length comes from the chains (the task's ``iterations``/``generations``), never
from a constant here. One rule for every scorer: a chain with fewer generations than the
task asks is a counted failure with its reason; a chain with more is scored on its first
``length`` hops, which are identical by construction to a chain of that length.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import math
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ...engine.chain import Chain, NotAChainError, hop_kind
from ...core.errors import ActionableError, WrongModelError, from_exception
from ...core.keys import atomic_write, json_nulls, stable_hash, strict_json
from ...core.registry import lookup
from ...engine import held
from ...engine.store import ChainLocation
from ...engine.verify import text_cut_summary
from ..functional.intervals import bootstrap_intervals, check_spec, no_interval

__all__ = [
    "BOOTSTRAP_DEFAULTS",
    "ENV_BATCH",
    "ENV_DEVICE",
    "ENV_DTYPE",
    "MAX_FAILED_LISTED",
    "ChainRecord",
    "ChainScorer",
    "HOST_SCORES",
    "MetricItem",
    "ReportCache",
    "macro_mean",
    "bar_blocks",
    "host_key",
    "parallel_blocks",
    "prefetched_blocks",
    "scoring_workers",
    "resolve_device_and_batch",
    "resolve_dtype",
    "unit_rows",
    "with_stderr",
]

logger = logging.getLogger(__name__)

# Scoring settings shared by every scorer, overridable at run time.
ENV_DEVICE = "LMMS_GENBENCH_SCORER_DEVICE"
ENV_BATCH = "LMMS_GENBENCH_SCORER_BATCH"
ENV_DTYPE = "LMMS_GENBENCH_SCORER_DTYPE"
#: settings that change how fast a report is computed, not what it says: not in its key
OPERATIONAL_SETTINGS = ("device", "batch_size")
#: settings that do change the numbers but were added later: at these values they stay out
#: of the key, so reports written before them keep their names (a bfloat16 report gets its own)
KEY_DEFAULTS = {"dtype": "float32"}
#: failed chains listed by id in a report (all are counted in its failure_reasons)
MAX_FAILED_LISTED = 100
#: the intervals' bootstrap, unless the task's ``generation_kwargs.scorer.bootstrap`` says otherwise
BOOTSTRAP_DEFAULTS = {"resamples": 1000, "seed": 0, "level": 0.95}
#: report keys that go to the report file beside the payload, never into a metric
TABLE_KEYS = ("doc_scores", "estimators", "intervals", "bootstrap")
#: why a report value is null, unless the scorer knows better (``null_reason``)
NO_DATA = "not a number: no scored doc contributes to it"
#: each scored chain's own score, for lmms-eval's per-sample statistics (``--baseline``,
#: clustered standard errors; :mod:`lmms_genbench.host_scores` writes them into the logged
#: samples): :func:`host_key` -> (score, cluster or None, the headline metric it makes up)
HOST_SCORES: dict[tuple, tuple[float, str | None, str]] = {}


# --------------------------------------------------------------------------- records
@dataclass(frozen=True)
class ChainRecord:
    """One doc's chain as a scorer sees it: ids, status, where it lives, a few fields.

    Texts and images stay in the store (``path``); a record is a few hundred bytes.
    ``settings`` is the task's scorer settings as canonical JSON, so records compare
    and hash cheaply. ``str(record)`` is its status: lmms-eval writes values it cannot
    serialise with ``str()``, so ``--log_samples`` shows ``"ok"`` per metric, not the record.
    """

    chain_id: str
    status: str  # "ok" | "failed"
    reason: str | None
    namespace: str
    folder: str
    direction: str
    length: int  # hops the task asks for
    hops: int  # hops stored, gap-free from hop 0
    settings: str = "{}"
    fields: Mapping[str, Any] = field(default_factory=dict)
    task: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def generations(self) -> int:
        return max(self.hops - 1, 0)

    def kind(self, hop: int) -> str:
        return hop_kind(self.direction, hop)

    def path(self, hop: int) -> str:
        location = ChainLocation(Path(self.namespace) / self.folder)
        return str(location.path(hop, self.kind(hop)))

    def read_text(self, hop: int) -> str:
        with open(self.path(hop), encoding="utf-8") as fh:
            return fh.read()

    def cache_key(self) -> tuple:
        return (self.namespace, self.folder, self.status, self.hops, self.length)

    def __str__(self) -> str:
        return self.status


class MetricItem:
    """What ``process_results`` returns for one metric of one doc: the metric's name
    (so one ``aggregate`` serves every metric) and the doc's record (shared, not copied)."""

    __slots__ = ("metric", "record")

    def __init__(self, metric: str, record: ChainRecord) -> None:
        self.metric = metric
        self.record = record

    def __getstate__(self):  # __slots__ classes pickle (for multi-process gathers) this way
        return (self.metric, self.record)

    def __setstate__(self, state) -> None:
        self.metric, self.record = state

    def __str__(self) -> str:
        return str(self.record)

    def __repr__(self) -> str:
        return f"MetricItem({self.metric!r}, {self.record.chain_id!r}: {self.record.status})"


def host_key(record: ChainRecord) -> tuple:
    """What :data:`HOST_SCORES` knows a record by: its chain, length and scorer settings."""
    return (record.namespace, record.folder, record.length, record.settings)


# --------------------------------------------------------------------------- helpers
def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_device_and_batch(defaults: Mapping[str, Any]) -> tuple[str, int]:
    """``(device, batch_size)``: the environment, else the task's ``defaults``, else
    CUDA if available / 32."""
    device = os.environ.get(ENV_DEVICE) or defaults.get("device") or default_device()
    batch = os.environ.get(ENV_BATCH, defaults.get("batch_size", 32))
    try:
        batch = int(batch)
    except (TypeError, ValueError):
        raise ValueError(f"{ENV_BATCH} must be an integer, got {batch!r}") from None
    if batch < 1:
        raise ValueError(f"{ENV_BATCH} must be >= 1, got {batch}")
    return str(device), batch


def resolve_dtype(defaults: Mapping[str, Any]) -> str:
    """The scorer networks' weight dtype: the environment, else the task's, else float32
    (canonical name: ``bf16`` -> ``bfloat16``)."""
    from ..networks.common import check_dtype

    value = os.environ.get(ENV_DTYPE) or defaults.get("dtype") or "float32"
    return check_dtype(value, f"the scorer dtype (generation_kwargs.scorer.dtype or {ENV_DTYPE})")


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


def bootstrap_settings(scorer: Mapping[str, Any]) -> dict[str, Any]:
    """The intervals' bootstrap: :data:`BOOTSTRAP_DEFAULTS` overridden by the task's
    ``generation_kwargs.scorer.bootstrap`` mapping (``resamples`` (0: no intervals), ``seed``,
    ``level``)."""
    given = scorer.get("bootstrap") or {}
    if not isinstance(given, Mapping) or set(given) - set(BOOTSTRAP_DEFAULTS):
        raise ValueError(
            f"generation_kwargs.scorer.bootstrap must be a mapping with keys among "
            f"{sorted(BOOTSTRAP_DEFAULTS)}, got {given!r}"
        )
    out = {**BOOTSTRAP_DEFAULTS, **given}
    for key in ("resamples", "seed"):
        if isinstance(out[key], bool) or not isinstance(out[key], int) or out[key] < 0:
            raise ValueError(f"generation_kwargs.scorer.bootstrap.{key} must be an integer >= 0, got {out[key]!r}")
    if isinstance(out["level"], bool) or not isinstance(out["level"], (int, float)) or not 0 < out["level"] < 1:
        raise ValueError(f"generation_kwargs.scorer.bootstrap.level must lie between 0 and 1, got {out['level']!r}")
    return out


def unit_rows(embeddings: Any) -> np.ndarray:
    """Embeddings (torch tensor or array, ... x D) as float64 rows of unit L2 norm.

    Norms are clipped at 1e-12 so an all-zero row gives similarity 0 instead of NaN.
    """
    if hasattr(embeddings, "detach"):  # torch.Tensor, without importing torch
        embeddings = embeddings.detach().float().cpu().numpy()
    emb = np.asarray(embeddings, dtype=np.float64).copy()
    emb /= np.clip(np.linalg.norm(emb, axis=-1, keepdims=True), 1e-12, None)
    return emb


def load_rgb(path: str):
    """A stored image as RGB; one the engine drew in this process comes from memory, not
    decoded again (:mod:`lmms_genbench.engine.held`: verified by the file's sha256)."""
    return held.load_rgb(path)


def prefetched_blocks(
    docs: Sequence[Any], block: int, paths: Callable[[Any], Sequence[str]]
) -> Iterator[tuple[Sequence[Any], list[Any]]]:
    """Yield ``(docs, images)`` blocks of ``block`` docs, the images of each doc (from
    ``paths(doc)``) concatenated in doc order. The next block is decoded in worker
    threads (PIL releases the GIL) while the caller encodes the current one."""
    from concurrent.futures import ThreadPoolExecutor

    starts = range(0, len(docs), block)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="genbench-load") as pool:

        def submit(start):
            chunk = docs[start : start + block]
            return chunk, [pool.submit(load_rgb, p) for rec in chunk for p in paths(rec)]

        pending = submit(starts[0]) if starts else None
        for i in range(len(starts)):
            chunk, futures = pending
            pending = submit(starts[i + 1]) if i + 1 < len(starts) else None
            yield chunk, [f.result() for f in futures]


def bar_blocks(bar: Any, blocks: Iterable[tuple[Sequence[Any], Any]]) -> Iterator[tuple[Sequence[Any], Any]]:
    """``blocks`` unchanged, advancing the progress ``bar`` by each block's docs once it is done."""
    for chunk, payload in blocks:
        yield chunk, payload
        bar.update(len(chunk))


def scoring_workers(device: str) -> int:
    """Threads a scorer runs over blocks: on a CPU every core the torch thread pool leaves
    over (the smoke networks run on one torch thread each, so each core takes a block; with
    torch's default of one thread per core this is 1, and each forward pass uses all of
    them); on a GPU 2, so one block is decoded and preprocessed while another runs."""
    if not str(device).startswith("cpu"):
        return 2
    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, torch.get_num_threads()))


def parallel_blocks(
    docs: Sequence[Any],
    block: int,
    paths: Callable[[Any], Sequence[str]],
    work: Callable[[Sequence[Any], list[Any]], Any],
    workers: int,
) -> Iterator[tuple[Sequence[Any], Any]]:
    """Yield ``(docs, work(docs, images))`` for blocks of ``block`` docs, in order.

    With one worker this is :func:`prefetched_blocks` with ``work`` applied. With more,
    each block is decoded and worked on by one of ``workers`` threads, at most two blocks
    per thread in flight; the blocks are the same as with one worker, so ``work`` sees the
    same batches (and a network returns the same numbers for them)."""
    if workers <= 1:
        for chunk, images in prefetched_blocks(docs, block, paths):
            yield chunk, work(chunk, images)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    def task(start: int) -> tuple[Sequence[Any], Any]:
        chunk = docs[start : start + block]
        return chunk, work(chunk, [load_rgb(p) for rec in chunk for p in paths(rec)])

    starts = iter(range(0, len(docs), block))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="genbench-score") as pool:
        pending = deque(pool.submit(task, start) for _, start in zip(range(2 * workers), starts))
        while pending:
            done = pending.popleft().result()
            start = next(starts, None)
            if start is not None:
                pending.append(pool.submit(task, start))
            yield done


class ReportCache:
    """LRU memo of reports. lmms-eval calls the aggregation once per metric on the same
    items; the chains are scored once and every metric reads the same report.

    The lock is held while a report is computed, so concurrent calls for the same
    key wait for it instead of scoring twice.
    """

    def __init__(self, size: int = 4) -> None:
        self._lock = threading.Lock()
        self._reports: OrderedDict[Hashable, dict[str, Any]] = OrderedDict()
        self._size = size

    def get(self, key: Hashable, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        with self._lock:
            if key in self._reports:
                self._reports.move_to_end(key)
                return self._reports[key]
            report = compute()
            self._reports[key] = report
            while len(self._reports) > self._size:
                self._reports.popitem(last=False)
            return report

    def clear(self) -> None:
        with self._lock:
            self._reports.clear()


def unique_records(records: Iterable[ChainRecord], key: Callable[[ChainRecord], Any]) -> list[ChainRecord]:
    """Records sorted by ``key``, a repeated key (rank padding repeats docs) kept once.

    A fixed order makes the float sums, hence the scores, identical however the
    records were sharded and gathered across processes."""
    out: dict[Any, ChainRecord] = {}
    for rec in sorted(records, key=key):
        out.setdefault(key(rec), rec)
    return list(out.values())


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

    def remember_host_scores(self, records: Sequence[ChainRecord], report: Mapping[str, Any]) -> None:
        """Put each scored record's :meth:`host_scores` entry into :data:`HOST_SCORES`."""
        metric, scores = self.host_scores(report)
        for rec in records:
            if rec.chain_id in scores:
                score, cluster = scores[rec.chain_id]
                HOST_SCORES[host_key(rec)] = (float(score), cluster, metric)

    def prepare(self, record: ChainRecord, length: int) -> Any:
        """What scoring reads of the chain, or why it cannot be scored (a ``str``)."""
        return record if record.ok else record.reason or "failed"

    def unscored(self, record: ChainRecord, length: int) -> str | None:
        """Why ``record``'s chain cannot be scored, or None (the report lists these per doc)."""
        prepared = self.prepare(record, length)
        return prepared if isinstance(prepared, str) else None

    def prepared(self, record: ChainRecord, length: int) -> Any:
        """``prepare(record, length)`` as ``score`` calls it: while a report is computed the
        verdict is kept, so the report's ``failed_docs`` reuses it instead of preparing (and
        reading the texts of) every chain a second time."""
        result = self.prepare(record, length)
        verdicts = getattr(_VERDICTS, "current", None)
        if verdicts is not None:
            verdicts[_verdict_key(record, length)] = result if isinstance(result, str) else None
        return result

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
        report = self.report([item.record for item in items])
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
            _VERDICTS.current = verdicts = {}
            try:
                report = self.score(records, resolved, length)
            except Exception as exc:
                raise self._scoring_failure(exc, resolved, task)
            finally:
                _VERDICTS.current = None
            self.add_intervals(report, resolved, boot)
            self.write(records, report, resolved, verdicts)
            if not report.get("n_scored"):
                docs = len({(r.chain_id, r.folder) for r in records})
                where = Path(min(r.namespace for r in records)) / self.report_file
                _no_score(task, docs, report.get("failure_reasons") or {}, where)
            return report

        report = self._cache.get(key, compute)
        self.remember_host_scores(records, report)  # also on a cache hit: the last report read wins
        return report

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

    def _scoring_failure(self, exc: Exception, resolved: Any, task: str) -> ActionableError:
        """One line naming the setting (and the variable that set it) whose network failed."""
        values = _settings_dict(resolved)
        text = str(exc)
        culprit = next(
            ((k, v) for k, v in values.items()
             if k not in OPERATIONAL_SETTINGS and isinstance(v, str) and len(v) > 2 and v in text),
            None,
        )
        offline = "or score offline with the smoke networks (--model_args preset=smoke, or generation_kwargs.scorer: {preset: smoke})"
        if culprit is None:
            return from_exception(
                exc, f"the {self.name} scorer of {task} failed",
                f"check generation_kwargs.scorer and the LMMS_GENBENCH_* variables, {offline}",
            )
        name, value = culprit
        env = sorted(k for k, v in os.environ.items() if k.startswith("LMMS_GENBENCH_") and v == value)
        where = f"{env[0]}={value}" if env else f"generation_kwargs.scorer {name}={value}"
        return from_exception(
            exc, f"the {self.name} scorer of {task} could not load its {name} network {value!r} (set by {where})",
            f"point {env[0] if env else f'generation_kwargs.scorer.{name}'} at a network that loads here "
            f"(a local folder, or a hub id whose weights are downloaded){', or unset it' if env else ''}, {offline}",
        )

    def report_key(self, resolved: Any) -> str:
        """Short hash of the settings that decide a report's numbers (not device or batch size)."""
        shown = {
            k: v for k, v in _settings_dict(resolved).items()
            if k not in OPERATIONAL_SETTINGS and not (k in KEY_DEFAULTS and v == KEY_DEFAULTS[k])
        }
        return stable_hash(shown, 8, ensure_ascii=True)

    def keyed_report_file(self, resolved: Any) -> str:
        """``report.json`` -> ``report-<key>.json``: this scorer's settings' own report."""
        stem, dot, suffix = self.report_file.rpartition(".")
        return f"{stem}-{self.report_key(resolved)}{dot}{suffix}"

    def failed_docs(
        self, records: Sequence[ChainRecord], verdicts: Mapping[tuple, str | None] | None = None
    ) -> list[dict[str, str]]:
        """Every chain that could not be scored, with its reason, by chain id. ``verdicts``:
        what scoring already found per chain (:meth:`prepared`); others are prepared here."""
        out: dict[tuple[str, str], dict[str, str]] = {}
        verdicts = verdicts or {}
        for rec in sorted(records, key=lambda r: (r.chain_id, r.folder)):
            key = _verdict_key(rec, rec.length)
            reason = verdicts[key] if key in verdicts else self.unscored(rec, rec.length)
            if reason is not None:
                out.setdefault((rec.chain_id, rec.folder), {"chain_id": rec.chain_id, "reason": reason})
        return list(out.values())

    def write(self, records: Sequence[ChainRecord], report: Mapping[str, Any], resolved: Any = None,
              verdicts: Mapping[tuple, str | None] | None = None) -> None:
        """Write the full report to each store namespace the records live in, as this
        scorer's keyed report and as the latest ``report_file``; an unwritable store
        only logs a warning (the scores are already computed)."""
        failed = self.failed_docs(records, verdicts)
        tables = {k: report[k] for k in TABLE_KEYS if k in report}
        payload = {
            **self.payload({k: v for k, v in report.items() if k not in TABLE_KEYS}),
            **tables,
            "scorer": {"name": self.name, "settings": _settings_dict(resolved), "key": self.report_key(resolved)},
            "failed_docs": failed[:MAX_FAILED_LISTED],
            "failed_docs_total": len(failed),
        }
        budget = text_cut_summary((Path(r.namespace) / r.folder, r.hops) for r in records)
        if budget:  # the share of drawn descriptions each text encoder cut (engine.verify)
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


#: the verdicts of :meth:`ChainScorer.prepared` while this thread computes a report
_VERDICTS = threading.local()


def _verdict_key(record: ChainRecord, length: int) -> tuple:
    """What a chain's verdict depends on: the record's place, status and hops, and the length
    (its doc fields do not decide whether it can be scored)."""
    return (record.namespace, record.folder, record.chain_id, record.status, record.reason,
            record.direction, record.hops, length)


def _settings_dict(resolved: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(resolved) and not isinstance(resolved, type):
        return dataclasses.asdict(resolved)
    return dict(resolved) if isinstance(resolved, Mapping) else {}


#: tasks that produced no score in this process, repeated as the last lines at exit
_NO_SCORE: list[str] = []
_NO_SCORE_LOCK = threading.Lock()


def _no_score(task: str, docs: int, reasons: Mapping[str, Any], report: Path) -> None:
    shown = "; ".join(f"{reason} ({n})" for reason, n in list(reasons.items())[:3]) or "no chain was scorable"
    line = f"lmms-genbench: {task} produced no score: 0 of {docs} docs scored ({shown}); each failed doc is in {report}"
    logger.warning(line)
    with _NO_SCORE_LOCK:
        if not _NO_SCORE:
            # lmms-eval prints its table after the aggregation: say it again last
            atexit.register(_print_no_score)
        if line not in _NO_SCORE:
            _NO_SCORE.append(line)


def _print_no_score() -> None:
    for line in _NO_SCORE:
        print(line, file=sys.stderr)


def _one(what: str, values: set) -> Any:
    if len(values) != 1:
        raise ValueError(
            f"the chains of one task must share one {what}; found {len(values)}: "
            f"{sorted(map(str, values))[:4]} (was the task changed between runs of one process?)"
        )
    return next(iter(values))
