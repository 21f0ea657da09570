"""Plots of lmms-eval results files: S_δ(g) drift curves and MGG tag × generation heatmaps.

Reads ``<output_path>/<date>_results.json`` files written by lmms-eval. Per task,
``results[<task>]`` holds keys ``"<metric>,<filter>"``; this module reads

* ``s_<mapping>@<g>`` (Semantic Drift Protocol, :mod:`lmms_genbench.metrics.scorers.mcd`):
  S_δ(g) per mapping δ and generation g, and ``sdr_{a,b,c}_<mapping>``, the Semantic Drift
  Rate's fit ``a * exp(-b * g) + c``, drawn dashed over the curve where it was made;
* ``mgg_<tag>@<g>``: GenEval accuracy per tag and generation (the MGG heatmap; the
  tags of :data:`lmms_genbench.metrics.functional.geneval.TAGS` first, any other tag after).

Per-source keys (``s_text->text@2_docci``) are not read: the curves are the pooled ones.
matplotlib is imported inside the drawing functions and draws on its Agg canvas
directly, so importing this module (or plotting) changes no global matplotlib state.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..metrics.functional.drift import MAPPINGS
from ..metrics.functional.geneval import TAGS
from .results import (
    ResultsError,
    dedupe_labels,
    finite_or_none,
    label_from_config,
    read_results,
    task_metrics,
)

__all__ = [
    "CURVES_FILENAME",
    "HEATMAP_FILENAME",
    "PlotReport",
    "ResultsError",
    "RunResults",
    "draw_drift_curves",
    "draw_mgg_heatmap",
    "draw_similarity_curves",
    "label_from_config",
    "load_results",
    "plot_results",
]

CURVES_FILENAME = "sdp_drift_curves.png"
HEATMAP_FILENAME = "sdp_mgg_heatmap.png"

_MAPPING_RE = "|".join(re.escape(m) for m in MAPPINGS)
# the metric name must end at "@<g>": per-source keys ("..@2_docci") are not pooled curves
_S_KEY = re.compile(rf"^s_({_MAPPING_RE})@(\d+)$")
_MGG_KEY = re.compile(r"^mgg_([A-Za-z0-9_]+)@(\d+)$")


@dataclass(frozen=True)
class RunResults:
    """What one (results file, task) contributes to the plots.

    Attributes:
        path: the results file.
        task: the lmms-eval task name in ``results``.
        label: legend label (from the user or :func:`label_from_config`).
        curves: mapping -> {g: S_δ(g)}, ascending g; only mappings with data.
        mgg: tag -> {g: accuracy}; empty when the task has no ``mgg_*`` keys.
        fits: mapping -> SDR's (a, b, c) fitted to its curve; only mappings with a fit.
    """

    path: Path
    task: str
    label: str
    curves: dict[str, dict[int, float]] = field(default_factory=dict)
    mgg: dict[str, dict[int, float]] = field(default_factory=dict)
    fits: dict[str, tuple[float, float, float]] = field(default_factory=dict)


@dataclass
class PlotReport:
    """Outcome of :func:`plot_results`.

    Attributes:
        written: PNG files written, in order.
        curve_labels: legend labels of the drift-curve figure, in plotting order.
        heatmap_labels: panel titles of the MGG heatmap figure, in order.
        errors: one message per input file that could not be read (it names the file).
        notes: informational messages (e.g. why the heatmap was skipped).
    """

    written: list[Path] = field(default_factory=list)
    curve_labels: list[str] = field(default_factory=list)
    heatmap_labels: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- reading
def _series(metrics: Mapping[str, Any], pattern: re.Pattern[str]) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for metric, value in metrics.items():
        match = pattern.match(metric)
        number = finite_or_none(value)
        if match and number is not None:
            out.setdefault(match.group(1), {})[int(match.group(2))] = number
    return {name: dict(sorted(points.items())) for name, points in out.items()}


def _fits(metrics: Mapping[str, Any], curves: Mapping[str, Any]) -> dict[str, tuple[float, float, float]]:
    """SDR's (a, b, c) per mapping with a curve, where all three are numbers (null: no fit)."""
    out = {}
    for mapping in curves:
        params = [finite_or_none(metrics.get(f"sdr_{p}_{mapping}")) for p in "abc"]
        if all(v is not None for v in params):
            out[mapping] = (params[0], params[1], params[2])
    return out


