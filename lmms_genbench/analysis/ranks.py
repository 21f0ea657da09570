"""Rank stability: do describers keep their order under another generator or scorer?

GenCeption's Table 4 checked by hand whether the ranking of describers survives a
change of the image generator. Here each run of a cycle task is placed by the store
namespace of its chains (``<artifacts>/<describer>/<generator>/<task>``): the describer
is what is ranked, and the *condition* is the generator together with the scorer's
settings key. Each condition ranks its describers by the metric, and Kendall's τ-b
compares every two conditions over the describers both ranked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from .runs import Run

__all__ = ["Ranking", "RanksError", "RankStability", "rank_runs"]


class RanksError(ValueError):
    """Runs that cannot be ranked against each other; the message says why."""


@dataclass
class Ranking:
    condition: str
    order: list[tuple[str, float]]  # (describer, score), best first


@dataclass
class RankStability:
    task: str
    metric: str
    higher_is_better: bool
    rankings: list[Ranking]
    taus: list[dict[str, Any]] = field(default_factory=list)  # {a, b, tau, n}

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task, "metric": self.metric, "higher_is_better": self.higher_is_better,
            "rankings": [{"condition": r.condition, "order": [{"describer": d, "score": s} for d, s in r.order]}
                         for r in self.rankings],
            "kendall_tau": self.taus,
        }


def _placement(run: Run, task: str) -> tuple[str, str]:
    """(describer, condition) of a run's task, from its chains' store namespace."""
    t = run.tasks[task]
    namespaces = sorted({c.namespace for c in t.chains.values()})
    if not namespaces:
        raise RanksError(f"{run.path}: {task} has no per-doc chains; rerun it with --log_samples")
    parts = Path(namespaces[0]).parts
    if len(parts) < 3:
        raise RanksError(f"{run.path}: {task}'s store namespace {namespaces[0]!r} does not name a describer and a generator")
    describer, generator = parts[-3], parts[-2]
    scorer = ",".join(f"{n}:{r['scorer'].get('key')}" for n, r in sorted(t.reports.items())) or "unscored"
    return describer, f"generator {generator} | scorer {scorer}"


def rank_runs(runs: Sequence[Run], task: str, metric: str) -> RankStability:
    """Each condition's ranking of describers by ``metric`` and Kendall's τ between conditions.

    Raises:
        RanksError: a run lacks the task or metric, one describer appears twice under one
            condition, or fewer than two conditions or describers are given."""
    from ..metrics.functional.intervals import kendall_tau

    table: dict[str, dict[str, float]] = {}
    hib: bool | None = None
    for run in runs:
        if task not in run.tasks:
            raise RanksError(f"{run.path}: no task {task!r} (it has {sorted(run.tasks)})")
        t = run.tasks[task]
        value = t.scores.get(metric)
        if value is None:
            raise RanksError(f"{run.path}: {task} has no finite {metric!r} (it has {sorted(k for k, v in t.scores.items() if v is not None)})")
        hib = t.higher_is_better.get(metric, True) if hib is None else hib
        describer, condition = _placement(run, task)
        row = table.setdefault(condition, {})
        if describer in row:
            raise RanksError(f"{run.path}: describer {describer} appears twice under {condition}; give one run of each")
        row[describer] = value
    if len(table) < 2:
        raise RanksError(
            f"all {len(runs)} runs share one condition ({next(iter(table), '-')}); ranks needs runs of the same "
            f"describers under two or more generators or scorers"
        )
    sign = -1.0 if hib else 1.0
    rankings = [Ranking(c, sorted(row.items(), key=lambda kv: (sign * kv[1], kv[0]))) for c, row in table.items()]
    out = RankStability(task, metric, bool(hib), rankings)
    for (ca, ra), (cb, rb) in combinations(table.items(), 2):
        common = sorted(set(ra) & set(rb))
        tau = kendall_tau([ra[d] for d in common], [rb[d] for d in common]) if len(common) >= 2 else None
        out.taus.append({"a": ca, "b": cb, "n": len(common), "tau": tau})
    if all(x["n"] < 2 for x in out.taus):
        raise RanksError("no two conditions share two describers; Kendall's τ needs at least two in common")
    return out


def format_ranks(r: RankStability) -> str:
    arrow = "higher is better" if r.higher_is_better else "lower is better"
    lines = [f"{r.task}: describers ranked by {r.metric} ({arrow})"]
    for ranking in r.rankings:
        lines.append(f"  {ranking.condition}")
        lines += [f"    {i}. {d}  {s:.4f}" for i, (d, s) in enumerate(ranking.order, start=1)]
    lines.append("  Kendall's tau-b between conditions:")
    for x in r.taus:
        tau = "n/a (fewer than 2 describers in common)" if x["tau"] is None else f"{x['tau']:+.3f} over {x['n']} describers"
        lines.append(f"    {x['a']}  vs  {x['b']}: {tau}")
    return "\n".join(lines)
