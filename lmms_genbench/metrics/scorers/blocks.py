"""Stored images in blocks for the scorers' networks: decoded ahead in threads, worked on in
threads, in a fixed order (so a network sees the same batches however many threads run)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ...store import held

__all__ = ["bar_blocks", "load_rgb", "parallel_blocks", "prefetched_blocks", "scoring_workers", "unit_rows"]


def load_rgb(path: str):
    """A stored image as RGB; one the engine drew in this process comes from memory, not
    decoded again (:mod:`lmms_genbench.store.held`: verified by the file's sha256)."""
    return held.load_rgb(path)


def unit_rows(embeddings: Any) -> np.ndarray:
    """Embeddings (torch tensor or array, ... x D) as float64 rows of unit L2 norm.

    Norms are clipped at 1e-12 so an all-zero row gives similarity 0 instead of NaN.
    """
    if hasattr(embeddings, "detach"):  # torch.Tensor, without importing torch
        embeddings = embeddings.detach().float().cpu().numpy()
    emb = np.asarray(embeddings, dtype=np.float64).copy()
    emb /= np.clip(np.linalg.norm(emb, axis=-1, keepdims=True), 1e-12, None)
    return emb


def prefetched_blocks(
    docs: Sequence[Any], block: int, paths: Callable[[Any], Sequence[str]], load: Callable[[str], Any] = load_rgb
) -> Iterator[tuple[Sequence[Any], list[Any]]]:
    """Yield ``(docs, images)`` blocks of ``block`` docs, the images of each doc (from
    ``paths(doc)``, each through ``load``: decoded, or the path itself for a network behind
    the feature cache) concatenated in doc order. The next block is decoded in worker
    threads (PIL releases the GIL) while the caller encodes the current one."""
    from concurrent.futures import ThreadPoolExecutor

    starts = range(0, len(docs), block)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="genbench-load") as pool:

        def submit(start):
            chunk = docs[start : start + block]
            return chunk, [pool.submit(load, p) for rec in chunk for p in paths(rec)]

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
    load: Callable[[str], Any] = load_rgb,
) -> Iterator[tuple[Sequence[Any], Any]]:
    """Yield ``(docs, work(docs, images))`` for blocks of ``block`` docs, in order.

    With one worker this is :func:`prefetched_blocks` with ``work`` applied. With more,
    each block is decoded and worked on by one of ``workers`` threads, at most two blocks
    per thread in flight; the blocks are the same as with one worker, so ``work`` sees the
    same batches (and a network returns the same numbers for them)."""
    if workers <= 1:
        for chunk, images in prefetched_blocks(docs, block, paths, load):
            yield chunk, work(chunk, images)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    def task(start: int) -> tuple[Sequence[Any], Any]:
        chunk = docs[start : start + block]
        return chunk, work(chunk, [load(p) for rec in chunk for p in paths(rec)])

    starts = iter(range(0, len(docs), block))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="genbench-score") as pool:
        pending = deque(pool.submit(task, start) for _, start in zip(range(2 * workers), starts))
        while pending:
            done = pending.popleft().result()
            start = next(starts, None)
            if start is not None:
                pending.append(pool.submit(task, start))
            yield done
