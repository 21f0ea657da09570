"""Exact balancing of correct letters across A-D (AutoBench-V §4.6).

The authors' code draws each correct letter at random; the paper says the
letters are spread evenly. Here every letter gets ``floor(N/4)`` or
``floor(N/4)+1`` items, so each share is within one item of ``N/4``. Pure and
seeded.
"""

from __future__ import annotations

import random

LETTERS = ("A", "B", "C", "D")


def balanced_letters(n: int, seed: int, letters: tuple[str, ...] = LETTERS) -> list[str]:
    """``n`` letters, each used ``n // k`` or ``n // k + 1`` times, in seeded order."""
    if n < 0:
        raise ValueError(f"n: expected >= 0; got {n!r}")
    rng = random.Random(f"autobench-balance-{seed}")
    k = len(letters)
    extra = rng.sample(list(letters), n % k)  # which letters carry the remainder
    seq = [x for x in letters for _ in range(n // k)] + extra
    rng.shuffle(seq)
    return seq


def move_answer(options: list[str], answer: str, target: str, letters: tuple[str, ...] = LETTERS):
    """Swap the correct option into ``target``'s slot; return (options, target)."""
    i, j = letters.index(answer), letters.index(target)
    out = list(options)
    out[i], out[j] = out[j], out[i]
    return out, target


def letter_counts(answers: list[str], letters: tuple[str, ...] = LETTERS) -> dict[str, int]:
    return {x: sum(a == x for a in answers) for x in letters}
