"""The cycle engine: describe/draw chains over many docs, batched and pipelined.

Chains are cut into waves of a few batches. Within a wave every step is
breadth-first (all its pending descriptions go to the describer in batches,
all its drawings to the generator in batches); two waves are in flight, so the
generator draws one wave while the describer describes the other, and drawing
starts as soon as a describer batch is done. Only the waves in flight hold
images, so memory does not grow with the number of docs: a doc and its seed
image are read when their wave is about to run, in a loader thread
(:mod:`.planning` cuts the waves, :mod:`.waves` runs them).

Each hop's input is handed on in memory (a seed reaches the describer as a
decoded image, never through a PNG round trip); every text and image is also
stored atomically by a writer thread (:mod:`.writer`), in hop order, so an
interrupted run resumes at each chain's first missing hop and recomputes nothing.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Sequence

from ..core.progress import progress_bar
from ..generators.base import Generator
from ..store import Chain, ChainFailure, ChainLocation, ChainLocks, StoreWriter
from .describer import Describer
from .protocol import ChainSpec
from .planning import ChainState, RunPolicy, chunked, load_lazy, plan
from .steps import generation_seed
from .steps import batch_size_of
from .waves import WaveRunner

logger = logging.getLogger(__name__)

__all__ = ["ChainJob", "ChainOutcome", "CycleEngine", "RunStats", "chunked", "generation_seed", "wave_size"]

@dataclass
class ChainJob:
    """One doc's chain to complete. ``load_seed`` is called only if hop 0 is not stored,
    in a loader thread, shortly before the chain's first step runs."""

    key: str
    spec: ChainSpec
    location: ChainLocation
    load_seed: Callable[[], Any]


@dataclass
class ChainOutcome:
    """A chain as far as it got; :meth:`to_chain` is the doc's answer."""

    key: str
    spec: ChainSpec
    location: ChainLocation
    failure: ChainFailure | None = None
    verified: int | None = None  # hops 0..verified-1 checked or computed by this run
    repaired: bool = False  # this run moved refused hops aside
    reused: int = 0  # stored hops this run took as they were
    described: int = 0  # texts this run computed
    drawn: int = 0  # images this run computed

    @property
    def ok(self) -> bool:
        return self.failure is None

    def stored_hops(self) -> int:
        """Hops stored for this chain, gap-free from hop 0 and at most the spec's length;
        only those this run verified or computed."""
        hop = 0
        limit = self.spec.hops if self.verified is None else min(self.spec.hops, self.verified - 1)
        while hop <= limit and self.location.has(hop, self.spec.kind(hop)):
            hop += 1
        return hop

    def to_chain(self, task: str = "") -> Chain:
        """The doc's answer: where the chain lives, how far it got, and why it stopped."""
        return Chain(
            chain_id=self.key,
            direction=self.spec.direction,
            length=self.spec.hops,
            hops=self.stored_hops(),
            namespace=str(self.location.directory.parent),
            folder=self.location.directory.name,
            task=task,
            failure=self.failure,
            scorer=self.spec.scorer,
        )


@dataclass
class RunStats:
    """What one run computed and where its time went (for resume checks and benchmarks).

    The engine's parts report events (:meth:`hop_computed`, :meth:`described`, ...), never set a
    figure themselves: the figures change here only, under one lock, as the describer's, the
    drawer's and the loader's threads all report (``tests/unit/engine/test_run_stats.py``).
    """

    chains: int = 0
    hops_reused: int = 0
    seeds_stored: int = 0
    describe_calls: int = 0
    describe_items: int = 0
    describe_words: int = 0  # whitespace-split words of the accepted descriptions
    generate_calls: int = 0
    generate_items: int = 0
    hops_computed: int = 0
    chains_waited: int = 0  # chains another run held, read once it released them
    chains_repaired: int = 0  # chains whose refused hops were moved aside and recomputed
    describe_seconds: float = 0.0
    generate_seconds: float = 0.0
    wall_seconds: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_lock"}

    # -- events ------------------------------------------------------------------------
    def _add(self, **amounts: float) -> None:
        """Add ``amounts`` to the figures they name, under the lock (the events' one way in)."""
        with self._lock:
            for figure, amount in amounts.items():
                if figure not in _COUNTED:
                    raise AttributeError(f"RunStats has no figure {figure!r} to add to")
                setattr(self, figure, getattr(self, figure) + amount)

    def began(self, chains: int) -> None:
        """The run holds ``chains`` distinct chains (repeated docs counted once)."""
        with self._lock:
            self.chains = chains

    def reused(self, hops: int) -> None:
        """``hops`` stored hops were verified and kept (a plan's or a wave's resume)."""
        self._add(hops_reused=hops)

    def seed_stored(self) -> None:
        """A chain's seed image (hop 0) was stored from its doc."""
        self._add(seeds_stored=1)

    def hop_computed(self) -> None:
        """One hop (a description or an image) was computed and queued for the store."""
        self._add(hops_computed=1)

    def described(self, seconds: float, items: int) -> None:
        """One describer call took ``seconds`` for ``items`` images."""
        self._add(describe_seconds=seconds, describe_calls=1, describe_items=items)

    def description_kept(self, text: str) -> None:
        """A description passed the checks and is stored (its words counted)."""
        self._add(describe_words=len(text.split()))

    def drew(self, seconds: float, items: int) -> None:
        """One generator call took ``seconds`` for ``items`` prompts."""
        self._add(generate_seconds=seconds, generate_calls=1, generate_items=items)

    def waited(self, chains: int) -> None:
        """``chains`` were held by another run and are read once it releases them."""
        self._add(chains_waited=chains)

    def repaired(self, chains: int) -> None:
        """``chains`` had refused hops moved aside and recomputed."""
        self._add(chains_repaired=chains)

    def chain_failed(self, stage: str) -> None:
        """A chain ended failed at ``stage`` (``describe``, ``generate``, ``incomplete``, ...)."""
        with self._lock:
            self.failures[stage] = self.failures.get(stage, 0) + 1

    def finished(self, wall_seconds: float) -> None:
        """The run ended after ``wall_seconds``."""
        with self._lock:
            self.wall_seconds = wall_seconds


