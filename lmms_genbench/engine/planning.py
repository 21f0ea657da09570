"""Where each chain of a run resumes, and the chains with work cut into waves.

Before a run, every chain's stored hops are verified (:func:`.verify.check_chain`)
to find its first hop to compute; chains with nothing to do are counted and left
out, the others are cut into :class:`Wave`s of one direction each, in job order.
:mod:`.waves` runs the waves; :class:`ChainState` is what it moves along. Both read the
run's settings from a frozen :class:`RunPolicy`, never from the engine itself.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..core.errors import printable
from ..core.secrets import scrub
from ..store import ChainFailure, check_chain

__all__ = ["ChainState", "RunPolicy", "Wave", "chunked", "load_lazy", "plan", "resume"]


@dataclass(frozen=True)
class RunPolicy:
    """What one run of the engine may do, fixed for the run (:class:`.cycle.CycleEngine`'s
    arguments of the same names): images per describer call, the last hop it may compute,
    whether drawing overlaps describing, and whether a one-colour image fails its chain."""

    describer_batch: int = 16
    stop_after_hop: int | None = None
    overlap: bool = True
    reject_blank: bool = True

    def may_compute(self, hop: int) -> bool:
        return self.stop_after_hop is None or hop <= self.stop_after_hop


def chunked(items: Sequence, size: int) -> Iterable[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def load_lazy(role) -> None:
    """Load a describer or generator that loads at first use (``engine.describer``'s and
    ``generators.lazy``'s ``load``); anything else is ready already. Called only where the
    run has work for the role, so a run served from the store loads neither."""
    load = getattr(role, "load", None)
    if callable(load):
        load()


class ChainState:
    """One chain during a run: the next hop to compute and that hop's input."""

    __slots__ = ("outcome", "load_seed", "seed_missing", "hop", "carry", "pending", "deferred", "repair")

    def __init__(self, outcome, load_seed: Callable[[], Any]) -> None:
        self.outcome = outcome
        self.load_seed = load_seed
        self.seed_missing = False
        self.hop: int | None = None  # next hop to compute; None: nothing left
        self.carry: Any = None  # hop - 1's image or text, in memory
        self.pending: Future | None = None  # that input, being loaded
        self.deferred = False  # another run holds the chain: read it once that run is done
        self.repair = False  # stored hops to move aside or record, under the chain's lock

    @property
    def kind(self) -> str:
        return self.outcome.spec.kind(self.hop)

    def fail(self, hop: int, stage: str, reason: str) -> None:
        # reasons reach logs, reports and runs.jsonl: never a credential an endpoint echoed,
        # never a control character or escape sequence it answered
        self.outcome.failure = ChainFailure(hop, stage, printable(scrub(reason)))
        self.hop, self.carry, self.pending = None, None, None

    def defer(self) -> None:
        self.deferred, self.hop, self.carry, self.pending, self.seed_missing = True, None, None, None, False


class Wave:
    """Chains that run together, breadth-first, and the drawings of theirs in flight."""

    def __init__(self, chains: list[ChainState]) -> None:
        self.chains = chains
        self.draws: list[Future] = []
        self.loaded = False

    def busy(self) -> bool:
        return any(not f.done() for f in self.draws)

    def step(self) -> int | None:
        """The next hop any of its chains needs (breadth-first within the wave)."""
        return min((c.hop for c in self.chains if c.hop is not None), default=None)


def resume(policy: RunPolicy, chain: ChainState, repair: bool) -> int:
    """Verify the chain's stored hops (:func:`.verify.check_chain`) and set where it resumes:
    ``seed_missing`` and ``hop``, the first hop to compute. Returns the stored hops this run
    may reuse. ``repair`` (under the chain's lock) moves refused hops aside and records
    unrecorded ones; without it the chain is only marked to be repaired."""
    outcome = chain.outcome
    spec = outcome.spec
    check = check_chain(outcome.location.directory, spec.kind, spec.hops, repair=repair, missing_seed_ok=True)
    valid = max(check.valid, 1)  # a refused or absent seed is read from the doc again
    outcome.verified = valid
    outcome.repaired = outcome.repaired or bool(check.moved)
    chain.repair = not repair and check.needs_repair
    chain.seed_missing = check.valid == 0 or check.seed_missing
    chain.hop = valid if valid <= spec.hops and policy.may_compute(valid) else None
    limit = spec.hops if policy.stop_after_hop is None else min(spec.hops, policy.stop_after_hop)
    stored = max(min(valid, limit + 1) - (1 if chain.seed_missing else 0), 0)
    outcome.reused = stored
    return stored


def plan(policy: RunPolicy, chains: list[ChainState], size: int, stats) -> tuple[list[Wave], int]:
    """Each chain's first hop to compute, and the chains with work cut into waves
    (one direction per wave, in job order); also how many have nothing to do. Chains are
    verified without their locks here, read only: one with work or with hops to repair is
    verified again, and repaired, once its wave holds its lock."""
    by_direction: dict[str, list[ChainState]] = {}
    idle = 0
    for chain in chains:
        chain.deferred = False
        reused = resume(policy, chain, repair=False)
        if chain.hop is None and not chain.seed_missing and not chain.repair:
            stats.reused(reused)
            idle += 1
        else:
            by_direction.setdefault(chain.outcome.spec.direction, []).append(chain)
    waves = [Wave(list(part)) for group in by_direction.values() for part in chunked(group, size)]
    return waves, idle
