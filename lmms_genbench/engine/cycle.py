"""The cycle engine: breadth-first describe/draw chains over many docs.

At each hop every pending doc is advanced together: all descriptions go to
the describer in batches, all drawings to the generator in batches, and a
worker thread draws the descriptions already finished while the describer
works on the rest. Every text and image is stored atomically as soon as it
exists and a chain's hops are made in order, so an interrupted run resumes
at each chain's first missing hop and recomputes nothing.
"""

from __future__ import annotations

import hashlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..generators.base import GenerationFailure, Generator, GeneratorConfigError
from .chain import Chain, ChainFailure
from .describer import Describer
from .images import BadImageError, check_utf8, is_blank, normalize_image
from .protocol import ChainSpec
from ..core.keys import stable_hash
from .store import ChainLocation

logger = logging.getLogger(__name__)


@dataclass
class ChainJob:
    """One doc's chain to complete. ``load_seed`` is called only if hop 0 is not stored."""

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


class _DeferredSeeds:
    """Seeds loaded during hop 1 and written by a background thread."""

    def __init__(self, writer: ThreadPoolExecutor) -> None:
        self.loaders: dict[int, Callable[[], Any]] = {}
        self._writer = writer
        self._writes = []

    def write(self, location: ChainLocation, image) -> None:
        self._writes.append(self._writer.submit(location.write_image, 0, image))

    def wait(self) -> None:
        for future in self._writes:
            future.result()  # a failed write surfaces here, before anyone reads hop 0