def load_results(path: str | os.PathLike[str], label: str | None = None) -> list[RunResults]:
    """Read one lmms-eval results file.

    Args:
        path: a ``*_results.json`` file.
        label: legend label; None derives it from the file's config
            (:func:`label_from_config`). With several plottable tasks in the file, the
            task name is appended to tell them apart.

    Returns:
        one :class:`RunResults` per task with ``s_*@g`` or ``mgg_*@g`` values.

    Raises:
        ResultsError: the file is missing, is not JSON, has no ``results`` mapping, or
            none of its tasks has any ``s_<mapping>@<g>`` or ``mgg_<tag>@<g>`` value.
    """
    path = Path(path)
    data = read_results(path)
    if label is None:
        label = label_from_config(data.get("config"), fallback=path.stem)
    runs = []
    for task, task_results in data["results"].items():
        if not isinstance(task_results, Mapping):
            continue
        metrics = task_metrics(task_results)
        curves = _series(metrics, _S_KEY)
        curves = {m: curves[m] for m in MAPPINGS if m in curves}
        mgg = _series(metrics, _MGG_KEY)
        # known tags in GenEval's order; unknown ones (a later "overall"?) after them
        mgg = {t: mgg[t] for t in [*TAGS, *sorted(set(mgg) - set(TAGS))] if t in mgg}
        if curves or mgg:
            runs.append(RunResults(path, str(task), label, curves, mgg, _fits(metrics, curves)))
    if not runs:
        tasks = ", ".join(map(str, data["results"])) or "none"
        raise ResultsError(
            f"{path}: no s_<mapping>@<g> (drift) or mgg_<tag>@<g> values in any task "
            f"(tasks: {tasks})"
        )
    if len(runs) > 1:
        runs = [RunResults(r.path, r.task, f"{r.label} [{r.task}]", r.curves, r.mgg, r.fits) for r in runs]
    return runs


# --------------------------------------------------------------------------- drawing
def _new_figure(width: float, height: float) -> Any:
    """A figure on its own Agg canvas: no pyplot, so no global backend or figure state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def draw_drift_curves(runs: Sequence[RunResults], out_file: str | os.PathLike[str]) -> list[str]:
    """Write the S_δ(g) figure: a 2 × 2 grid, one panel per mapping, one line per run.

    Args:
        runs: runs with at least one curve (others are ignored).
        out_file: PNG path (its folder must exist).

    Returns:
        the legend labels, in plotting order (read back from the figure).

    Raises:
        ValueError: if no run has a curve.
    """
    runs = [r for r in runs if r.curves]
    if not runs:
        raise ValueError("no run has S_δ(g) values to plot")
    fig = _new_figure(11, 8)
    axes = fig.subplots(2, 2, sharey=False).ravel()
    for ax, mapping in zip(axes, MAPPINGS):
        for i, run in enumerate(runs):
            points = run.curves.get(mapping)
            if points:
                # fixed colour per run across panels, even where a run lacks a mapping
                ax.plot(list(points), list(points.values()), marker="o", color=f"C{i % 10}",
                        label=run.label)
            if points and mapping in run.fits:
                _draw_fit(ax, run.fits[mapping], list(points), f"C{i % 10}")
        ax.set_title(f"δ = {mapping}")
        ax.set_xlabel("generation g")
        ax.set_ylabel("S_δ(g)")
        ax.grid(True, alpha=0.3)
        # ticks at the scored generations only: a mapping has only odd or only even g
        gens = sorted({g for run in runs for g in run.curves.get(mapping, {})})
        if gens:
            ax.set_xticks(gens)
        if not ax.lines:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes,
                    color="grey")
    # one legend for the figure: the same runs in every panel
    handles = [
        next((ln for ax in axes for ln in ax.lines if ln.get_label() == r.label), None)
        for r in runs
    ]
    labels = [r.label for r, h in zip(runs, handles) if h is not None]
    fig.legend([h for h in handles if h is not None], labels, loc="outside lower center",
               ncols=min(len(labels), 2), fontsize="small")
    fitted = " (dashed: SDR's fit a·exp(-b·g) + c)" if any(r.fits for r in runs) else ""
    fig.suptitle("Semantic drift: similarity to the input per generation" + fitted)
    fig.savefig(out_file)
    return [t.get_text() for t in fig.legends[0].get_texts()]


def _draw_fit(ax: Any, params: tuple[float, float, float], gens: Sequence[int], colour: str) -> None:
    """SDR's fitted decay, dashed, over the generations the curve covers (no legend entry)."""
    import numpy as np

    from ..metrics.functional.sdr import exp_decay

    x = np.linspace(min(gens), max(gens), 100)
    a, b, c = params
    with np.errstate(all="ignore"):
        ax.plot(x, exp_decay(x, a, b, c), linestyle="--", linewidth=1, color=colour, label="_sdr_fit")


