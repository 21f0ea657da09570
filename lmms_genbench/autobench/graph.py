"""Semantic-graph exclusion for diverse descriptions (AutoBench-V §3.2, Algorithm 1).

Each description round adds its topic word and keywords as nodes, the topic
linked to every keyword (the authors' code links exactly these pairs). After
round ``e`` the ``f(e)`` highest-degree nodes (default ``f(e) = e``, the
paper's example) join the list of words the next description prompts must
avoid. As the authors' code (``generate_prompt_with_topic_words``) does by
default, those nodes stay in the graph, so the list is the union of each
round's top nodes (at most ``f(e)`` words after round ``e`` while the leaders
hold); with ``withhold=True`` they leave the graph, which lets new words rise
and the list grow by ``f(e)`` every round. Pure: no model, no randomness.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


def _norm(word: str) -> str:
    return " ".join(str(word).lower().split())


class SemanticGraph:
    """Undirected word graph with degree-based exclusion.

    Args:
        exclude_count: ``f(e)``: how many top-degree nodes round ``e`` (1-based)
            puts on the avoid list; default ``e`` as in the paper's example.
        withhold: remove those nodes from the graph (and never re-add them) instead of
            keeping them as the authors do; the list then grows by ``f(e)`` every round.
    """

    def __init__(self, exclude_count: Callable[[int], int] | None = None, withhold: bool = False) -> None:
        self.exclude_count = exclude_count or (lambda e: e)
        self.withhold = withhold
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
        """Add one round's words and put the top-degree nodes on the avoid list; return
        the words newly added to it.

        With ``withhold`` the top nodes leave the graph and words already withheld
        are not re-added; either way the avoid list only grows.
        """
        self.rounds += 1
        withheld = set(self.excluded) if self.withhold else set()
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
        if not self.withhold:
            listed = set(self.excluded)
            out = [w for w in ranked[:n] if w not in listed]
            self.excluded.extend(out)
            return out
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
            "withhold": self.withhold,
            "excluded": list(self.excluded),
            "nodes": {w: sorted(v) for w, v in sorted(self.edges.items())},
        }
