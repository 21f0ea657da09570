"""``lmms-genbench report``: one self-contained HTML page of one or more finished runs.

The page holds the headline table (one column per run, intervals where the store report
has them, else lmms-eval's stderr, else "—"), the S(t) / S_δ(g) curves and MGG heatmaps
(drawn by :mod:`lmms_genbench.plots`, embedded as PNG), the per-category / per-source /
per-tag tables, the failed docs with their reasons and a gallery of every chain
(:mod:`.gallery`). Everything is embedded: it opens from disk with no network. The page
is a Jinja2 template (``templates/report.html.j2``); its small inline script pages and
filters the gallery so that only the shown cards' thumbnails are decoded.
"""

from __future__ import annotations

import base64
import math
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.errors import printable
from ..core.keys import atomic_write
from .gallery import Thumbnails, build_cards, doc_order
from .rates import rates_from_throughput
from .runs import Run, RunError, TaskRun, load_run
from ..core.args import check_int

__all__ = ["ReportResult", "build_context", "fmt", "render", "write_report"]

TEMPLATE = "report.html.j2"
PAGE_SIZES = (10, 20, 50, 100)
# metrics that the headline table leaves to the curves, the breakdown tables and the counts
_DETAIL = re.compile(r"^(s(_.+)?|mgg_.+|geneval|fid)@\d+$|^n_|_n_min$|_n_excluded$|_n$")
_S_AT_T = re.compile(r"^s@(\d+)$")
_COUNT = re.compile(r"^n_|_n$|_n_min$|_n_excluded$")


@dataclass
class ReportResult:
    """What :func:`write_report` did."""

    path: Path | None = None
    bytes: int = 0
    runs: int = 0
    chains: int = 0
    images: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- numbers
