"""The byte-level CLIP vocabulary of the tiny networks, built in code (nothing downloaded)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["BOS", "EOS", "byte_level_vocab", "bytes_to_unicode"]

BOS, EOS = "<|startoftext|>", "<|endoftext|>"


def bytes_to_unicode(*, byte_order: bool = False) -> list[str]:
    """GPT-2/CLIP's printable stand-in for each of the 256 byte values.

    ``byte_order=False`` lists them as GPT-2's table does (the printable bytes
    first), ``True`` by byte value. The two orders give different token ids, and
    each tiny network keeps the one it was built with.
    """
    printable = (
        list(range(0x21, 0x7E + 1))  # "!" .. "~"
        + list(range(0xA1, 0xAC + 1))  # inverted "!" .. "not" sign
        + list(range(0xAE, 0xFF + 1))  # registered sign .. y with diaeresis
    )
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    pairs = sorted(zip(printable, codes)) if byte_order else zip(printable, codes)
    return [chr(code) for _, code in pairs]


def byte_level_vocab(merges: Sequence[tuple[str, str]] = (), *, byte_order: bool = False) -> dict[str, int]:
    """CLIP's layout: byte symbols, the same with ``</w>``, then ``merges`` joined, then BOS and EOS.

    Without merges every byte is a token, so a text of k characters takes about k tokens.
    """
    symbols = bytes_to_unicode(byte_order=byte_order)
    tokens = symbols + [s + "</w>" for s in symbols] + [a + b for a, b in merges] + [BOS, EOS]
    if len(set(tokens)) != len(tokens):
        raise ValueError("merges repeat a token of the vocabulary")
    return {token: index for index, token in enumerate(tokens)}
