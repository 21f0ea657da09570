"""CLIP embeddings: images through the vision tower's projection (``image_embeds``), texts
through the text tower's (``text_embeds``). Texts longer than CLIP's context are truncated
and counted, or encoded in windows and averaged (``long_text``); never silently."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .batched import ImageEncoder, TextEncoder, encoder_logger as logger
from .loading import resolve_model

__all__ = ["DEFAULT_CLIP", "LONG_TEXT_MODES", "CLIPImageEncoder", "CLIPTextEncoder", "check_long_text"]

DEFAULT_CLIP = "openai/clip-vit-base-patch32"
LONG_TEXT_MODES = ("truncate", "chunk_mean")


def check_long_text(value: Any) -> str:
    """One of :data:`LONG_TEXT_MODES`, or a ValueError naming them."""
    if value not in LONG_TEXT_MODES:
        raise ValueError(f"long_text must be one of {LONG_TEXT_MODES}, got {value!r}")
    return value


def _clip_tower(model: Any, companion: Any, *, parts: tuple[str, str], load: str, companion_name: str) -> tuple[str, Any, Any]:
    """``resolve_model`` for one CLIP tower: a name loads ``transformers.<load>``; a loaded
    model must have the tower's ``parts`` (its model and projection; a ``CLIPModel`` has both)."""

    def from_hub(name: str) -> Any:
        import transformers

        return getattr(transformers, load).from_pretrained(name)

    name, loaded, companion = resolve_model(model, from_hub, companion=companion, companion_name=companion_name)
    if not all(hasattr(loaded, part) for part in parts):
        raise TypeError(
            f"model must be a CLIPModel or {load} (with {' and '.join(parts)}), got {type(loaded).__name__}"
        )
    return name, loaded, companion


class CLIPImageEncoder(ImageEncoder):
    """CLIP image embeddings (``visual_projection`` of the pooled vision output = ``image_embeds``).

    Args:
        model: hub name or path (loaded as ``CLIPVisionModelWithProjection``), or a loaded
            ``CLIPModel`` / ``CLIPVisionModelWithProjection``.
        processor: CLIP image processor, or a name/path; None loads that of ``model``.
        device: torch device string.
        batch_size: images per forward pass.
    """

    default_model = DEFAULT_CLIP

    def _resolve(self, model: Any, processor: Any) -> tuple[str, Any, Any]:
        return _clip_tower(
            model, processor, parts=("vision_model", "visual_projection"),
            load="CLIPVisionModelWithProjection", companion_name="processor",
        )

    @property
    def dim(self) -> int:
        return int(self.model.visual_projection.out_features)

    def _encode_batch(self, batch: Sequence[Any], counts: dict[str, int]) -> Any:
        pixel_values = self._pixel_values(batch)
        # same computation as get_image_features / image_embeds, independent of the transformers version
        pooled = self.model.vision_model(pixel_values=pixel_values).pooler_output
        return self.model.visual_projection(pooled)