def fmt(value: Any, metric: str = "") -> str:
    """A value for the page: "—" when absent or not finite, integers and the counts
    (``n_*``, ``*_n``: lmms-eval aggregates them to floats) as integers, other numbers
    with 4 decimals below 100 and 1 above, anything else as text."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and _COUNT.search(metric)):
        return str(int(value))  # a score of 1.0 stays 1.0000
    if isinstance(value, float):
        if not math.isfinite(value):
            return "—"
        return f"{value:.1f}" if abs(value) >= 100 else f"{value:.4f}"
    return str(value)


def _cell(task: TaskRun | None, metric: str) -> dict[str, Any] | None:
    """One run's headline cell: value, interval or stderr, and the interval's provenance."""
    if task is None or metric not in task.scores:
        return None
    cell: dict[str, Any] = {"value": fmt(task.scores[metric], metric), "interval": None, "note": None, "title": ""}
    found = task.interval(metric)
    if found and found.get("low") is not None and found.get("high") is not None:
        cell["interval"] = f"[{fmt(found['low'])}, {fmt(found['high'])}]"
        level = found.get("level")
        parts = [f"{level:.0%} interval" if isinstance(level, (int, float)) else "interval"]
        parts += [str(found[k]) if k == "method" else f"{k} {fmt(found[k], 'n_' if k == 'n' else '')}"
                  for k in ("method", "n", "stderr") if found.get(k) is not None]
        cell["title"] = ", ".join(parts)
    elif metric in task.stderr:
        cell["note"] = f"± {fmt(task.stderr[metric])}"
        cell["title"] = "lmms-eval's stderr; the store report has no interval for it"
    else:
        cell["note"] = "—"
        cell["title"] = (found or {}).get("reason") or "no interval or stderr in this run"
    return cell


# ----------------------------------------------------------------------------- tables
def _breakdowns(report: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """The report's per-group tables: a key whose value maps names to rows of scalars
    (GenCeption's ``categories``, MCD's ``sources``)."""
    out = {}
    for key, value in report.items():
        if key in ("scorer", "summary", "intervals", "estimators", "doc_scores") or not isinstance(value, Mapping):
            continue
        if value and all(isinstance(row, Mapping) for row in value.values()):
            out[key] = {str(name): dict(row) for name, row in value.items()}
    return out


#: titles of report tables whose key alone would not say what they show
TABLE_TITLES = {
    "text_budget": "text budget: per text encoder of the generator, the tokens it reads and, over the drawn "
                   "descriptions, the share it cut and the mean tokens cut",
}


def _mgg_tags(task: TaskRun) -> dict[str, dict[str, Any]]:
    """GenEval accuracy per tag and generation (``mgg_<tag>@<g>``) as a table by tag."""
    rows: dict[str, dict[str, Any]] = {}
    for metric, value in task.scores.items():
        match = re.match(r"^mgg_(.+)@(\d+)$", metric)
        if match:
            rows.setdefault(match.group(1), {})[f"@{match.group(2)}"] = value
    return {tag: dict(sorted(row.items(), key=lambda kv: int(kv[0][1:]))) for tag, row in rows.items()}


def _table(title: str, per_run: Sequence[Mapping[str, Mapping[str, Any]] | None], labels: Sequence[str]) -> dict[str, Any]:
    """Rows = group names (first-seen order), one row per run beside each other."""
    names: list[str] = []
    columns: list[str] = []
    for table in per_run:
        for name, row in (table or {}).items():
            names += [name] if name not in names else []
            columns += [c for c in row if c not in columns and not isinstance(row[c], (Mapping, list))]
    rows = []
    for name in names:
        for run, table in enumerate(per_run):
            if table and name in table:
                rows.append({"name": name, "run": run, "label": labels[run],
                             "cells": [fmt(table[name].get(c), c) for c in columns]})
    return {"title": title, "columns": columns, "rows": rows}


def _failed(task_runs: Sequence[TaskRun | None], labels: Sequence[str]) -> dict[str, Any]:
    """Every failed chain with its stage and reason, and every doc a scorer refused."""
    rows, totals = [], []
    for run, task in enumerate(task_runs):
        if task is None:
            totals.append(None)
            continue
        listed = set()
        for doc_id, chain in task.chains.items():
            if chain.failure is not None:
                listed.add(chain.chain_id)
                rows.append({"run": run, "label": labels[run], "chain_id": chain.chain_id, "doc_id": doc_id,
                             "stage": chain.failure.stage, "hop": chain.failure.hop,
                             "reason": printable(chain.failure.reason)})
        reported = 0
        for report in task.reports.values():
            reported += int(report.get("failed_docs_total") or 0)
            for item in report.get("failed_docs") or []:
                if isinstance(item, Mapping) and str(item.get("chain_id")) not in listed:
                    listed.add(str(item.get("chain_id")))
                    rows.append({"run": run, "label": labels[run], "chain_id": str(item.get("chain_id")),
                                 "doc_id": "", "stage": "scorer", "hop": "", "reason": printable(item.get("reason"))})
        totals.append({"n_failed": fmt(task.scores.get("n_failed"), "n_failed"), "listed": len(listed), "reported": reported})
    return {"rows": rows, "totals": totals}


# ----------------------------------------------------------------------------- figures
def _png(draw: Callable[[Path], Any]) -> str:
    """``draw(path)`` to a temporary PNG, returned as a data URI."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "figure.png"
        draw(out)
        return "data:image/png;base64," + base64.b64encode(out.read_bytes()).decode("ascii")


def _plotted(runs: Sequence[Run], labels: Sequence[str]) -> list[Any]:
    """What :mod:`lmms_genbench.plots` reads of each run (drift curves, MGG), under the
    report's labels."""
    from .plots import ResultsError, RunResults, load_results

    read = []
    for run, label in zip(runs, labels):
        try:
            found = load_results(run.path)
        except ResultsError:
            continue  # no drift or MGG values
        read += [RunResults(r.path, r.task, label, r.curves, r.mgg) for r in found]
    return read