#: the RunStats figures events add to (the others are set or keyed)
_COUNTED = frozenset(f.name for f in fields(RunStats)) - {"chains", "wall_seconds", "failures", "_lock"}


def wave_size(describer_batch: int, generator_batch: int) -> int:
    """Chains per wave: a multiple of both batch sizes where that stays small, so
    every call but a wave's last is full."""
    both = describer_batch * generator_batch // math.gcd(describer_batch, generator_batch)
    largest = max(describer_batch, generator_batch)
    return both if both <= 4 * largest else largest


class CycleEngine:
    """Runs :class:`ChainJob` s to completion with a describer and a generator.

    Args:
        describer: turns images into texts (see :class:`Describer`).
        generator: turns texts into images (see ``lmms_genbench.generators``).
        describer_batch: images per describer call; the describer may batch
            further inside.
        stop_after_hop: if set, compute no hop beyond this one in this run
            (a budgeted or staged run); unfinished chains report ``incomplete``.
        overlap: draw in a worker thread while the describer works (the hop
            order per chain is unchanged); off, describing and drawing take turns.
        reject_blank: fail a chain whose generator returns a one-colour image
            (safety filters blank their output) instead of describing it.
        wave: chains per wave (default :func:`wave_size`); memory holds about
            three waves of images whatever the number of docs.
        progress: show a progress bar of finished chains on stderr (never under
            ``--verbosity ERROR``).
    """

    def __init__(
        self,
        describer: Describer,
        generator: Generator,
        describer_batch: int = 16,
        stop_after_hop: int | None = None,
        overlap: bool = True,
        reject_blank: bool = True,
        wave: int | None = None,
        progress: bool = True,
    ) -> None:
        if describer_batch < 1:
            raise ValueError(f"describer_batch must be >= 1, got {describer_batch!r}")
        if stop_after_hop is not None and stop_after_hop < 0:
            raise ValueError(f"stop_after_hop must be >= 0, got {stop_after_hop!r}")
        if wave is not None and wave < 1:
            raise ValueError(f"wave must be >= 1, got {wave!r}")
        self.describer = describer
        self.generator = generator
        self.describer_batch = describer_batch
        self.stop_after_hop = stop_after_hop
        self.overlap = overlap
        self.reject_blank = reject_blank
        self.wave = wave
        self.progress = progress
        self.locks = ChainLocks()

    def policy(self) -> RunPolicy:
        """This engine's settings, frozen for one run: what planning and the waves read."""
        return RunPolicy(self.describer_batch, self.stop_after_hop, self.overlap, self.reject_blank)

    def may_compute(self, hop: int) -> bool:
        return self.policy().may_compute(hop)

    def run(self, jobs: Sequence[ChainJob]) -> tuple[list[ChainOutcome], RunStats]:
        started = time.perf_counter()
        stats = RunStats()
        # the same doc may arrive twice (lmms-eval pads ranks with repeats)
        chains: dict[str, ChainState] = {}
        for job in jobs:
            where = str(job.location.directory)
            if where not in chains:
                chains[where] = ChainState(ChainOutcome(job.key, job.spec, job.location), job.load_seed)
        live = list(chains.values())
        stats.began(len(live))

        policy = self.policy()
        size = self.wave or wave_size(policy.describer_batch, batch_size_of(self.generator))
        bar = progress_bar(len(live), "cycle: chains", "chain", self.progress)
        try:
            with StoreWriter(max_pending=2 * size) as writer:
                runner = WaveRunner(policy, self.describer, self.generator, self.locks, writer, stats, bar)
                todo = live
                while todo:
                    waves, idle = plan(policy, todo, size, stats)
                    bar.update(idle)
                    # a lazy generator loads before the first describe when there is something
                    # to draw: its load errors and size rules stop the run before any describing,
                    # as when it was built at start; a run with nothing to draw never loads it
                    if any(_draws_ahead(chain) for wave in waves for chain in wave.chains):
                        load_lazy(self.generator)
                    runner.all(waves)
                    todo = [c for c in todo if c.deferred]
                    if todo:  # held by another run: wait until it is done, then read what it stored
                        logger.info("waiting for %d chains another run is computing", len(todo))
                        stats.waited(len(todo))
                        for chain in todo:
                            self.locks.wait(chain.outcome.location.directory)
        finally:
            self.locks.release_all()
            bar.close()

        for chain in live:
            outcome = chain.outcome
            stats.repaired(outcome.repaired)
            if outcome.failure is None:
                missing = next(
                    (h for h in range(outcome.spec.hops + 1)
                     if h >= (outcome.verified or 0) or not outcome.location.has(h, outcome.spec.kind(h))),
                    None,
                )
                if missing is not None:
                    outcome.failure = ChainFailure(
                        missing, "incomplete", f"stopped before hop {missing} (stop_after_hop={policy.stop_after_hop})"
                    )
            if outcome.failure is not None:
                stats.chain_failed(outcome.failure.stage)

        stats.finished(time.perf_counter() - started)
        return [chains[str(j.location.directory)].outcome for j in jobs], stats


def _draws_ahead(chain) -> bool:
    """Whether a chain with work has an image hop left to draw."""
    spec = chain.outcome.spec
    return any(spec.kind(h) == "image" for h in range(max(chain.hop or 1, 1), spec.hops + 1))