class CLIPTextEncoder(TextEncoder):
    """CLIP text embeddings (``text_projection`` of the EOS-token state = ``text_embeds``).

    CLIP reads at most ``max_length`` tokens (77 for OpenAI CLIP) including the start and
    end tokens. ``long_text`` says what happens to longer texts:

    * ``"truncate"`` (what the Semantic Drift code does): keep the first ``max_length - 2``
      text tokens. Each cut text is counted in :attr:`num_truncated`, and the first time
      it happens a warning is logged.
    * ``"chunk_mean"``: split the text tokens into consecutive windows of
      ``max_length - 2``, encode each window (with start/end tokens) and average the
      window embeddings. Split texts are counted in :attr:`num_chunked`.

    Args:
        model: hub name or path (loaded as ``CLIPTextModelWithProjection``), or a loaded
            ``CLIPModel`` / ``CLIPTextModelWithProjection``.
        tokenizer: CLIP tokenizer, or a name/path; None loads that of ``model``.
        long_text: ``"truncate"`` or ``"chunk_mean"``.
        device: torch device string.
        batch_size: token sequences (texts, or windows under ``chunk_mean``) per forward pass.
    """

    def __init__(
        self,
        model: Any = DEFAULT_CLIP,
        tokenizer: Any = None,
        *,
        long_text: str = "truncate",
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        super().__init__(device, batch_size)
        self.long_text = check_long_text(long_text)
        name, loaded, tokenizer = _clip_tower(
            model, tokenizer, parts=("text_model", "text_projection"),
            load="CLIPTextModelWithProjection", companion_name="tokenizer",
        )
        if isinstance(tokenizer, (str, os.PathLike)):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        self.tokenizer = tokenizer
        self._take(name, loaded)
        positions = int(
            self.model.text_model.embeddings.position_embedding.num_embeddings
        )
        self.max_length = min(
            positions,
            int(getattr(tokenizer, "model_max_length", positions) or positions),
        )
        if self.max_length < 3:
            raise ValueError(
                f"CLIP context of {self.max_length} tokens is too short to hold any text"
            )
        self._bos = tokenizer.bos_token_id
        self._eos = tokenizer.eos_token_id
        if self._bos is None or self._eos is None:
            raise ValueError(
                "tokenizer must define bos_token_id and eos_token_id (a CLIP tokenizer does)"
            )
        self._pad = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self._eos
        )
        #: texts cut at ``max_length`` (``long_text="truncate"``), over this encoder's lifetime
        self.num_truncated = 0
        #: texts split into several windows (``long_text="chunk_mean"``)
        self.num_chunked = 0
        #: texts encoded so far
        self.num_texts = 0
        self._warned = False

    def _set_option(self, key: str, value: Any) -> None:
        if key != "long_text":
            super()._set_option(key, value)
        self.long_text = check_long_text(value)

    @property
    def dim(self) -> int:
        return int(self.model.text_projection.out_features)

    def _forward_ids(self, sequences: list[list[int]]) -> Any:
        import torch

        outs = []
        for start in range(0, len(sequences), self._batch_size):
            chunk = sequences[start : start + self._batch_size]
            width = max(len(s) for s in chunk)
            ids = torch.full((len(chunk), width), self._pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for i, seq in enumerate(chunk):
                ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
                mask[i, : len(seq)] = 1
            pooled = self.model.text_model(
                input_ids=ids.to(self._device), attention_mask=mask.to(self._device)
            ).pooler_output
            outs.append(self.model.text_projection(pooled))
        return torch.cat(outs, dim=0)

    def cut_flags(self, items: Sequence[str]) -> list[bool]:
        """Per text, whether it exceeds the context (what ``encode_with_counts`` counts): the
        feature cache stores it with each text's embedding."""
        self._check_items(items)
        with self._lock:
            token_ids = self.tokenizer(list(items), add_special_tokens=False, verbose=False)["input_ids"]
        return [len(ids) > self.max_length - 2 for ids in token_ids]

    def encode_with_counts(self, items: Sequence[str]) -> tuple[Any, dict[str, int]]:
        """Embeddings of ``items`` (strings) as a float32 CPU tensor N x D, and how many of
        them this call truncated or chunked."""
        import torch

        self._check_items(items)
        if len(items) == 0:
            return torch.zeros((0, self.dim), dtype=torch.float32), {}
        with self._lock:  # a tokenizer's settings are state: one call at a time
            # text tokens without start/end; verbose=False: lengths over the context are handled here
            token_ids = self.tokenizer(
                list(items), add_special_tokens=False, verbose=False
            )["input_ids"]
        room = self.max_length - 2
        long_count = sum(1 for ids in token_ids if len(ids) > room)
        with torch.inference_mode():
            if self.long_text == "truncate":
                sequences = [
                    [self._bos] + list(ids[:room]) + [self._eos] for ids in token_ids
                ]
                emb = self._forward_ids(sequences)
            else:
                sequences, owner = [], []
                for i, ids in enumerate(token_ids):
                    windows = [
                        ids[j : j + room] for j in range(0, max(len(ids), 1), room)
                    ] or [[]]
                    for window in windows:
                        sequences.append([self._bos] + list(window) + [self._eos])
                        owner.append(i)
                window_emb = self._forward_ids(sequences).float()
                index = torch.tensor(owner, device=window_emb.device)
                sums = torch.zeros(
                    (len(items), window_emb.shape[1]), device=window_emb.device
                )
                sums.index_add_(0, index, window_emb)
                counts = (
                    torch.bincount(index, minlength=len(items))
                    .clamp(min=1)
                    .unsqueeze(1)
                )
                emb = sums / counts
            emb = emb.detach().to("cpu", torch.float32)
        cut = "truncated" if self.long_text == "truncate" else "chunked"
        with self._lock:
            self.num_texts += len(items)
            if long_count and cut == "truncated":
                self.num_truncated += long_count
                self._report(long_count, len(items))
            elif long_count:
                self.num_chunked += long_count
                logger.info(
                    "CLIPTextEncoder: %d of %d texts exceed %d tokens; encoded as the mean of %d-token windows",
                    long_count,
                    len(items),
                    self.max_length,
                    self.max_length,
                )
        return emb, {cut: long_count}

    def _report(self, count: int, total: int) -> None:
        if not self._warned:
            self._warned = True
            logger.warning(
                "CLIPTextEncoder(%s): %d of %d texts exceed CLIP's %d-token context and were truncated "
                "(running count in .num_truncated; further truncations are only counted). "
                "Use long_text='chunk_mean' to encode whole texts.",
                self.name,
                count,
                total,
                self.max_length,
            )
        else:
            logger.debug("CLIPTextEncoder: %d more texts truncated", count)