def draw_similarity_curves(
    series: Sequence[tuple[str, Mapping[int, float]]],
    out_file: str | os.PathLike[str],
    title: str = "GenCeption: similarity to the seed image per iteration",
    xlabel: str = "iteration t",
    ylabel: str = "S(t)",
) -> list[str]:
    """Write one panel with one line per run: GenCeption's S(t) (``s@t``), or any
    per-step score.

    Args:
        series: (label, {step: value}) per run; runs without points are ignored.
        out_file: PNG path (its folder must exist).

    Returns:
        the legend labels, in plotting order.

    Raises:
        ValueError: if no run has a point.
    """
    series = [(label, dict(sorted(points.items()))) for label, points in series if points]
    if not series:
        raise ValueError("no run has values to plot")
    fig = _new_figure(7, 4.2)
    ax = fig.subplots()
    for i, (label, points) in enumerate(series):
        ax.plot(list(points), list(points.values()), marker="o", color=f"C{i % 10}", label=label)
    ax.set_xticks(sorted({t for _, points in series for t in points}))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    legend = ax.legend(fontsize="small")
    fig.savefig(out_file)
    return [t.get_text() for t in legend.get_texts()]


def draw_mgg_heatmap(runs: Sequence[RunResults], out_file: str | os.PathLike[str]) -> list[str]:
    """Write the MGG figure: one tag × generation accuracy heatmap per run (0–1 scale),
    stacked vertically.

    Args:
        runs: runs with ``mgg`` values (others are ignored).
        out_file: PNG path (its folder must exist).

    Returns:
        the panel titles (run labels), in order.

    Raises:
        ValueError: if no run has MGG values.
    """
    import numpy as np

    runs = [r for r in runs if r.mgg]
    if not runs:
        raise ValueError("no run has mgg_<tag>@<g> values to plot")
    n_gen = max(len({g for pts in r.mgg.values() for g in pts}) for r in runs)
    n_tags = max(len(r.mgg) for r in runs)
    # one panel per run, stacked: runs share the generation axis, and a 20-generation
    # chain stays readable side by side with several models
    fig = _new_figure(max(6.0, 2.5 + 0.55 * n_gen), 0.8 + (0.9 + 0.4 * n_tags) * len(runs))
    axes = fig.subplots(len(runs), 1, squeeze=False).ravel()
    image = None
    for ax, run in zip(axes, runs):
        tags = list(run.mgg)
        gens = sorted({g for pts in run.mgg.values() for g in pts})
        # a (tag, g) without a value stays blank (NaN), not 0: absent is not wrong
        grid = np.array([[run.mgg[t].get(g, np.nan) for g in gens] for t in tags])
        image = ax.imshow(np.ma.masked_invalid(grid), vmin=0.0, vmax=1.0, cmap="viridis",
                          aspect="auto")
        ax.set_xticks(range(len(gens)), [str(g) for g in gens])
        ax.set_yticks(range(len(tags)), tags)
        ax.set_xlabel("generation g")
        ax.set_title(run.label, fontsize="small")
        for (i, j), value in np.ndenumerate(grid):
            if np.isfinite(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize="x-small",
                        color="black" if value > 0.6 else "white")
    fig.colorbar(image, ax=list(axes), label="accuracy", shrink=0.9)
    fig.suptitle("GenEval accuracy per tag and generation")
    fig.savefig(out_file)
    return [ax.get_title() for ax in axes]


