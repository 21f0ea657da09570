"""One run of the cycle engine: the waves :func:`.planning.plan` cut, two in flight.

The calling thread describes; a drawer thread draws (in full generator batches,
starting as soon as a describer batch is done); loader threads read docs, seeds
and stored hops one wave ahead; a :class:`~.writer.StoreWriter` stores. Within a
wave every step is breadth-first. A wave holds its chains' latest hop in memory
until the next step uses it, so images are handed on without a store round trip
and memory holds about three waves whatever the number of docs. This module only schedules:
the steps, and the threads they run on, are :class:`.steps.WaveSteps`.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import FIRST_COMPLETED, wait

from .planning import RunPolicy, Wave
from .steps import WaveSteps

__all__ = ["WAVES_IN_FLIGHT", "WaveRunner"]

#: waves in flight at once: one being described while the other is drawn
WAVES_IN_FLIGHT = 2


class WaveRunner:
    """The scheduler of one :meth:`CycleEngine.run`: which step of :class:`.steps.WaveSteps`
    runs next (describe on the calling thread, draw on the drawer thread, load the next wave
    on the loader threads), two waves in flight. It is handed what the steps use and builds
    them once per run, so their state (the first draw, the failed count) spans its calls."""

    def __init__(self, policy: RunPolicy, describer, generator, locks, writer, stats, bar) -> None:
        self.steps = WaveSteps(policy, describer, generator, locks, writer, stats, bar)

    def all(self, waves: list[Wave]) -> None:
        self.steps.open()
        try:
            self._schedule(deque(waves))
        except BaseException:
            self.steps.close(cancel=True)  # stop at once: queued drawings and loads are dropped
            raise
        self.steps.close()

    def _schedule(self, waiting: deque) -> None:
        steps = self.steps
        active: list[Wave] = []
        if waiting:
            steps.load(waiting[0])
        while waiting or active:
            steps.check()
            for wave in [w for w in active if not w.busy() and w.step() is None]:
                steps.retire(wave)
                active.remove(wave)
            ready = [w for w in active if not w.busy() and w.step() is not None]
            drawn = [w for w in ready if w.chains[0].outcome.spec.kind(w.step()) == "image"]
            for wave in drawn:
                steps.draw_step(wave, wave.step())
            described = [w for w in ready if w not in drawn]
            if described:
                steps.describe_step(described[0], described[0].step())
            elif drawn:
                continue
            elif waiting and len(active) < WAVES_IN_FLIGHT:
                wave = waiting.popleft()
                steps.load(wave)
                if waiting:
                    steps.load(waiting[0])  # the next wave's docs and seeds load meanwhile
                active.append(wave)
            elif active:
                in_flight = [f for w in active for f in w.draws if not f.done()]
                in_flight += [c.pending for w in active for c in w.chains if c.pending is not None]
                if in_flight:
                    wait(in_flight, return_when=FIRST_COMPLETED)
