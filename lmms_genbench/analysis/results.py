"""The one reader of lmms-eval results files, and the labels runs are shown under.

``lmms-eval --output_path OUT`` writes ``<date>_results.json``: ``results[<task>]`` holds
``"<metric>,<filter>"`` keys (``,none`` when the task has no filter) beside ``alias``, and
``config`` holds ``model`` and ``model_args``. Every command that reads results (``plot``,
``compare``, ``ranks``, ``report``, ``chef summary``, ``autobench bias``) reads them here,
so they agree on what a file must hold, which filter a metric is read under and what
counts as a number.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.args import finite_or_none

__all__ = [
    "RESULTS_SUFFIX",
    "ResultsError",
    "dedupe_labels",
    "find_results",
    "finite_or_none",
    "label_from_config",
    "read_results",
    "task_metrics",
]

RESULTS_SUFFIX = "_results.json"
# model_args keys whose values are never shown (API keys and the like)
_SECRET_WORDS = ("key", "token", "secret", "password")
# values that look like credentials even under an innocent key name (OpenAI, HF, GitHub)
_SECRET_VALUE = re.compile(r"^(sk-|hf_|ghp_|github_pat_)", re.IGNORECASE)
_MAX_ARG_CHARS = 24  # per model_args value in a label; longer ones are shortened


class ResultsError(ValueError):
    """A results file that cannot be read; the message names the file and what is wrong."""


def find_results(path: str | os.PathLike[str]) -> list[Path]:
    """``path`` if it is a results file, else every ``*_results.json`` under it, sorted."""
    path = Path(path)
    if path.is_dir():
        return sorted(path.rglob(f"*{RESULTS_SUFFIX}"))
    return [path]


def read_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed results file; ``results`` is a mapping and ``config`` one (maybe empty).

    Raises:
        ResultsError: the file is missing, unreadable, not JSON, or has no ``results`` mapping.
    """
    path = Path(path)
    if not path.is_file():
        raise ResultsError(f"{path}: no such file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise ResultsError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ResultsError(f"{path}: no 'results' mapping; is it an lmms-eval *{RESULTS_SUFFIX}?")
    if not isinstance(data.get("config"), dict):
        data["config"] = {}
    return data


def task_metrics(task_results: Any) -> dict[str, Any]:
    """``{metric: value}`` of one task under one filter: ``none`` when present (lmms-eval's
    default), else the alphabetically first, so several filters never mix. Values are as
    stored (``"N/A"`` included); read numbers with :func:`finite_or_none`."""
    if not isinstance(task_results, Mapping):
        return {}
    by_filter: dict[str, dict[str, Any]] = {}
    for key, value in task_results.items():
        if not isinstance(key, str) or "," not in key:
            continue  # "alias" and the like
        metric, _, filt = key.rpartition(",")
        by_filter.setdefault(filt, {})[metric] = value
    if not by_filter:
        return {}
    return by_filter["none"] if "none" in by_filter else by_filter[min(by_filter)]


def _split_model_args(model_args: Any) -> list[tuple[str, str]]:
    """``model_args`` as (key, value) pairs: lmms-eval stores "k=v,k2=v2" (or a dict
    when the run came from a config file)."""
    if isinstance(model_args, Mapping):
        return [(str(k), str(v)) for k, v in model_args.items()]
    if not isinstance(model_args, str):
        return []
    pairs = []
    for part in model_args.split(","):
        if part.strip():
            key, sep, value = part.partition("=")
            pairs.append((key.strip(), value.strip()) if sep else ("", key.strip()))
    return pairs


def _short_value(value: str) -> str:
    # paths (artifact folders, local checkpoints) are identified by their last part
    if "/" in value or os.sep in value:
        value = os.path.basename(value.rstrip("/" + os.sep)) or value
    if len(value) > _MAX_ARG_CHARS:
        value = value[: _MAX_ARG_CHARS - 1] + "…"
    return value


def label_from_config(config: Mapping[str, Any] | None, fallback: str) -> str:
    """Label of a run: model name and a short, redacted form of its model_args.

    Args:
        config: the results file's ``config`` (``model``, ``model_args``); may be None.
        fallback: label when the config names no model (e.g. the file name).

    Returns:
        e.g. ``"cycle (preset=smoke, artifacts=art)"``. A model_args entry whose key
        contains key/token/secret/password (any case), or whose value looks like a
        credential (``sk-…``, ``hf_…``), is dropped, never shown.
    """
    config = config if isinstance(config, Mapping) else {}
    model = config.get("model")
    name = str(model) if isinstance(model, str) and model.strip() else fallback
    shown = []
    for key, value in _split_model_args(config.get("model_args")):
        if any(word in key.lower() for word in _SECRET_WORDS) or _SECRET_VALUE.match(value):
            continue
        shown.append(f"{key}={_short_value(value)}" if key else _short_value(value))
    return f"{name} ({', '.join(shown)})" if shown else name


def dedupe_labels(labels: Sequence[str]) -> list[str]:
    """Make repeated labels distinct ("x", "x #2"): a legend or table must tell runs apart."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return out
