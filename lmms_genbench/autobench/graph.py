"""Semantic-graph exclusion for diverse descriptions (AutoBench-V §3.2, Algorithm 1).

Each description round adds its topic word and keywords as nodes, the topic
linked to every keyword (the authors' code links exactly these pairs). After
round ``e`` the ``f(e)`` highest-degree nodes (default ``f(e) = e``, the
paper's example) leave the graph and join a growing list of words the next
description prompts must avoid. Pure: no model, no randomness.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


def _norm(word: str) -> str:
    return " ".join(str(word).lower().split())


class SemanticGraph:
    """Undirected word graph with degree-based exclusion.

    Args:
        exclude_count: ``f(e)``: how many top-degree nodes round ``e`` (1-based)
            withholds; default ``e`` as in the paper's example.
    """

    def __init__(self, exclude_count: Callable[[int], int] | None = None) -> None:
        self.exclude_count = exclude_count or (lambda e: e)
        self.edges: dict[str, set[str]] = {}
        self._order: dict[str, int] = {}  # first-seen order breaks degree ties
        self.excluded: list[str] = []
        self.rounds = 0

    def degree(self, word: str) -> int:
        return len(self.edges.get(_norm(word), ()))

    def _add_node(self, word: str) -> None:
        self.edges.setdefault(word, set())
        self._order.setdefault(word, len(self._order))

    def add_round(self, topic: str, keywords: Iterable[str]) -> list[str]:
        """Add one round's words, withhold the top-degree nodes; return them.

        Words already withheld stay out (they are not re-added), so the avoid
        list only grows.
        """
        self.rounds += 1
        withheld = set(self.excluded)
        t = _norm(topic)
        ks = [k for k in dict.fromkeys(_norm(k) for k in keywords) if k and k != t]
        if t and t not in withheld:
            self._add_node(t)
        for k in ks:
            if k in withheld:
                continue
            self._add_node(k)
            if t and t not in withheld:
                self.edges[t].add(k)
                self.edges[k].add(t)
        n = max(0, int(self.exclude_count(self.rounds)))
        ranked = sorted(self.edges, key=lambda w: (-len(self.edges[w]), self._order[w]))
        out = ranked[:n]
        for w in out:
            for other in self.edges.pop(w):
                self.edges.get(other, set()).discard(w)
        self.excluded.extend(out)
        return out

    @property
    def avoid_words(self) -> list[str]:
        """Words the next description prompt must not use, in exclusion order."""
        return list(self.excluded)

    def to_dict(self) -> dict:
        return {
            "rounds": self.rounds,
            "excluded": list(self.excluded),
            "nodes": {w: sorted(v) for w, v in sorted(self.edges.items())},
        }
