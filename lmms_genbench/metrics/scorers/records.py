"""What a scorer knows of one doc: its :class:`ChainRecord`, the :class:`MetricItem` lmms-eval
carries per metric, and the sorting of records into chains to score and counted failures.

A record is a few hundred bytes (ids, status, the store namespace, a few doc fields); texts
and images stay in the store. Each :class:`MetricItem` carries, once its scorer aggregated it,
the chain's own score, which :mod:`lmms_genbench.hooks.host_scores` hands to lmms-eval.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...store import ChainLocation, hop_kind

__all__ = ["ChainRecord", "MetricItem", "Triage", "doc_means", "host_key", "unique_records", "verdict_key"]


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
    (so one ``aggregate`` serves every metric) and the doc's record (shared, not copied).
    ``host`` is set by the scorer's ``aggregate`` from the report it just computed: the
    doc's score, its cluster and the headline metric they make up (None: not scored), which
    :mod:`lmms_genbench.hooks.host_scores` gives lmms-eval's samples."""

    __slots__ = ("metric", "record", "host")

    def __init__(self, metric: str, record: ChainRecord,
                 host: tuple[float, str | None, str] | None = None) -> None:
        self.metric = metric
        self.record = record
        self.host = host

    def __getstate__(self):  # __slots__ classes pickle (for multi-process gathers) this way
        return (self.metric, self.record, self.host)

    def __setstate__(self, state) -> None:
        self.metric, self.record, self.host = state

    def __str__(self) -> str:
        return str(self.record)

    def __repr__(self) -> str:
        return f"MetricItem({self.metric!r}, {self.record.chain_id!r}: {self.record.status})"


def host_key(record: ChainRecord) -> tuple:
    """What a host score is known by: its chain, length and scorer settings."""
    return (record.namespace, record.folder, record.length, record.settings)


def verdict_key(record: ChainRecord, length: int) -> tuple:
    """What a chain's verdict depends on: the record's place, status and hops, and the length
    (its doc fields do not decide whether it can be scored)."""
    return (record.namespace, record.folder, record.chain_id, record.status, record.reason,
            record.direction, record.hops, length)


def unique_records(records: Iterable[ChainRecord], key: Callable[[ChainRecord], Any]) -> list[ChainRecord]:
    """Records sorted by ``key``, a repeated key (rank padding repeats docs) kept once.

    A fixed order makes the float sums, hence the scores, identical however the
    records were sharded and gathered across processes."""
    out: dict[Any, ChainRecord] = {}
    for rec in sorted(records, key=key):
        out.setdefault(key(rec), rec)
    return list(out.values())


@dataclass
class Triage:
    """Records sorted into what scoring reads of each chain and why the others are refused.

    ``verdicts`` holds, in record order, each record with what ``prepare`` returned: what
    scoring reads, or the reason (a ``str``) it cannot be scored. ``failures`` counts the
    reasons by their head (the text before a ``:``), in the order they first occur."""

    verdicts: list[tuple[ChainRecord, Any]] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    length: int = 0  # the length the records were prepared for

    def reasons(self) -> dict[tuple, str | None]:
        """Per :func:`verdict_key`, why the chain cannot be scored (None: it was scored): what a
        scorer's ``score`` returns under ``report["verdicts"]`` for its ``failed_docs``."""
        return {verdict_key(rec, self.length): p if isinstance(p, str) else None for rec, p in self.verdicts}

    def add(self, record: ChainRecord, prepared: Any) -> None:
        self.verdicts.append((record, prepared))
        if isinstance(prepared, str):
            self.failures[prepared.split(":")[0]] += 1

    @property
    def ready(self) -> list[tuple[ChainRecord, Any]]:
        """``(record, prepared)`` of each chain that can be scored, in record order."""
        return [(rec, p) for rec, p in self.verdicts if not isinstance(p, str)]

    @property
    def refused(self) -> list[tuple[ChainRecord, str]]:
        """``(record, reason)`` of each chain that cannot be scored, in record order."""
        return [(rec, p) for rec, p in self.verdicts if isinstance(p, str)]


def doc_means(
    table: Mapping[str, Any], columns: Sequence[str], cluster: str
) -> dict[str, tuple[float, str | None]]:
    """Per chain id of a ``doc_scores`` table: the mean of its non-null values in ``columns``
    (those the table has) and its value in the ``cluster`` column; chains with no value left out."""
    cols = table.get("columns") or {}
    present = [cols[c] for c in columns if c in cols]
    ids = table.get("chain_ids") or []
    clusters, out = cols.get(cluster) or [None] * len(ids), {}
    for i, chain_id in enumerate(ids):
        values = [col[i] for col in present if col[i] is not None]
        if values:
            out[chain_id] = (sum(values) / len(values), clusters[i])
    return out
