"""The cycle engine: describe/draw chains over many docs, batched and pipelined.

Chains are cut into waves of a few batches. Within a wave every step is
breadth-first (all its pending descriptions go to the describer in batches,
all its drawings to the generator in batches); two waves are in flight, so the
generator draws one wave while the describer describes the other, and drawing
starts as soon as a describer batch is done. Only the waves in flight hold
images, so memory does not grow with the number of docs: a doc and its seed
image are read when their wave is about to run, in a loader thread.

Each hop's input is handed on in memory (a seed reaches the describer as a
decoded image, never through a PNG round trip); every text and image is also
stored atomically by a writer thread (:mod:`.writer`), in hop order, so an
interrupted run resumes at each chain's first missing hop and recomputes nothing.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..core.keys import stable_hash
from ..core.progress import progress_bar
from ..generators.base import GenerationFailure, Generator, GeneratorConfigError
from .chain import Chain, ChainFailure
from .describer import Describer
from .images import BadImageError, check_utf8, is_blank, normalize_image
from .protocol import ChainSpec
from .store import ChainLocation
from .writer import StoreWriter

logger = logging.getLogger(__name__)

#: waves in flight at once: one being described while the other is drawn
WAVES_IN_FLIGHT = 2


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

    @property
    def ok(self) -> bool:
        return self.failure is None

    def stored_hops(self) -> int:
        """Hops stored for this chain, gap-free from hop 0 and at most the spec's length."""
        hop = 0
        while hop <= self.spec.hops and self.location.has(hop, self.spec.kind(hop)):
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
    """What one run computed and where its time went (for resume checks and benchmarks)."""

    chains: int = 0
    hops_reused: int = 0
    seeds_stored: int = 0
    describe_calls: int = 0
    describe_items: int = 0
    generate_calls: int = 0
    generate_items: int = 0
    describe_seconds: float = 0.0
    generate_seconds: float = 0.0
    wall_seconds: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def chunked(items: Sequence, size: int) -> Iterable[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def generation_seed(spec: ChainSpec, key: str, hop: int) -> int:
    """Per-doc, per-hop seed: reproducible and independent of batching and rank."""
    digest = hashlib.sha256(f"{spec.seed}|{key}|{hop}".encode()).hexdigest()
    return int(digest[:8], 16) & 0x7FFFFFFF


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

    @property
    def generator_batch(self) -> int:
        return max(1, int(getattr(self.generator, "batch_size", 1)))

    def may_compute(self, hop: int) -> bool:
        return self.stop_after_hop is None or hop <= self.stop_after_hop

    def run(self, jobs: Sequence[ChainJob]) -> tuple[list[ChainOutcome], RunStats]:
        started = time.perf_counter()
        stats = RunStats()
        # the same doc may arrive twice (lmms-eval pads ranks with repeats)
        chains: dict[str, _Live] = {}
        for job in jobs:
            where = str(job.location.directory)
            if where not in chains:
                chains[where] = _Live(ChainOutcome(job.key, job.spec, job.location), job.load_seed)
        live = list(chains.values())
        stats.chains = len(live)

        size = self.wave or wave_size(self.describer_batch, self.generator_batch)
        waves, idle = _plan(self, live, size, stats)
        bar = progress_bar(len(live), "cycle: chains", "chain", self.progress)
        bar.update(idle)
        try:
            with StoreWriter(max_pending=2 * size) as writer:
                _Run(self, writer, stats, bar).all(waves)
        finally:
            bar.close()

        for chain in live:
            outcome = chain.outcome
            if outcome.failure is None:
                missing = next(
                    (h for h in range(outcome.spec.hops + 1) if not outcome.location.has(h, outcome.spec.kind(h))),
                    None,
                )
                if missing is not None:
                    outcome.failure = ChainFailure(
                        missing, "incomplete", f"stopped before hop {missing} (stop_after_hop={self.stop_after_hop})"
                    )
            if outcome.failure is not None:
                stats.failures[outcome.failure.stage] = stats.failures.get(outcome.failure.stage, 0) + 1

        stats.wall_seconds = time.perf_counter() - started
        return [chains[str(j.location.directory)].outcome for j in jobs], stats


# -- one run ----------------------------------------------------------------------


class _Live:
    """One chain during a run: the next hop to compute and that hop's input."""

    __slots__ = ("outcome", "load_seed", "seed_missing", "hop", "carry", "pending")

    def __init__(self, outcome: ChainOutcome, load_seed: Callable[[], Any]) -> None:
        self.outcome = outcome
        self.load_seed = load_seed
        self.seed_missing = False
        self.hop: int | None = None  # next hop to compute; None: nothing left
        self.carry: Any = None  # hop - 1's image or text, in memory
        self.pending: Future | None = None  # that input, being loaded

    @property
    def kind(self) -> str:
        return self.outcome.spec.kind(self.hop)

    def fail(self, hop: int, stage: str, reason: str) -> None:
        self.outcome.failure = ChainFailure(hop, stage, reason)
        self.hop, self.carry, self.pending = None, None, None


@dataclass
class _Loaded:
    """What a loader thread produced for one chain: its next input, or why not."""

    value: Any = None
    failure: ChainFailure | None = None
    seed_stored: bool = False


class _Wave:
    def __init__(self, chains: list[_Live]) -> None:
        self.chains = chains
        self.draws: list[Future] = []
        self.loaded = False

    def busy(self) -> bool:
        return any(not f.done() for f in self.draws)

    def step(self) -> int | None:
        """The next hop any of its chains needs (breadth-first within the wave)."""
        return min((c.hop for c in self.chains if c.hop is not None), default=None)


def next_hop(engine: CycleEngine, outcome: ChainOutcome, start: int) -> tuple[int | None, int]:
    """The first hop from ``start`` not yet stored that this run may compute, and
    how many stored hops were passed on the way."""
    hop = start
    while hop <= outcome.spec.hops and engine.may_compute(hop):
        if not outcome.location.has(hop, outcome.spec.kind(hop)):
            return hop, hop - start
        hop += 1
    return None, hop - start


def _plan(engine: CycleEngine, chains: list[_Live], size: int, stats: RunStats) -> tuple[list[_Wave], int]:
    """Each chain's first hop to compute, and the chains with work cut into waves
    (one direction per wave, in job order); also how many have nothing to do."""
    by_direction: dict[str, list[_Live]] = {}
    idle = 0
    for chain in chains:
        outcome = chain.outcome
        chain.seed_missing = not outcome.location.has(0, outcome.spec.kind(0))
        if not chain.seed_missing:
            stats.hops_reused += 1
        chain.hop, reused = next_hop(engine, outcome, 1)
        stats.hops_reused += reused
        if chain.hop is None and not chain.seed_missing:
            idle += 1
        else:
            by_direction.setdefault(outcome.spec.direction, []).append(chain)
    waves = [_Wave(list(part)) for group in by_direction.values() for part in chunked(group, size)]
    return waves, idle


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


class _Run:
    """The scheduler of one :meth:`CycleEngine.run`: describes on the calling
    thread, draws on a drawer thread, loads inputs on loader threads, stores
    through the writer."""

    def __init__(self, engine: CycleEngine, writer: StoreWriter, stats: RunStats, bar) -> None:
        self.engine = engine
        self.writer = writer
        self.stats = stats
        self.bar = bar
        self.failed = 0
        self._lock = threading.Lock()
        self._draws: list[Future] = []
        self._describe_keys: dict[int, str] = {}

    def all(self, waves: list[_Wave]) -> None:
        drawer = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="genbench-draw")
                  if self.engine.overlap else _Inline())
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
        active: list[_Wave] = []
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
        thread (a generator that no retry fixes, an interrupt)."""
        self.writer.check()
        for future in [f for f in self._draws if f.done()]:
            self._draws.remove(future)
            future.result()

    def _retire(self, wave: _Wave) -> None:
        for chain in wave.chains:
            if chain.pending is not None:
                self._take(chain, 0, "seed")  # a seed to store and nothing else to compute
            chain.carry = None
        self.failed += sum(1 for c in wave.chains if c.outcome.failure is not None)
        self.bar.update(len(wave.chains))
        if self.failed:
            self.bar.set_postfix_str(f"{self.failed} failed", refresh=False)

    # -- inputs -------------------------------------------------------------------

    def _load(self, wave: _Wave) -> None:
        """Start reading every chain's next input (the doc's seed, or the stored hop)."""
        if wave.loaded:
            return
        wave.loaded = True
        for chain in wave.chains:
            if chain.carry is None and chain.pending is None:
                chain.pending = self.loader.submit(self._read_input, chain, chain.hop, chain.seed_missing)
            chain.seed_missing = False

    def _read_input(self, chain: _Live, hop: int | None, seed_missing: bool) -> _Loaded:
        """In a loader thread: store a missing seed, and return hop ``hop``'s input."""
        outcome = chain.outcome
        loaded = _Loaded()
        if seed_missing:
            try:
                seed = read_seed(outcome, chain.load_seed)
            except Exception as exc:  # any bad doc fails alone
                return _Loaded(failure=ChainFailure(0, "seed", f"{type(exc).__name__}: {exc}"))
            if isinstance(seed, str):
                self.writer.write_text(outcome.location, 0, seed)
            else:
                self.writer.write_image(outcome.location, 0, seed)
            loaded.seed_stored = True
            if hop == 1:
                loaded.value = seed
                return loaded
        if hop is None:
            return loaded
        kind = outcome.spec.kind(hop - 1)
        try:
            if kind == "image":
                loaded.value = outcome.location.read_image(hop - 1)
            else:
                loaded.value = outcome.location.read_text(hop - 1)
        except Exception as exc:
            stage = "describe" if kind == "image" else "generate"
            loaded.failure = ChainFailure(hop, stage, f"stored {kind} unreadable: {exc}")
        return loaded

    def _take(self, chain: _Live, hop: int, stage: str) -> Any:
        """Chain's input for ``hop`` (and forget it); None after recording a failure."""
        if chain.pending is not None:
            loaded = chain.pending.result()
            chain.pending = None
            if loaded.seed_stored:
                with self._lock:
                    self.stats.seeds_stored += 1
            if loaded.failure is not None:
                chain.fail(loaded.failure.hop, loaded.failure.stage, loaded.failure.reason)
                return None
            return loaded.value
        value, chain.carry = chain.carry, None
        if value is None and chain.hop is not None:
            chain.fail(hop, stage, "input missing (not stored, not in memory)")
        return value

    def _advance(self, chain: _Live, done: int, value: Any) -> None:
        """Hop ``done`` is computed (``value``, queued for the store): move on."""
        chain.hop, reused = next_hop(self.engine, chain.outcome, done + 1)
        if reused:
            with self._lock:  # the describer's and the drawer's threads both count
                self.stats.hops_reused += reused
        if chain.hop == done + 1:
            chain.carry = value
        elif chain.hop is not None:
            # the next hop's input was stored by an earlier run
            chain.pending = self.loader.submit(self._read_input, chain, chain.hop, False)

    # -- describing -----------------------------------------------------------------

    def _describe_key(self, spec: ChainSpec) -> str:
        key = self._describe_keys.get(id(spec))
        if key is None:
            key = self._describe_keys[id(spec)] = stable_hash([spec.describe_prompt, spec.describer_kwargs])
        return key

    def _describe_step(self, wave: _Wave, hop: int) -> None:
        """Describe the wave's chains at ``hop``; draw ``hop + 1`` in full generator
        batches on the drawer thread as the descriptions come."""
        engine = self.engine
        batch = engine.generator_batch
        todo = [c for c in wave.chains if c.hop == hop]
        # chains whose description is stored already can be drawn right away
        ready = [c for c in wave.chains if c.hop == hop + 1 and c.kind == "image"]

        def submit(chains):
            future = self.drawer.submit(self._draw, hop + 1, list(chains))
            wave.draws.append(future)
            self._draws.append(future)

        groups: dict[str, list[_Live]] = {}
        for chain in todo:
            groups.setdefault(self._describe_key(chain.outcome.spec), []).append(chain)
        for group in groups.values():
            spec = group[0].outcome.spec
            for chunk in chunked(group, engine.describer_batch):
                self._check()  # e.g. GeneratorConfigError from the drawer: stop describing at once
                while len(ready) >= batch:
                    submit(ready[:batch])
                    del ready[:batch]
                images, described = [], []
                for chain in chunk:
                    image = self._take(chain, hop, "describe")
                    if image is not None:
                        images.append(image)
                        described.append(chain)
                if not described:
                    continue
                t0 = time.perf_counter()
                texts = engine.describer.describe(images, spec.describe_prompt, spec.describer_kwargs)
                self.stats.describe_seconds += time.perf_counter() - t0
                self.stats.describe_calls += 1
                self.stats.describe_items += len(described)
                del images
                for chain, text in zip(described, texts):
                    reason = reject_text(chain.outcome.spec, text)
                    if reason:
                        chain.fail(hop, "describe", reason)
                        continue
                    text = text.strip()
                    self.writer.write_text(chain.outcome.location, hop, text)
                    self._advance(chain, hop, text)
                    if chain.hop == hop + 1:
                        ready.append(chain)
        while ready:
            submit(ready[:batch])
            del ready[:batch]
        self._check()

    # -- drawing ------------------------------------------------------------------

    def _draw_step(self, wave: _Wave, hop: int) -> None:
        for chunk in chunked([c for c in wave.chains if c.hop == hop], self.engine.generator_batch):
            future = self.drawer.submit(self._draw, hop, list(chunk))
            wave.draws.append(future)
            self._draws.append(future)

    def _draw(self, hop: int, chains: list[_Live]) -> None:
        """On the drawer thread: one generator call for ``chains`` at ``hop``."""
        engine, stats = self.engine, self.stats
        prompts, seeds, drawn = [], [], []
        for chain in chains:
            description = self._take(chain, hop, "generate")
            if description is None:
                continue
            spec = chain.outcome.spec
            prompts.append(spec.generate_prompt.format(description=description))
            seeds.append(generation_seed(spec, chain.outcome.key, hop))
            drawn.append(chain)
        if not drawn:
            return
        t0 = time.perf_counter()
        try:
            images = engine.generator.generate(prompts, seeds)
        except GeneratorConfigError:
            raise  # nothing will draw: stop, keeping every stored hop
        except Exception as exc:  # a backend that raised instead of returning failures
            images = [GenerationFailure(f"generator error: {type(exc).__name__}: {exc}")] * len(drawn)
        stats.generate_seconds += time.perf_counter() - t0
        stats.generate_calls += 1
        stats.generate_items += len(drawn)
        for chain, image in zip(drawn, images):
            if isinstance(image, GenerationFailure):
                chain.fail(hop, "generate", image.reason)
                continue
            try:
                image = normalize_image(image)
            except BadImageError as exc:
                chain.fail(hop, "generate", f"generator returned a bad image: {exc}")
                continue
            if engine.reject_blank and is_blank(image):
                chain.fail(hop, "generate", "generator returned a blank image (one colour, e.g. a safety filter)")
                continue
            self.writer.write_image(chain.outcome.location, hop, image)
            self._advance(chain, hop, image)


# -- checks -------------------------------------------------------------------------


def read_seed(outcome: ChainOutcome, load: Callable[[], Any]):
    """The doc's normalised seed (image or text); raises with the reason."""
    source = load()
    if outcome.spec.kind(0) == "image":
        if isinstance(source, (list, tuple)):
            if not source:
                raise BadImageError("the doc has no image")
            source = source[0]
        return normalize_image(source, outcome.spec.max_seed_side)
    if isinstance(source, (bytes, bytearray)):
        try:
            source = bytes(source).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"the doc's seed text is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    text = source if isinstance(source, str) else ""
    if not text.strip():
        raise ValueError("the doc's seed text is empty or missing")
    return check_utf8(text, "the doc's seed text")


def reject_text(spec: ChainSpec, text) -> str | None:
    """Why a description cannot be drawn (failure, empty, not UTF-8, a refusal), or None."""
    if isinstance(text, GenerationFailure):
        return text.reason
    if not isinstance(text, str) or not text.strip():
        return "empty description"
    try:
        check_utf8(text, "the description")
    except ValueError as exc:
        return str(exc)
    pattern = spec.refusal(text)
    if pattern:
        return f"refused description (matched {pattern!r}): {text.strip()[:120]!r}"
    return None
