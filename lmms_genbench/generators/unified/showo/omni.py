"""Show-o's token layouts and omni-attention masks (our own code, after the authors'
``training/prompting_utils.py``: ``UniversalPrompting`` and ``create_attention_mask_*``).

Vocabulary: Phi-1.5's tokenizer (``llm_vocab_size`` ids), then ``[PAD]`` and nine task tokens
added in this order (:data:`SPECIAL_TOKENS`), then the codebook's image codes, then one mask token
(the last id). Layouts:

* text-to-image: ``[pad ...] <|t2i|> <bos> text <eos> <|soi|> codes <|eoi|>``, the text part
  left-padded to ``max_text_len + 1`` = 129 tokens (the config's ``max_seq_length`` 128 plus the
  task token); the unconditional row of guidance has an empty text;
* understanding: ``<|mmu|> <|soi|> codes <|eoi|> <bos> "USER: \\n" question " ASSISTANT:"``.

Masks are additive float masks (0 = may attend, dtype minimum = may not), (B, 1, L, L), the
shape transformers' Phi takes as it is: text attends causally, image tokens attend to the whole
sequence; in text-to-image nothing but padding attends to padding, and in understanding every
token sees the whole image part.
"""

from __future__ import annotations

import torch

#: added after ``[PAD]`` by the authors' UniversalPrompting (inference_t2i.py / inference_mmu.py)
SPECIAL_TOKENS = ("<|soi|>", "<|eoi|>", "<|sov|>", "<|eov|>", "<|t2i|>", "<|mmu|>", "<|t2v|>", "<|v2v|>", "<|lvg|>")
PAD_TOKEN = "[PAD]"
#: configs/showo_demo_512x512.yaml: dataset.preprocessing.max_seq_length (text tokens of a t2i prompt)
MAX_TEXT_LEN = 128


class ShowoVocab:
    """The ids of Show-o's special tokens, and its tokenizer with them added."""

    def __init__(self, tokenizer, llm_vocab_size: int, codebook_size: int, exact: bool = True) -> None:
        # as UniversalPrompting: the pad token first, then the task tokens, appended in order
        tokenizer.add_special_tokens({"pad_token": PAD_TOKEN})
        tokenizer.add_tokens(list(SPECIAL_TOKENS))
        self.tokenizer = tokenizer
        ids = tokenizer.convert_tokens_to_ids([PAD_TOKEN, *SPECIAL_TOKENS])
        self.pad, self.soi, self.eoi = ids[0], ids[1], ids[2]
        self.t2i, self.mmu = ids[5], ids[6]
        self.bos, self.eos = int(tokenizer.bos_token_id), int(tokenizer.eos_token_id)
        # the image codes follow the text vocabulary and the ten added tokens
        self.image_offset = llm_vocab_size + 1 + len(SPECIAL_TOKENS)
        self.codebook_size = codebook_size
        self.mask = self.image_offset + codebook_size  # the last id of the resized vocabulary
        # the checkpoint learned its [PAD] and task tokens at llm_vocab_size and on: a tokenizer of
        # another length would read other rows (exact=False: random weights, where only sizes count)
        expected = list(range(llm_vocab_size, self.image_offset))
        if (ids != expected) if exact else max(ids) >= self.image_offset:
            raise ValueError(f"the tokenizer has {len(tokenizer)} tokens with Show-o's ten added (ids {ids[0]}.."
                             f"{ids[-1]}); the checkpoint's llm_vocab_size {llm_vocab_size} expects them at "
                             f"{expected[0]}..{expected[-1]}: not the tokenizer it was trained with")

    def text_ids(self, text: str) -> list[int]:
        ids = list(self.tokenizer(text)["input_ids"])
        # the authors' prompts start with <bos> whether or not the tokenizer adds one
        return ids if ids[:1] == [self.bos] else [self.bos, *ids]

    def t2i_row(self, prompt: str, num_codes: int) -> list[int]:
        """One text-to-image row, all codes masked."""
        text = [self.t2i, *self.text_ids(prompt), self.eos]  # an empty prompt: <|t2i|> <bos> <eos>
        width = MAX_TEXT_LEN + 1
        text = text[: width - 1] + [self.eos] if len(text) > width else [self.pad] * (width - len(text)) + text
        return [*text, self.soi, *([self.mask] * num_codes), self.eoi]

    def mmu_row(self, codes: list[int], question: str) -> list[int]:
        """One understanding row: the image's codes (0-based), then the question."""
        asked = list(self.tokenizer("USER: \n" + question + " ASSISTANT:")["input_ids"])
        return [self.mmu, self.soi, *(c + self.image_offset for c in codes), self.eoi, self.bos, *asked]


def _additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return mask.masked_fill(~allowed, torch.finfo(dtype).min).unsqueeze(1)


def t2i_mask(ids: torch.Tensor, vocab: ShowoVocab, dtype: torch.dtype) -> torch.Tensor:
    """(B, L) text-to-image rows -> (B, 1, L, L) mask (``create_attention_mask_predict_next`` with
    ``rm_pad_in_image=True``, as inference_t2i.py builds it)."""
    n, length = ids.shape
    soi, eoi, pad = ids == vocab.soi, ids == vocab.eoi, ids == vocab.pad
    image = (soi.cumsum(1) > eoi.cumsum(1)) | soi | eoi
    pos = torch.arange(length, device=ids.device)
    causal = pos[:, None] >= pos[None, :]
    allowed = causal.expand(n, length, length).clone()
    # text after the (left) padding does not see it; each row's pads end at its last pad
    last_pad = torch.where(pad, pos, torch.full_like(pos, -1)).amax(1)  # -1: no padding
    after = pos[None, :, None] > last_pad[:, None, None]
    upto = pos[None, None, :] <= last_pad[:, None, None]
    allowed &= ~(after & upto)
    # image rows see every token but padding
    allowed = torch.where(image[:, :, None], ~pad[:, None, :].expand(n, length, length), allowed)
    return _additive(allowed, dtype)


def mmu_mask(ids: torch.Tensor, vocab: ShowoVocab, dtype: torch.dtype) -> torch.Tensor:
    """(B, L) understanding rows -> (B, 1, L, L) mask (``create_attention_mask_for_mmu``): causal,
    and every row sees everything up to the first row's ``<|eoi|>``."""
    n, length = ids.shape
    end = int(torch.nonzero(ids[0] == vocab.eoi)[0, 0])
    pos = torch.arange(length, device=ids.device)
    allowed = (pos[:, None] >= pos[None, :]) | (pos[None, :] <= end)
    return _additive(allowed.expand(n, length, length), dtype)
