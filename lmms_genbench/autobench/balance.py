"""Exact balancing of correct letters across A-D (AutoBench-V §4.6).

The authors' code draws each correct letter at random; the paper says the
letters are spread evenly. Here every letter gets ``floor(N/4)`` or
``floor(N/4)+1`` items, so each share is within one item of ``N/4`` - overall
and, when groups are given, within each group too. Pure and seeded.
"""

from __future__ import annotations

import random

LETTERS = ("A", "B", "C", "D")


def balanced_letters(n: int, seed: int, letters: tuple[str, ...] = LETTERS,
                     groups: list | None = None) -> list[str]:
    """``n`` letters, each used ``n // k`` or ``n // k + 1`` times, in seeded order.

    With ``groups`` (one key per item, e.g. its level) the balance also holds
    within every group: the letters cycle in a seeded order over the items
    sorted by group (any run of a period-``k`` cycle is balanced to one item),
    then are shuffled within each group.
    """
    if n < 0:
        raise ValueError(f"n: expected >= 0; got {n!r}")
    if groups is not None and len(groups) != n:
        raise ValueError(f"groups: expected {n} keys, one per item; got {len(groups)}")
    rng = random.Random(f"autobench-balance-{seed}")
    cycle = list(letters)
    rng.shuffle(cycle)
    keys = list(groups) if groups is not None else [0] * n
    rank = {k: r for r, k in enumerate(dict.fromkeys(keys))}
    order = sorted(range(n), key=lambda i: (rank[keys[i]], i))
    out = [""] * n
    start = 0
    while start < n:
        end = start
        while end < n and keys[order[end]] == keys[order[start]]:
            end += 1
        block = [cycle[j % len(cycle)] for j in range(start, end)]
        rng.shuffle(block)
        for i, letter in zip(order[start:end], block):
            out[i] = letter
        start = end
    return out


def move_answer(options: list[str], answer: str, target: str, letters: tuple[str, ...] = LETTERS):
    """Swap the correct option into ``target``'s slot; return (options, target)."""
    i, j = letters.index(answer), letters.index(target)
    out = list(options)
    out[i], out[j] = out[j], out[i]
    return out, target


def letter_counts(answers: list[str], letters: tuple[str, ...] = LETTERS) -> dict[str, int]:
    return {x: sum(a == x for a in answers) for x in letters}
