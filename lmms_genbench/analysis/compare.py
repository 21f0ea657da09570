"""Paired comparison of two runs of one task on the same docs.

Each headline score is an estimator over per-doc scores (the store report's
``doc_scores`` and ``estimators``), so the difference B - A is re-estimated on the same
bootstrap resamples of the docs for both runs: a paired bootstrap, whose interval is
narrower than two separate ones whenever the runs agree on which docs are hard.

Two runs are comparable only if they asked the same question: the same docs (chain
ids), the same protocol (chain length, direction, prompt) and the same scorer (the
report's settings key). Anything else is refused with what differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .results import finite_or_none
from .runs import Run, TaskRun

__all__ = ["Comparison", "CompareError", "MetricDiff", "compare_runs", "comparable_tasks"]

#: generation_kwargs keys that define the protocol (decoding settings may differ)
PROTOCOL_KEYS = ("iterations", "generations", "direction", "generate_prompt", "seed_field")
_SHOWN = 3  # doc ids named when the doc sets differ


class CompareError(ValueError):
    """Two runs that cannot be compared; the message says what differs."""


@dataclass(frozen=True)
class MetricDiff:
    """One headline score of A and B, and B - A with its paired interval."""

    metric: str
    a: float | None
    b: float | None
    diff: float | None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    n: int = 0
    higher_is_better: bool | None = None
    reason: str | None = None  # why there is no paired interval

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Comparison:
    task: str
    a: str
    b: str
    n_docs: int
    n_paired: int
    scorer: str
    metrics: list[MetricDiff] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**{k: v for k, v in self.__dict__.items() if k != "metrics"}, "metrics": [m.to_dict() for m in self.metrics]}


def comparable_tasks(a: Run, b: Run, task: str | None = None) -> list[str]:
    """The tasks both runs have (or ``task``, if both have it)."""
    common = [t for t in a.tasks if t in b.tasks]
    if task is not None:
        if task not in common:
            raise CompareError(
                f"task {task!r} is not in both runs (A has {sorted(a.tasks)}, B has {sorted(b.tasks)})"
            )
        return [task]
    if not common:
        raise CompareError(f"the runs share no task (A has {sorted(a.tasks)}, B has {sorted(b.tasks)})")
    return common


def _protocol(run: Run, task: TaskRun) -> dict[str, Any]:
    chains = list(task.chains.values())
    out: dict[str, Any] = {
        "length": sorted({c.length for c in chains}),
        "direction": sorted({c.direction for c in chains}),
    }
    config = _task_config(run, task.task)
    kwargs = config.get("generation_kwargs") if isinstance(config.get("generation_kwargs"), Mapping) else {}
    out.update({k: kwargs[k] for k in PROTOCOL_KEYS if k in kwargs})
    return out


def _task_config(run: Run, task: str) -> dict[str, Any]:
    import json

    try:
        configs = json.loads(run.path.read_text(encoding="utf-8")).get("configs") or {}
    except (OSError, ValueError):
        return {}
    config = configs.get(task)
    return config if isinstance(config, dict) else {}


def _check_same_question(a: Run, b: Run, ta: TaskRun, tb: TaskRun) -> None:
    task = ta.task
    for run, t in ((a, ta), (b, tb)):
        if not t.chains:
            raise CompareError(
                f"{task}: {run.path} has no per-doc chains; rerun it with --log_samples "
                f"(compare matches docs by id from the samples files)"
            )
    ids_a = {c.chain_id for c in ta.chains.values()}
    ids_b = {c.chain_id for c in tb.chains.values()}
    if ids_a != ids_b:
        only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
        raise CompareError(
            f"{task}: the runs did not use the same docs: A has {len(ids_a)}, B has {len(ids_b)}; "
            f"{len(only_a)} only in A {only_a[:_SHOWN]}, {len(only_b)} only in B {only_b[:_SHOWN]}"
        )
    pa, pb = _protocol(a, ta), _protocol(b, tb)
    differs = sorted(k for k in set(pa) | set(pb) if pa.get(k) != pb.get(k))
    if differs:
        shown = "; ".join(f"{k}: A={pa.get(k)!r} B={pb.get(k)!r}" for k in differs)
        raise CompareError(f"{task}: the runs used different protocols ({shown})")
    if not ta.reports or not tb.reports:
        missing = a.path if not ta.reports else b.path
        raise CompareError(
            f"{task}: no scorer report found in the store of {missing}'s chains "
            f"(moved or deleted artifacts?); compare needs the per-doc scores it holds"
        )
    keys_a = {n: r["scorer"].get("key") for n, r in ta.reports.items()}
    keys_b = {n: r["scorer"].get("key") for n, r in tb.reports.items()}
    if keys_a != keys_b:
        raise CompareError(
            f"{task}: the runs were scored differently (scorer settings keys A={keys_a}, B={keys_b}); "
            f"rescore one with the other's networks"
        )


def _aligned(report_a: Mapping[str, Any], report_b: Mapping[str, Any]) -> tuple[dict, dict, int]:
    """Both reports' per-doc columns restricted to the docs scored in both, in one order."""
    da, db = report_a.get("doc_scores") or {}, report_b.get("doc_scores") or {}
    ids_a, ids_b = list(da.get("chain_ids") or []), list(db.get("chain_ids") or [])
    common = sorted(set(ids_a) & set(ids_b))
    pos_a = {c: i for i, c in enumerate(ids_a)}
    pos_b = {c: i for i, c in enumerate(ids_b)}

    def pick(columns: Mapping[str, Sequence[Any]], pos: Mapping[str, int]) -> dict[str, list[Any]]:
        return {name: [values[pos[c]] for c in common] for name, values in columns.items()}

    return pick(da.get("columns") or {}, pos_a), pick(db.get("columns") or {}, pos_b), len(common)


