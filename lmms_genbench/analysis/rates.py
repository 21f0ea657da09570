"""A run's own measured rates: seconds per described hop and per drawn hop.

The cycle model hands its engine figures to lmms-eval's throughput log (``log_metrics``),
which writes them into the results file's ``"throughput"`` as ``avg_<figure>``: the mean
over the model's ``generate_until`` calls. A rate is the ratio of two such means over the
same calls, which is the ratio of their sums. The store keeps the same figures per run in
each namespace's ``runs.jsonl`` (``"run"``). Both readers live here so that the HTML
report and ``benchmarks/cost.py`` read one definition.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.args import finite_or_none

__all__ = ["STAGE_FIGURES", "rates_from_figures", "rates_from_runs_jsonl", "rates_from_throughput"]

#: stage -> (seconds figure, items figure) of the engine's RunStats
STAGE_FIGURES = {"describe": ("describe_seconds", "describe_items"), "draw": ("generate_seconds", "generate_items")}


def rates_from_figures(figures: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """stage -> ``{"seconds_per_item", "items"}`` for each stage that computed something;
    ``items`` is the mean per call where ``figures`` are means."""
    rates = {}
    for stage, (seconds_key, items_key) in STAGE_FIGURES.items():
        seconds, items = finite_or_none(figures.get(seconds_key)), finite_or_none(figures.get(items_key))
        if seconds is not None and items:
            rates[stage] = {"seconds_per_item": seconds / items, "items": items}
    return rates


def rates_from_throughput(throughput: Any) -> dict[str, dict[str, float]]:
    """The rates in a results file's ``"throughput"`` (empty when the model logged none)."""
    if not isinstance(throughput, Mapping):
        return {}
    return rates_from_figures({name: throughput.get(f"avg_{name}") for pair in STAGE_FIGURES.values()
                               for name in pair})


def rates_from_runs_jsonl(path: str | Path) -> dict[str, dict[str, float]]:
    """The rates of the last run recorded in a namespace's ``runs.jsonl`` that computed a hop."""
    runs = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            run = entry.get("run") if isinstance(entry, Mapping) else None
            if isinstance(run, Mapping) and (run.get("describe_items") or run.get("generate_items")):
                runs.append(run)
    return rates_from_figures(runs[-1]) if runs else {}
