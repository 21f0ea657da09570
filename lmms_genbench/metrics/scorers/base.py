"""Helpers shared by the scorers of stored chains (GenCeption, MCD).

Scoring settings from the environment, image loading in prefetched blocks, row
normalisation, macro means, failure reasons of a chain's JSON, the report memo
used by lmms-eval aggregation functions, and writing a report beside the chains.
Importing this module is cheap: numpy only.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ENV_BATCH",
    "ENV_DEVICE",
    "ReportCache",
    "cached_report",
    "default_device",
    "failure_reason",
    "parse_chain",
    "load_rgb",
    "macro_mean",
    "prefetched_blocks",
    "resolve_device_and_batch",
    "unit_rows",
    "write_report_json",
]

logger = logging.getLogger(__name__)

# Scoring settings shared by every scorer, overridable at run time.
ENV_DEVICE = "LMMS_GENBENCH_SCORER_DEVICE"
ENV_BATCH = "LMMS_GENBENCH_SCORER_BATCH"


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


def macro_mean(values: Iterable[float]) -> float:
    """Mean of the non-NaN values; NaN if there are none."""
    vals = [v for v in values if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


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
    from PIL import Image

    with Image.open(path) as img:
        return img.convert("RGB")


def prefetched_blocks(
    docs: Sequence[Any],
    block: int,
    paths: Callable[[Any], Sequence[str]] = lambda rec: rec["images"],
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


NOT_A_CHAIN = "response is not a chain (was the cycle model used?)"


def parse_chain(response: Any) -> dict[str, Any] | None:
    """The cycle model's JSON response as a dict; None for anything else (a response
    from another model type, an error string)."""
    import json

    try:
        chain = json.loads(response)
    except (TypeError, ValueError):
        return None
    return chain if isinstance(chain, dict) else None


def failure_reason(failure: Mapping[str, Any] | None) -> str | None:
    """``"<stage> failed at hop <hop>: <reason>"`` from a chain's ``failure``; None if none.

    Reports count failures by the text before the first ":".
    """
    if not failure:
        return None
    return (
        f"{failure.get('stage', '?')} failed at hop {failure.get('hop', '?')}: "
        f"{failure.get('reason', '')}"
    )


class ReportCache:
    """LRU memo of reports. lmms-eval calls one aggregation function per metric on
    the same items; the chains are scored once and every metric reads the same report.

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


def cached_report(
    cache: ReportCache,
    records: Sequence[Mapping[str, Any]],
    settings: Hashable,
    score: Callable[[], dict[str, Any]],
    write: Callable[[Sequence[Mapping[str, Any]], dict[str, Any]], None],
) -> dict[str, Any]:
    """The report for ``records`` scored with ``settings``: computed by ``score()`` and
    saved by ``write(records, report)`` the first time, then read from ``cache``. The key
    is the records' JSON, so any change to a record (a rerun, a new path) scores again."""
    import json

    key = (settings, json.dumps(list(records), sort_keys=True, default=str))

    def compute() -> dict[str, Any]:
        report = score()
        write(records, report)
        return report

    return cache.get(key, compute)


def write_report_json(target: str | os.PathLike, payload: Any, what: str) -> None:
    """Write ``payload`` as JSON to ``target`` atomically; an unwritable store only
    logs a warning (the scores themselves are already computed)."""
    import json

    from ...engine.store import atomic_write

    blob = json.dumps(payload, indent=2, sort_keys=True, default=str).encode("utf-8")
    try:
        atomic_write(Path(target), lambda fh: fh.write(blob))
        logger.info("%s report written to %s", what, target)
    except OSError as exc:
        logger.warning("could not write %s: %s", target, exc)