def compare_runs(a: Run, b: Run, task: str, *, resamples: int = 1000, seed: int = 0, level: float = 0.95,
                 metrics: Sequence[str] | None = None) -> Comparison:
    """B - A for each headline score of ``task`` with a paired bootstrap interval and p-value.

    Raises:
        CompareError: the runs did not use the same docs, protocol or scorer."""
    from ..metrics.functional.intervals import paired_bootstrap

    ta, tb = a.tasks[task], b.tasks[task]
    _check_same_question(a, b, ta, tb)
    out = Comparison(task=task, a=a.label, b=b.label, n_docs=len(ta.chains), n_paired=0,
                     scorer=", ".join(f"{n} {r['scorer'].get('key')}" for n, r in sorted(ta.reports.items())))
    wanted = list(metrics) if metrics else [m for m in ta.scores if m in tb.scores]
    unknown = [m for m in wanted if m not in ta.scores or m not in tb.scores]
    if unknown:
        raise CompareError(f"{task}: no metric {unknown} in both runs (they have {sorted(set(ta.scores) & set(tb.scores))})")
    for metric in wanted:
        va, vb = ta.scores.get(metric), tb.scores.get(metric)
        diff = None if va is None or vb is None else vb - va
        hib = ta.higher_is_better.get(metric)
        ra, rb = ta.report_for(metric), tb.report_for(metric)
        if ra is None or rb is None:
            reason = _no_interval_reason(ta, metric)
            if metrics or reason:  # a count (n_scored ...) is listed only when asked for
                out.metrics.append(MetricDiff(metric, va, vb, diff, higher_is_better=hib, reason=reason or "no per-doc scores"))
            continue
        spec = ra["estimators"][metric]
        if rb["estimators"].get(metric) != spec:
            raise CompareError(f"{task}: {metric} is estimated differently in the two runs ({spec} vs {rb['estimators'].get(metric)})")
        cols_a, cols_b, n = _aligned(ra, rb)
        out.n_paired = max(out.n_paired, n)
        if n < 2:
            out.metrics.append(MetricDiff(metric, va, vb, diff, n=n, higher_is_better=hib,
                                          reason=f"{n} doc(s) scored in both runs"))
            continue
        # paired_bootstrap gives its first run minus its second: B - A
        paired = paired_bootstrap(cols_b, cols_a, spec, n_resamples=resamples, level=level, seed=seed)
        out.metrics.append(MetricDiff(
            metric, va, vb, _or(finite_or_none(paired.get("diff")), diff), finite_or_none(paired.get("low")), finite_or_none(paired.get("high")),
            finite_or_none(paired.get("p_value")), n, hib,
        ))
    if out.n_paired and out.n_paired < out.n_docs:
        out.notes.append(f"{out.n_docs - out.n_paired} of {out.n_docs} docs failed in one run or both and are left out of the paired intervals")
    return out


def _no_interval_reason(task: TaskRun, metric: str) -> str | None:
    found = task.interval(metric)
    if isinstance(found, Mapping) and found.get("reason"):
        return str(found["reason"])
    return None


def format_comparison(c: Comparison) -> str:
    """A plain-text table of one comparison."""
    lines = [
        f"{c.task}: B - A, paired over {c.n_paired} of {c.n_docs} docs (scorer {c.scorer})",
        f"  A = {c.a}",
        f"  B = {c.b}",
    ]
    rows = [("metric", "A", "B", "B - A", "95% interval", "p", "")]
    for m in c.metrics:
        interval = f"[{_num(m.low)}, {_num(m.high)}]" if m.low is not None else "-"
        better = ""
        if m.p_value is not None and m.p_value < 0.05 and m.diff and m.higher_is_better is not None:
            better = "B better" if (m.diff > 0) == m.higher_is_better else "A better"
        rows.append((m.metric, _num(m.a), _num(m.b), _num(m.diff, signed=True), interval,
                     _num(m.p_value) if m.p_value is not None else "-", better or (m.reason or "")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        lines.append("  " + "  ".join(v.ljust(w) for v, w in zip(row, widths)) + ("  " + row[-1] if row[-1] else ""))
    lines += [f"  note: {n}" for n in c.notes]
    return "\n".join(lines)


def _num(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _or(value: float | None, fallback: float | None) -> float | None:
    return fallback if value is None else value
