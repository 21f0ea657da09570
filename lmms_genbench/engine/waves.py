"""One run of the cycle engine: the waves :func:`.planning.plan` cut, two in flight.

The calling thread describes; a drawer thread draws (in full generator batches,
starting as soon as a describer batch is done); loader threads read docs, seeds
and stored hops one wave ahead; a :class:`~.writer.StoreWriter` stores. Within a
wave every step is breadth-first. A wave holds its chains' latest hop in memory
until the next step uses it, so images are handed on without a store round trip
and memory holds about three waves whatever the number of docs. This module schedules;
the steps themselves are in :mod:`.steps`.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from ..core.signals import checkpoint
from .planning import Wave, resume
from .steps import WaveSteps

__all__ = ["WAVES_IN_FLIGHT", "WaveRunner", "sweep_temporary_files"]

#: waves in flight at once: one being described while the other is drawn
WAVES_IN_FLIGHT = 2


class _Inline:
    """Stands in for the drawer thread when describing and drawing must take turns."""

    @staticmethod
    def submit(fn, *args) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args))
        except Exception as exc:  # checked by the caller at once, like a thread's
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


class WaveRunner(WaveSteps):
    """The scheduler of one :meth:`CycleEngine.run`: describes on the calling
    thread, draws on a drawer thread, loads inputs on loader threads, stores
    through the writer. It schedules the steps of :class:`.steps.WaveSteps` (read input,
    describe, draw), handed what they use (:class:`.steps.WaveSteps`)."""

    def all(self, waves: list[Wave]) -> None:
        drawer = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="genbench-draw")
                  if self.policy.overlap else _Inline())
        loader = ThreadPoolExecutor(max_workers=2, thread_name_prefix="genbench-load")
        self.drawer, self.loader = drawer, loader
        try:
            self._schedule(deque(waves))
        except BaseException:
            # stop at once: queued drawings and loads are dropped (what is written stays)
            drawer.shutdown(wait=True, cancel_futures=True)
            loader.shutdown(wait=True, cancel_futures=True)
            raise
        drawer.shutdown(wait=True)
        loader.shutdown(wait=True)

    def _schedule(self, waiting: deque) -> None:
        active: list[Wave] = []
        if waiting:
            self._load(waiting[0])
        while waiting or active:
            self._check()
            for wave in [w for w in active if not w.busy() and w.step() is None]:
                self._retire(wave)
                active.remove(wave)
            ready = [w for w in active if not w.busy() and w.step() is not None]
            drawn = [w for w in ready if w.chains[0].outcome.spec.kind(w.step()) == "image"]
            for wave in drawn:
                self._draw_step(wave, wave.step())
            described = [w for w in ready if w not in drawn]
            if described:
                self._describe_step(described[0], described[0].step())
            elif drawn:
                continue
            elif waiting and len(active) < WAVES_IN_FLIGHT:
                wave = waiting.popleft()
                self._load(wave)
                if waiting:
                    self._load(waiting[0])  # the next wave's docs and seeds load meanwhile
                active.append(wave)
            elif active:
                in_flight = [f for w in active for f in w.draws if not f.done()]
                in_flight += [c.pending for w in active for c in w.chains if c.pending is not None]
                if in_flight:
                    wait(in_flight, return_when=FIRST_COMPLETED)

    def _check(self) -> None:
        """Raise what stops the run: a failed store write, or an error from the drawer
        thread (a generator that no retry fixes, an interrupt), or a signal held back."""
        checkpoint()
        self.writer.check()
        for future in [f for f in self._draws if f.done()]:
            self._draws.remove(future)
            future.result()

    def _retire(self, wave: Wave) -> None:
        for chain in wave.chains:
            if chain.pending is not None:
                self._take(chain, 0, "seed")  # a seed to store and nothing else to compute
            chain.carry = None
        # a chain's lock is released once the writer has stored its hops
        folders = [c.outcome.location.directory for c in wave.chains if not c.deferred]
        locks = self.locks
        self.writer.after(lambda: [locks.release(folder) for folder in folders])
        self.failed += sum(1 for c in wave.chains if c.outcome.failure is not None)
        self.bar.update(sum(1 for c in wave.chains if not c.deferred))
        if self.failed:
            self.bar.set_postfix_str(f"{self.failed} failed", refresh=False)

    def _load(self, wave: Wave) -> None:
        """Lock the wave's chains (skipping those another run holds), verify and repair them
        under their locks, and start reading every chain's next input (the doc's seed, or
        the stored hop)."""
        if wave.loaded:
            return
        wave.loaded = True
        for chain in wave.chains:
            directory = chain.outcome.location.directory
            if self.locks.try_acquire(directory) is False:
                chain.defer()
                continue
            sweep_temporary_files(directory)
            # another run may have stored or changed hops since the plan: verify again
            reused = resume(self.policy, chain, repair=True)
            self.stats.reused(reused)
            if chain.hop is None and not chain.seed_missing:
                continue
            if chain.carry is None and chain.pending is None:
                chain.pending = self.loader.submit(self._read_input, chain, chain.hop, chain.seed_missing)
            chain.seed_missing = False

def sweep_temporary_files(directory) -> None:
    """Remove the hidden ``.<name>.tmp`` files an interrupted write left in a chain's folder
    (called under the chain's lock, so no live write of another run is touched)."""
    try:
        for path in directory.glob(".*.tmp"):
            try:
                path.unlink()
            except OSError:
                pass
    except OSError:
        pass
