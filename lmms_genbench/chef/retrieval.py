"""ChEF in-context examples: the pool (the task's own split) and the four retrievers.

lmms-eval calls ``doc_to_text`` with only the doc, so ``process_docs`` registers the
split as a pool in the state module's ``chef_pools`` slot and numbers its rows; a doc
names its pool and row. Retrieval never returns the doc itself nor a row of its
circular group (a rotated copy would hand the model its answer).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core import state
from .corruptions import doc_rng
from .scenario import Item, doc_image, group_value, normalize, scenario_spec

__all__ = ["RETRIEVERS", "pool_doc", "register_pool", "retrieve"]


class _Pool:
    """The documents in-context examples are drawn from (the task's own split)."""

    def __init__(self, docs: Sequence[Mapping[str, Any]]):
        self.docs = docs
        self._text = None
        self._image = None
        self._groups = None

    def text_features(self, recipe) -> np.ndarray:
        if self._text is None:
            self._text = _bow([_item_text(normalize(d, recipe)) for d in self.docs])
        return self._text

    def groups(self, recipe) -> list[str] | None:
        """Each row's circular group, or None when the scenario names no ``group``."""
        spec = scenario_spec(recipe)
        if not spec.get("group"):
            return None
        if self._groups is None:
            field = spec["group"]
            # a column read decodes no image (HF datasets); plain lists of dicts work too
            values = self.docs[field] if hasattr(self.docs, "column_names") else [d.get(field) for d in self.docs]
            self._groups = [group_value(v, spec) for v in values]
        return self._groups

    def image_features(self, recipe) -> np.ndarray:
        if self._image is None:
            self._image = np.stack([_thumb(_pool_image(d, recipe)) for d in self.docs])
        return self._image


def _pool_image(doc, recipe):
    # one pool row without its image ranks last (zero thumbnail) instead of failing every
    # query's top-k; the row fails itself when it is queried or shown as an example
    try:
        return doc_image(doc, recipe)
    except ValueError:
        return None


def _pools() -> dict[str, _Pool]:
    """The pools registered in this process (the state module's ``chef_pools`` slot): lmms-eval
    calls ``doc_to_text`` with only the doc, which names its pool."""
    return state.slot("chef_pools", dict)


def register_pool(dataset) -> str:
    """Remember ``dataset`` as an in-context pool; returns its id (used by ``process_docs``)."""
    pools = _pools()
    pool_id = f"pool{len(pools)}-{getattr(dataset, '_fingerprint', id(dataset))}"
    pools[pool_id] = _Pool(dataset)
    return pool_id


def _item_text(item: Item) -> str:
    return f"{item.hint} {item.question} {' '.join(item.options)}"


def _bow(texts: Sequence[str]) -> np.ndarray:
    # TF-IDF on lower-cased word tokens, L2-normalised (ChEF uses a text encoder)
    tokens = [re.findall(r"[a-z0-9]+", t.lower()) for t in texts]
    vocab = {w: i for i, w in enumerate(sorted({w for ts in tokens for w in ts}))}
    m = np.zeros((len(texts), max(1, len(vocab))))
    for r, ts in enumerate(tokens):
        for w in ts:
            m[r, vocab[w]] += 1
    idf = np.log((1 + len(texts)) / (1 + (m > 0).sum(0))) + 1
    m *= idf
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def _thumb(image) -> np.ndarray:
    # 16x16 colour thumbnail, mean-centred, L2-normalised (ChEF uses CLIP image features)
    if image is None:
        return np.zeros(16 * 16 * 3)
    x = np.asarray(image.convert("RGB").resize((16, 16)), dtype=np.float64).ravel()
    x -= x.mean()
    return x / max(np.linalg.norm(x), 1e-12)


RETRIEVERS = ("random", "fixed", "topk_text", "topk_image")


def retrieve(doc: Mapping[str, Any], recipe: Mapping[str, Any], retriever: str, shots: int, seed: int) -> list[int]:
    """Row indices of ``shots`` in-context examples for ``doc`` from its pool.

    Never the doc itself, nor (when the scenario names a ``group``) any row of its
    circular group: a rotated copy of the question would hand the model its answer.
    """
    if retriever not in RETRIEVERS:
        raise ValueError(f"ice retriever must be one of {RETRIEVERS}, got {retriever!r}")
    if not 1 <= int(shots) <= 8:
        raise ValueError(f"ice shots must be between 1 and 8, got {shots!r}")
    pool_id, row = doc.get("chef_pool"), doc.get("chef_row")
    pools = _pools()
    if pool_id not in pools:
        raise ValueError("in-context examples need the task's process_docs: utils.process_docs (it registers the pool)")
    pool = pools[pool_id]
    groups = pool.groups(recipe)
    if groups is None:
        others = [i for i in range(len(pool.docs)) if i != row]
    else:
        own = normalize(doc, recipe).group
        others = [i for i in range(len(pool.docs)) if i != row and groups[i] != own]
    if len(others) < shots:
        where = "other documents" if groups is None else "documents outside the question's own group"
        raise ValueError(f"the pool has {len(others)} {where}, fewer than {shots} shots")
    if retriever == "fixed":
        return others[:shots]
    if retriever == "random":
        rng = doc_rng(seed, normalize(doc, recipe).key, "ice")
        return [others[i] for i in rng.choice(len(others), size=shots, replace=False)]
    feats = pool.text_features(recipe) if retriever == "topk_text" else pool.image_features(recipe)
    sims = feats[others] @ feats[row]
    order = np.argsort(-sims, kind="stable")[:shots]
    return [others[i] for i in order]


def pool_doc(doc: Mapping[str, Any], row: int):
    """Row ``row`` of the pool ``doc`` belongs to."""
    return _pools()[doc["chef_pool"]].docs[row]