# --------------------------------------------------------------------------- entry point
def plot_results(
    paths: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str] | None = None,
    labels: Sequence[str] | None = None,
) -> PlotReport:
    """Plot drift curves and MGG heatmaps for several lmms-eval results files.

    Args:
        paths: results files (one model each), at least one.
        out_dir: folder for the PNGs (created if missing); default: the folder of the
            first readable results file.
        labels: legend labels, one per path in the same order; default: derived from
            each file's config (model name + short, redacted model_args).

    Returns:
        a :class:`PlotReport`. Unreadable files are listed in ``errors`` and the others
        are still plotted; with none readable nothing is written.

    Raises:
        ValueError: if ``paths`` is empty, or ``labels`` is not one non-empty string
            per path.
    """
    if isinstance(paths, (str, os.PathLike)) or not paths:
        raise ValueError("paths must be a non-empty list of results files")
    if labels is not None:
        labels = list(labels)
        if len(labels) != len(paths):
            raise ValueError(
                f"got {len(labels)} label(s) for {len(paths)} results file(s); "
                "give one --label per file, in the same order"
            )
        if not all(isinstance(x, str) and x.strip() for x in labels):
            raise ValueError(f"labels must be non-empty strings, got {labels!r}")

    report = PlotReport()
    runs: list[RunResults] = []
    first_dir: Path | None = None
    for i, path in enumerate(paths):
        try:
            loaded = load_results(path, labels[i] if labels is not None else None)
        except ResultsError as exc:
            report.errors.append(str(exc))
            continue
        runs.extend(loaded)
        first_dir = first_dir or Path(path).resolve().parent
    if not runs:
        return report

    deduped = dedupe_labels([r.label for r in runs])
    runs = [RunResults(r.path, r.task, lab, r.curves, r.mgg) for r, lab in zip(runs, deduped)]
    target = Path(out_dir) if out_dir is not None else first_dir
    target.mkdir(parents=True, exist_ok=True)

    report.curve_labels = _draw(report, runs, "curves", draw_drift_curves, target / CURVES_FILENAME,
                                "no s_<mapping>@<g> values; not in the drift curves")
    if any(r.mgg for r in runs):
        report.heatmap_labels = _draw(report, runs, "mgg", draw_mgg_heatmap, target / HEATMAP_FILENAME,
                                      "no mgg_<tag>@<g> values; not in the MGG heatmap")
    else:
        report.notes.append("no mgg_<tag>@<g> values in any results file; MGG heatmap skipped")
    return report


def _draw(report: PlotReport, runs: list[RunResults], values: str,
          draw: Callable[[list[RunResults], Path], list[str]], out: Path, missing: str) -> list[str]:
    """``draw`` the figure ``out`` when a run has ``values`` (its attribute ``curves`` or
    ``mgg``) and note each run without them (``missing``: why it is not in the figure).
    Returns the figure's labels (none when it was not drawn)."""
    labels = []
    if any(getattr(r, values) for r in runs):
        labels = draw(runs, out)
        report.written.append(out)
    for run in runs:
        if not getattr(run, values):
            report.notes.append(f"{run.path} [{run.task}]: {missing}")
    return labels
