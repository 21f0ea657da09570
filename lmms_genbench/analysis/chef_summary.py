"""ChEF summary: lmms-eval results of the ``chef_*`` tasks -> 0–100 desideratum scores and figures.

    lmms-genbench chef summary RESULTS.json [RESULTS.json ...] [--label NAME ...] --out DIR

Each results file belongs to one model; files with the same label (by default
the model and its model_args, :func:`lmms_genbench.plots.label_from_config`)
are merged, so the six desiderata may come from separate runs. Per desideratum
the raw metric is averaged over the scenarios (tasks) present and mapped to
0–100 by :func:`lmms_genbench.metrics.functional.chef.desideratum_score`:

==========================  ================  =========================
desideratum                 tasks             raw metric
==========================  ================  =========================
calibration                 chef_calibration_*  ece (ChEF's equal-mass)
in_context_learning         chef_icl_*          riam
instruction_following       chef_insfollow_*    match_ratio
language_performance        chef_language_*     judge_score (0–10)
robustness                  chef_robustness_*   rrm
hallucination               chef_hallucination_*  pope_accuracy
==========================  ================  =========================

A task whose raw metric is not a number (e.g. ``judge_score`` is NaN when no
judge verdict parsed) is left out of its desideratum's mean, never dropped
silently: ``chef_summary.json`` lists it under ``left_out`` with its counts, the
command prints a note, and a desideratum left with no score keeps its axis in
the figure (drawn at the centre, labelled "no score").

Each score's standard error (``stderr`` in the summary) comes from the tasks' own
``<metric>_stderr`` (a bootstrap over docs, :mod:`lmms_genbench.chef.results`), combined by
:func:`~lmms_genbench.metrics.functional.chef.desideratum_stderr`; a desideratum with a task
that has none gets none.

Writes ``chef_summary.json``, ``chef_desiderata.png`` (radar with three or more
desiderata, else bars; one polygon or bar group per model) and, when
calibration bins are present, ``chef_reliability.png`` (one panel per model).
matplotlib draws on its Agg canvas directly; no global state changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_genbench.analysis.results import (
    ResultsError,
    finite_or_none,
    label_from_config,
    read_results,
    task_metrics,
)
from lmms_genbench.core.keys import json_nulls, strict_json
from lmms_genbench.metrics.functional.chef import (
    DESIDERATA,
    desideratum_score,
    desideratum_stderr,
)

SOURCES = {
    "calibration": ("chef_calibration_", "ece"),
    "in_context_learning": ("chef_icl_", "riam"),
    "instruction_following": ("chef_insfollow_", "match_ratio"),
    "language_performance": ("chef_language_", "judge_score"),
    "robustness": ("chef_robustness_", "rrm"),
    "hallucination": ("chef_hallucination_", "pope_accuracy"),
}
SHORT = {"calibration": "Calibration", "in_context_learning": "ICL", "instruction_following": "Ins. follow.",
         "language_performance": "Lang. perf.", "robustness": "Robustness", "hallucination": "Hallucination"}
SUMMARY_FILENAME = "chef_summary.json"
FIGURE_FILENAME = "chef_desiderata.png"
RELIABILITY_FILENAME = "chef_reliability.png"


class SummaryError(ResultsError):
    """A results file cannot be used."""


@dataclass
class ModelSummary:
    label: str
    raw: dict[str, float] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    #: desideratum -> standard error of its score, when every task in it has a ``<metric>_stderr``
    stderr: dict[str, float] = field(default_factory=dict)
    tasks: dict[str, list[str]] = field(default_factory=dict)
    reliability: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    #: desideratum -> "<task>: <metric> is <value> (<counts>)" per task left out of its mean
    left_out: dict[str, list[str]] = field(default_factory=dict)

    def notes(self) -> list[str]:
        """One line per task left out, saying whether its desideratum still has a score."""
        return [
            f"{self.label}: {des} {'has no score' if des not in self.scores else 'leaves out'}: {why}"
            for des, whys in self.left_out.items() for why in whys
        ]


def _left_out(task: str, metric: str, flat: dict[str, Any]) -> str:
    counts = ", ".join(f"{k}={flat[k]:g}" for k in sorted(flat) if k.startswith("n_") and finite_or_none(flat[k]) is not None)
    return f"{task}: {metric} is {flat.get(metric, 'missing')}" + (f" ({counts})" if counts else "")


def _read(path: Path) -> dict[str, Any]:
    try:
        data = read_results(path)
    except ResultsError as exc:
        raise SummaryError(str(exc)) from None
    if not any(t.startswith("chef_") for t in data["results"]):
        raise SummaryError(f"{path}: no chef_* task in this results file")
    return data


def summarize(paths: Sequence[str | Path], labels: Sequence[str] | None = None) -> tuple[list[ModelSummary], list[str]]:
    """Scores per model label; returns (summaries in first-seen order, error messages)."""
    errors: list[str] = []
    values: dict[str, dict[str, list[tuple[str, float]]]] = {}
    errs: dict[str, dict[str, list[float | None]]] = {}
    left_out: dict[str, dict[str, list[str]]] = {}
    reliab: dict[str, dict[str, list[dict[str, float]]]] = {}
    for i, path in enumerate(paths):
        path = Path(path)
        try:
            data = _read(path)
        except SummaryError as exc:
            errors.append(str(exc))
            continue
        label = labels[i] if labels else label_from_config(data.get("config"), path.stem)
        per = values.setdefault(label, {d: [] for d in DESIDERATA})
        per_err = errs.setdefault(label, {d: [] for d in DESIDERATA})
        for task, metrics in data["results"].items():
            flat = task_metrics(metrics)
            for des, (prefix, metric) in SOURCES.items():
                if not task.startswith(prefix):
                    continue
                if (v := finite_or_none(flat.get(metric))) is not None:
                    per[des].append((task, v))
                    per_err[des].append(finite_or_none(flat.get(f"{metric}_stderr")))
                else:
                    left_out.setdefault(label, {}).setdefault(des, []).append(_left_out(task, metric, flat))
            if task.startswith("chef_calibration_") and "bin0_n" in flat:
                reliab.setdefault(label, {})[task] = [
                    {k: finite_or_none(flat.get(f"bin{b}_{k}")) for k in ("acc", "conf", "n")} for b in range(10)
                ]
    out = []
    for label, per in values.items():
        s = ModelSummary(label, reliability=reliab.get(label, {}), left_out=left_out.get(label, {}))
        for des in DESIDERATA:
            if per[des]:
                raw = sum(v for _, v in per[des]) / len(per[des])
                s.raw[des] = raw
                s.scores[des] = desideratum_score(des, raw)
                s.tasks[des] = [t for t, _ in per[des]]
                if all(e is not None for e in errs[label][des]):
                    s.stderr[des] = desideratum_stderr(des, errs[label][des])
        out.append(s)
    return out, errors


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def draw_desiderata(summaries: Sequence[ModelSummary], out_file: Path) -> Path:
    """Radar (three or more desiderata with scores) or grouped bars, one series per model."""
    import numpy as np

    if not any(s.scores for s in summaries):
        raise SummaryError("no desideratum has a finite score in these results")
    # a desideratum whose tasks ran but gave no number keeps its axis (at the centre)
    axes_names = [d for d in DESIDERATA if any(d in s.scores or d in s.left_out for s in summaries)]
    unscored = {d for d in axes_names if not any(d in s.scores for s in summaries)}
    ticks = [SHORT[d] + ("\n(no score)" if d in unscored else "") for d in axes_names]
    fig = _figure(7, 6)
    if len(axes_names) >= 3:
        ax = fig.add_subplot(projection="polar")
        angles = np.linspace(0, 2 * np.pi, len(axes_names), endpoint=False)
        for s in summaries:
            vals = [s.scores.get(d, math.nan) for d in axes_names]
            vals = [0.0 if math.isnan(v) else v for v in vals]  # missing drawn at the centre
            ax.plot([*angles, angles[0]], [*vals, vals[0]], marker="o", label=s.label)
            ax.fill([*angles, angles[0]], [*vals, vals[0]], alpha=0.1)
        ax.set_xticks(angles, ticks)
        ax.set_ylim(0, 100)
    else:
        ax = fig.add_subplot()
        width = 0.8 / max(1, len(summaries))
        x = np.arange(len(axes_names))
        for i, s in enumerate(summaries):
            ax.bar(x + i * width, [s.scores.get(d, math.nan) for d in axes_names], width, label=s.label)
        ax.set_xticks(x + width * (len(summaries) - 1) / 2, ticks)
        ax.set_ylim(0, 100)
        ax.set_ylabel("score (0–100)")
    ax.set_title("ChEF desiderata (0–100)")
    ax.legend(loc="upper right", bbox_to_anchor=(1.1, 1.12), fontsize=8)
    fig.savefig(out_file)
    return out_file


def draw_reliability(summaries: Sequence[ModelSummary], out_file: Path) -> Path | None:
    """Reliability diagram per model (first calibration task of each): each of the ECE's ten
    equal-mass bins at its mean confidence, its accuracy against the diagonal."""
    panels = [(s.label, task, bins) for s in summaries for task, bins in list(s.reliability.items())[:1]]
    if not panels:
        return None
    fig = _figure(4 * len(panels), 4)
    for i, (label, task, bins) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        used = [row for row in bins if row["acc"] is not None and row["conf"] is not None]
        ax.plot([row["conf"] for row in used], [row["acc"] for row in used], marker="o", label="accuracy per bin")
        ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{label}\n{task}", fontsize=8)
        ax.legend(fontsize=7)
    fig.savefig(out_file)
    return out_file


def write_summary(paths, out_dir, labels=None) -> tuple[list[Path], list[str], list[str]]:
    """Everything the command does; returns (written files, errors, notes on tasks left out)."""
    summaries, errors = summarize(paths, labels)
    if not summaries:
        return [], errors or ["no usable results file"], []
    notes = [note for s in summaries for note in s.notes()]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    payload = {s.label: {"scores": s.scores, "stderr": s.stderr, "raw": s.raw, "tasks": s.tasks,
                         "left_out": s.left_out} for s in summaries}
    payload, _ = json_nulls(payload)  # plain JSON for every reader; left_out says why
    summary_file = out / SUMMARY_FILENAME
    summary_file.write_text(strict_json(payload, indent=2), encoding="utf-8")
    written = [summary_file]
    try:
        written.append(draw_desiderata(summaries, out / FIGURE_FILENAME))
    except SummaryError as exc:
        errors.append(str(exc))
    rel = draw_reliability(summaries, out / RELIABILITY_FILENAME)
    if rel:
        written.append(rel)
    return written, errors, notes