def chunked(items: Sequence, size: int) -> Iterable[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def generation_seed(spec: ChainSpec, key: str, hop: int) -> int:
    """Per-doc, per-hop seed: reproducible and independent of batching and rank."""
    digest = hashlib.sha256(f"{spec.seed}|{key}|{hop}".encode()).hexdigest()
    return int(digest[:8], 16) & 0x7FFFFFFF


class CycleEngine:
    """Runs :class:`ChainJob` s to completion with a describer and a generator.

    Args:
        describer: turns images into texts (see :class:`Describer`).
        generator: turns texts into images (see ``lmms_genbench.generators``).
        describer_batch: images per describer call; the describer may batch
            further inside. Bounds how many images are in memory at once.
        stop_after_hop: if set, compute no hop beyond this one in this run
            (a budgeted or staged run); unfinished chains report ``incomplete``.
        overlap: draw each hop's finished descriptions in a worker thread while
            the describer continues (the hop order per chain is unchanged).
        reject_blank: fail a chain whose generator returns a one-colour image
            (safety filters blank their output) instead of describing it.
    """

    def __init__(
        self,
        describer: Describer,
        generator: Generator,
        describer_batch: int = 16,
        stop_after_hop: int | None = None,
        overlap: bool = True,
        reject_blank: bool = True,
    ) -> None:
        if describer_batch < 1:
            raise ValueError(f"describer_batch must be >= 1, got {describer_batch!r}")
        if stop_after_hop is not None and stop_after_hop < 0:
            raise ValueError(f"stop_after_hop must be >= 0, got {stop_after_hop!r}")
        self.describer = describer
        self.generator = generator
        self.describer_batch = describer_batch
        self.stop_after_hop = stop_after_hop
        self.overlap = overlap
        self.reject_blank = reject_blank
        self._seeds = _DeferredSeeds(None)  # replaced per run

    def run(self, jobs: Sequence[ChainJob]) -> tuple[list[ChainOutcome], RunStats]:
        started = time.perf_counter()
        stats = RunStats()
        # the same doc may arrive twice (lmms-eval pads ranks with repeats)
        unique: dict[str, ChainOutcome] = {}
        for job in jobs:
            unique.setdefault(str(job.location.directory), ChainOutcome(job.key, job.spec, job.location))
        outcomes = list(unique.values())
        loaders = {str(j.location.directory): j.load_seed for j in jobs}
        stats.chains = len(outcomes)

        last_hop = max((o.spec.hops for o in outcomes), default=0)
        # drawings of hop h+1 overlap the descriptions of hop h; only when every
        # chain alternates the same way, so no doc needs hop h+1 described instead
        overlap = self.overlap and len({o.spec.direction for o in outcomes}) == 1
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="genbench-draw") as drawer, \
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="genbench-write") as writer:
            seeds = _DeferredSeeds(writer)
            for outcome in outcomes:
                load = loaders[str(outcome.location.directory)]
                if outcome.location.has(0, outcome.spec.kind(0)):
                    stats.hops_reused += 1
                elif overlap and outcome.spec.kind(0) == "image" and outcome.spec.hops >= 1 and self._may_compute(1):
                    # loaded with its describe chunk, described from memory and
                    # written in the background: large seeds cost no extra decode
                    seeds.loaders[id(outcome)] = load
                else:
                    self._store_seed(outcome, load, stats)
            self._seeds = seeds
            hop = 1
            while hop <= last_hop and self._may_compute(hop):
                todo = self._pending(hop, outcomes, stats)
                draw = [o for o in todo if o.spec.kind(hop) == "image"]
                if draw:
                    self._draw_hop(hop, draw, stats)
                describe = [o for o in todo if o.spec.kind(hop) == "text"]
                if overlap and describe and hop < last_hop and self._may_compute(hop + 1):
                    self._describe_then_draw(hop, describe, outcomes, drawer, stats)
                    hop += 1  # hop + 1 was drawn alongside
                elif describe:
                    self._describe_hop(hop, describe, stats)
                hop += 1
            # seeds whose hop 1 needed no describing (already stored) still get stored
            by_id = {id(o): o for o in outcomes}
            for key, load in list(seeds.loaders.items()):
                self._store_seed(by_id[key], load, stats)
            seeds.wait()

        for outcome in outcomes:
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

        by_dir = {str(o.location.directory): o for o in outcomes}
        stats.wall_seconds = time.perf_counter() - started
        return [by_dir[str(j.location.directory)] for j in jobs], stats

    # -- hops ---------------------------------------------------------------

    def _may_compute(self, hop: int) -> bool:
        return self.stop_after_hop is None or hop <= self.stop_after_hop

    @staticmethod
    def _pending(hop: int, outcomes: Sequence[ChainOutcome], stats: RunStats) -> list[ChainOutcome]:
        """Live chains that still need ``hop``; counts the ones already stored."""
        todo = []
        for outcome in outcomes:
            if outcome.failure is not None or hop > outcome.spec.hops:
                continue
            if outcome.location.has(hop, outcome.spec.kind(hop)):
                stats.hops_reused += 1
            else:
                todo.append(outcome)
        return todo

    def _describe_then_draw(self, hop, describe, outcomes, drawer, stats) -> None:
        """Describe ``hop`` while a worker draws ``hop + 1`` in full generator batches."""
        batch = max(1, int(getattr(self.generator, "batch_size", 1)))
        described = {id(o) for o in describe}
        # chains whose description is stored already can be drawn right away
        ready = [o for o in self._pending(hop + 1, outcomes, stats) if id(o) not in described]
        futures = []

        def submit(chains):
            futures.append(drawer.submit(self._draw_hop, hop + 1, list(chains), stats))

        def on_chunk(chunk):
            failed = next((f for f in futures if f.done() and f.exception() is not None), None)
            if failed is not None:
                failed.result()  # e.g. GeneratorConfigError: stop describing at once
            ready.extend(o for o in chunk if o.failure is None and hop + 1 <= o.spec.hops)
            while len(ready) >= batch:
                submit(ready[:batch])
                del ready[:batch]

        on_chunk([])
        self._describe_hop(hop, describe, stats, on_chunk)
        if ready:
            submit(ready)
        for future in futures:
            future.result()

    @staticmethod
    def _load_seed(outcome: ChainOutcome, load_seed):
        """The doc's normalised seed (image or text); raises with the reason."""
        source = load_seed()
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

    def _store_seed(self, outcome: ChainOutcome, load_seed, stats: RunStats) -> None:
        try:
            seed = self._load_seed(outcome, load_seed)
        except Exception as exc:  # any bad doc fails alone
            outcome.failure = ChainFailure(0, "seed", f"{type(exc).__name__}: {exc}")
            return
        if isinstance(seed, str):
            outcome.location.write_text(0, seed)
        else:
            outcome.location.write_image(0, seed)
        stats.seeds_stored += 1

    def _input_image(self, o: ChainOutcome, hop: int, stats: RunStats):
        """The image hop ``hop`` describes, from memory for a deferred seed."""
        load = self._seeds.loaders.pop(id(o), None) if hop == 1 else None
        if load is None:
            try:
                return o.location.read_image(hop - 1)
            except Exception as exc:
                o.failure = ChainFailure(hop, "describe", f"stored image unreadable: {exc}")
                return None
        try:
            image = self._load_seed(o, load)
        except Exception as exc:
            o.failure = ChainFailure(0, "seed", f"{type(exc).__name__}: {exc}")
            return None
        self._seeds.write(o.location, image)
        stats.seeds_stored += 1
        return image

    def _describe_hop(self, hop: int, outcomes: list[ChainOutcome], stats: RunStats, on_chunk=None) -> None:
        groups: dict[str, list[ChainOutcome]] = {}
        for o in outcomes:
            key = stable_hash([o.spec.describe_prompt, o.spec.describer_kwargs])
            groups.setdefault(key, []).append(o)
        for group in groups.values():
            spec = group[0].spec
            for chunk in chunked(group, self.describer_batch):
                images, ready = [], []
                for o in chunk:
                    image = self._input_image(o, hop, stats)
                    if image is not None:
                        images.append(image)
                        ready.append(o)
                if not ready:
                    continue
                t0 = time.perf_counter()
                texts = self.describer.describe(images, spec.describe_prompt, spec.describer_kwargs)
                stats.describe_seconds += time.perf_counter() - t0
                stats.describe_calls += 1
                stats.describe_items += len(ready)
                for o, text in zip(ready, texts):
                    reason = self._reject_text(o.spec, text)
                    if reason:
                        o.failure = ChainFailure(hop, "describe", reason)
                    else:
                        o.location.write_text(hop, text.strip())
                if on_chunk is not None:
                    on_chunk(ready)

    @staticmethod
    def _reject_text(spec: ChainSpec, text) -> str | None:
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

    def _draw_hop(self, hop: int, outcomes: list[ChainOutcome], stats: RunStats) -> None:
        size = max(1, int(getattr(self.generator, "batch_size", 1)))
        for chunk in chunked(outcomes, size):
            prompts, seeds, ready = [], [], []
            for o in chunk:
                try:
                    description = o.location.read_text(hop - 1)
                except Exception as exc:
                    o.failure = ChainFailure(hop, "generate", f"stored text unreadable: {exc}")
                    continue
                prompts.append(o.spec.generate_prompt.format(description=description))
                seeds.append(generation_seed(o.spec, o.key, hop))
                ready.append(o)
            if not ready:
                continue
            t0 = time.perf_counter()
            try:
                images = self.generator.generate(prompts, seeds)
            except GeneratorConfigError:
                raise  # nothing will draw: stop, keeping every stored hop
            except Exception as exc:  # a backend that raised instead of returning failures
                images = [GenerationFailure(f"generator error: {type(exc).__name__}: {exc}")] * len(ready)
            stats.generate_seconds += time.perf_counter() - t0
            stats.generate_calls += 1
            stats.generate_items += len(ready)
            for o, image in zip(ready, images):
                if isinstance(image, GenerationFailure):
                    o.failure = ChainFailure(hop, "generate", image.reason)
                    continue
                try:
                    image = normalize_image(image)
                except BadImageError as exc:
                    o.failure = ChainFailure(hop, "generate", f"generator returned a bad image: {exc}")
                    continue
                if self.reject_blank and is_blank(image):
                    o.failure = ChainFailure(
                        hop, "generate", "generator returned a blank image (one colour, e.g. a safety filter)"
                    )
                    continue
                o.location.write_image(hop, image)