def _figures(task: str, task_runs: Sequence[TaskRun | None], plotted: Sequence[Any],
             labels: Sequence[str]) -> list[dict[str, str]]:
    from .plots import draw_drift_curves, draw_mgg_heatmap, draw_similarity_curves

    figures = []
    series = [(labels[i], {int(m.group(1)): v for k, v in t.scores.items() if (m := _S_AT_T.match(k)) and v is not None})
              for i, t in enumerate(task_runs) if t is not None]
    if any(points for _, points in series):
        figures.append({"title": "S(t): similarity of the t-th image to the seed",
                        "uri": _png(lambda p: draw_similarity_curves(series, p))})
    read = [r for r in plotted if r.task == task]
    if any(r.curves for r in read):
        figures.append({"title": "S_δ(g): similarity to the chain's input per generation",
                        "uri": _png(lambda p: draw_drift_curves(read, p))})
    if any(r.mgg for r in read):
        figures.append({"title": "GenEval accuracy per tag and generation",
                        "uri": _png(lambda p: draw_mgg_heatmap(read, p))})
    return figures


def _measured(run: Run) -> str:
    """The run's own seconds per hop, as the cycle model logged them to lmms-eval."""
    found = rates_from_throughput(run.throughput)
    parts = [f"{stage} {fmt(rate['seconds_per_item'])} s/hop ({rate['items']:.4g} hops per call)"
             for stage, rate in found.items()]
    return " · ".join(parts) or "—"


# ----------------------------------------------------------------------------- the page
def _labels(runs: Sequence[Run], given: Sequence[str] | None) -> list[str]:
    labels = list(given) if given is not None else [run.label for run in runs]
    seen: dict[str, int] = {}
    out = []
    for label in labels:  # the columns must tell runs apart
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return out


def _headline(task_runs: Sequence[TaskRun | None]) -> list[str]:
    """The task's headline metrics, in results order: those with an interval or an
    estimator, and every other metric that is not a step, a group, or a count."""
    groups: set[str] = set()
    keyed: set[str] = set()
    metrics: list[str] = []
    for task in task_runs:
        if task is None:
            continue
        for report in task.reports.values():
            keyed |= set(report.get("intervals") or {}) | set(report.get("estimators") or {})
            for table in _breakdowns(report).values():
                groups |= set(table)
        metrics += [m for m in task.scores if m not in metrics]
    return [m for m in metrics if m in keyed or not (_DETAIL.search(m) or any(m.endswith(f"_{g}") for g in groups))]


def build_context(runs: Sequence[Run], labels: Sequence[str] | None = None, thumb_px: int = 128,
                  page_size: int = 20, title: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """Everything the template shows, and notes for the person running the command."""
    labels = _labels(runs, labels)
    notes: list[str] = []
    thumbs = Thumbnails(thumb_px)
    task_names: list[str] = []
    for run in runs:
        task_names += [t for t in run.tasks if t not in task_names]
    tasks, cards = [], []
    plotted = _plotted(runs, labels)
    for name in task_names:
        task_runs = [run.tasks.get(name) for run in runs]
        headline = _headline(task_runs)
        tables = []
        per_run = [{k: v for r in (t.reports.values() if t else ()) for k, v in _breakdowns(r).items()} for t in task_runs]
        for key in dict.fromkeys(k for tables_of_run in per_run for k in tables_of_run):
            tables.append(_table(TABLE_TITLES.get(key, key), [t.get(key) for t in per_run], labels))
        tags = [_mgg_tags(t) if t else None for t in task_runs]
        if any(tags):
            tables.append(_table("tags", tags, labels))
        for i, task in enumerate(task_runs):
            if task is None:
                continue
            if task.samples_file is None:
                notes.append(f"{runs[i].path}: no samples file for {name} (run lmms-eval with --log_samples "
                             "to see its chains and failed docs)")
            # the report with per-chain values, where a task has several scorers
            report = next((r for r in task.reports.values() if r.get("doc_scores")), next(iter(task.reports.values()), None))
            cards += build_cards(i, name, task.chains, report, headline, thumbs)
        tasks.append({
            "name": name,
            "headline": [{"metric": m, "higher": _higher(task_runs, m), "cells": [_cell(t, m) for t in task_runs]}
                         for m in headline],
            "all": [{"metric": m, "cells": [fmt(t.scores.get(m), m) if t and m in t.scores else "" for t in task_runs]}
                    for m in dict.fromkeys(m for t in task_runs if t for m in t.scores)],
            "counts": [None if t is None else {"scored": fmt(t.scores.get("n_scored"), "n_scored"),
                                               "failed": fmt(t.scores.get("n_failed"), "n_failed"),
                                               "chains": len(t.chains)} for t in task_runs],
            "tables": tables,
            "figures": _figures(name, task_runs, plotted, labels),
            "failed": _failed(task_runs, labels),
        })
    missing = sum(1 for c in cards for s in c.steps if s.missing)
    if missing:
        notes.append(f"{missing} stored hop file(s) could not be read; the gallery says which")
    order = {name: i for i, name in enumerate(task_names)}
    cards.sort(key=lambda c: (order[c.task], doc_order(c.doc_id), c.chain_id, c.run))
    context = {
        "title": title or "lmms-genbench report",
        "created": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": [{"label": labels[i], "path": str(run.path), "date": run.date, "model": run.model,
                  "tasks": list(run.tasks), "rates": _measured(run)} for i, run in enumerate(runs)],
        "tasks": tasks,
        "cards": cards,
        "groups": sorted({c.group for c in cards if c.group}),
        "has_scores": any(c.score is not None for c in cards),
        "thumbs": thumbs.uris,
        "page_size": page_size,
        "page_sizes": sorted({*PAGE_SIZES, page_size}),
        "n_images": sum(1 for c in cards for s in c.steps if s.thumb),
    }
    return context, notes


