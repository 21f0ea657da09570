"""The byte-level vocabularies of the tiny networks: token ids are part of their weights."""

from __future__ import annotations

import hashlib
import json

import pytest

from lmms_genbench.smoke.diffusion import MERGES
from lmms_genbench.smoke.vocab import byte_level_vocab


def _digest(vocab: dict[str, int]) -> str:
    return hashlib.sha256(json.dumps(vocab, ensure_ascii=False).encode()).hexdigest()[:16]


def test_tiny_clip_and_owlv2_vocab_follows_gpt2_table_order():
    vocab = byte_level_vocab()
    assert len(vocab) == 514 and _digest(vocab) == "67ceaab3ca8fcfe9"
    assert (vocab["!"], vocab["Ā"], vocab["!</w>"]) == (0, 188, 256)
    assert (vocab["<|startoftext|>"], vocab["<|endoftext|>"]) == (512, 513)


def test_tiny_stable_diffusion_vocab_follows_byte_order_then_merges():
    vocab = byte_level_vocab(MERGES, byte_order=True)
    assert len(vocab) == 539 and _digest(vocab) == "30f76526eec7d659"
    assert (vocab["Ā"], vocab["!"], vocab["th"]) == (0, 33, 512)
    assert (vocab["<|startoftext|>"], vocab["<|endoftext|>"]) == (537, 538)


def test_a_repeated_merge_is_refused():
    with pytest.raises(ValueError, match="repeat"):
        byte_level_vocab([("t", "h"), ("t", "h")])