def _higher(task_runs: Sequence[TaskRun | None], metric: str) -> bool | None:
    return next((t.higher_is_better[metric] for t in task_runs if t and metric in t.higher_is_better), None)


def _shown(value: Any) -> Any:
    """Every string the page shows (file names, doc and chain ids, dataset fields, model output:
    issue 43) with control characters and bidi overrides as visible escapes (``\\x1b``,
    ``\\u202e``), then HTML-escaped by autoescape; markup the page itself built is kept."""
    if isinstance(value, str) and not hasattr(value, "__html__"):  # markup (tojson, |safe) has __html__
        return printable(value)
    return value


def render(context: Mapping[str, Any]) -> str:
    """The page's HTML from :func:`build_context`'s mapping."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("lmms_genbench.analysis", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        finalize=_shown,
    )
    env.filters["num"] = fmt
    return env.get_template(TEMPLATE).render(**context)


def write_report(paths: Sequence[str | Path], out: str | Path, labels: Sequence[str] | None = None,
                 thumb_px: int = 128, page_size: int = 20, title: str | None = None) -> ReportResult:
    """Read the runs, render the page and write it atomically to ``out``.

    Unreadable results files are listed in ``errors`` (each names the file) and the
    others are still shown; with none readable nothing is written.

    Raises:
        ValueError: ``labels`` is not one non-empty label per path, or ``thumb_px`` /
            ``page_size`` is not a positive integer.
    """
    if labels is not None and (len(labels) != len(paths) or not all(str(x).strip() for x in labels)):
        raise ValueError(f"got {len(labels)} label(s) for {len(paths)} results file(s); give one non-empty label per file")
    for name, value in (("thumb_px", thumb_px), ("page_size", page_size)):
        check_int(name, value, minimum=1, what="a positive integer")
    started = time.perf_counter()
    result = ReportResult()
    runs, kept = [], []
    for i, path in enumerate(paths):
        try:
            runs.append(load_run(path))
            kept.append(labels[i] if labels is not None else None)
        except RunError as exc:
            result.errors.append(str(exc))
    if not runs:
        return result
    context, result.notes = build_context(runs, None if labels is None else kept, thumb_px, page_size, title)
    blob = render(context).encode("utf-8")
    result.path = Path(out)
    atomic_write(result.path, lambda fh: fh.write(blob))  # the umask's permissions: a report is shared
    result.bytes, result.runs = len(blob), len(runs)
    result.chains, result.images = len(context["cards"]), context["n_images"]
    result.seconds = time.perf_counter() - started
    return result

