"""The cycle engine: breadth-first describe/draw chains over many docs.

At each hop every pending doc is advanced together: all descriptions go to
the describer in batches, all drawings to the generator in batches. Each
result is stored atomically before the next hop starts, so an interrupted run
resumes at the first hop that is missing on disk and recomputes nothing.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..generators.base import GenerationFailure, Generator, GeneratorConfigError
from .describer import Describer
from .images import BadImageError, normalize_image
from .protocol import ChainSpec
from .store import ChainLocation, stable_hash

logger = logging.getLogger(__name__)


@dataclass
class ChainJob:
    """One doc's chain to complete. ``load_seed`` is called only if hop 0 is not stored."""

    key: str
    spec: ChainSpec
    location: ChainLocation
    load_seed: Callable[[], Any]


@dataclass
class ChainFailure:
    hop: int
    stage: str  # "seed" | "describe" | "generate" | "incomplete"
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"hop": self.hop, "stage": self.stage, "reason": self.reason}


@dataclass
class ChainOutcome:
    """A chain as far as it got: the doc's response, serialised to JSON."""

    key: str
    spec: ChainSpec
    location: ChainLocation
    failure: ChainFailure | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None

    def to_dict(self) -> dict[str, Any]:
        hops = []
        for hop in range(self.spec.hops + 1):
            kind = self.spec.kind(hop)
            if not self.location.has(hop, kind):
                break
            entry: dict[str, Any] = {"hop": hop, "kind": kind, "path": str(self.location.path(hop, kind))}
            if kind == "text":
                entry["text"] = self.location.read_text(hop)
            hops.append(entry)
        return {
            "chain_id": self.key,
            "status": "ok" if self.ok else "failed",
            "failure": None if self.ok else self.failure.to_dict(),
            "direction": self.spec.direction,
            "hops": hops,
        }


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


class CycleEngine:
    """Runs :class:`ChainJob` s to completion with a describer and a generator.

    Args:
        describer: turns images into texts (see :class:`Describer`).
        generator: turns texts into images (see ``lmms_genbench.generators``).
        describer_batch: images per describer call; the describer may batch
            further inside. Bounds how many images are in memory at once.
        stop_after_hop: if set, compute no hop beyond this one in this run
            (a budgeted or staged run); unfinished chains report ``incomplete``.
        progress: show a progress bar per hop.
    """

    def __init__(
        self,
        describer: Describer,
        generator: Generator,
        describer_batch: int = 16,
        stop_after_hop: int | None = None,
        progress: bool = False,
    ) -> None:
        if describer_batch < 1:
            raise ValueError(f"describer_batch must be >= 1, got {describer_batch!r}")
        if stop_after_hop is not None and stop_after_hop < 0:
            raise ValueError(f"stop_after_hop must be >= 0, got {stop_after_hop!r}")
        self.describer = describer
        self.generator = generator
        self.describer_batch = describer_batch
        self.stop_after_hop = stop_after_hop
        self.progress = progress

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

        for outcome in outcomes:
            self._store_seed(outcome, loaders[str(outcome.location.directory)], stats)

        last_hop = max((o.spec.hops for o in outcomes), default=0)
        for hop in range(1, last_hop + 1):
            if self.stop_after_hop is not None and hop > self.stop_after_hop:
                break
            todo = []
            for outcome in outcomes:
                if outcome.failure is not None or hop > outcome.spec.hops:
                    continue
                if outcome.location.has(hop, outcome.spec.kind(hop)):
                    stats.hops_reused += 1
                else:
                    todo.append(outcome)
            describe = [o for o in todo if o.spec.kind(hop) == "text"]
            draw = [o for o in todo if o.spec.kind(hop) == "image"]
            if describe:
                self._describe_hop(hop, describe, stats)
            if draw:
                self._draw_hop(hop, draw, stats)

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

    def _store_seed(self, outcome: ChainOutcome, load_seed, stats: RunStats) -> None:
        kind = outcome.spec.kind(0)
        if outcome.location.has(0, kind):
            stats.hops_reused += 1
            return
        try:
            source = load_seed()
            if kind == "image":
                if isinstance(source, (list, tuple)):
                    if not source:
                        raise BadImageError("the doc has no image")
                    source = source[0]
                outcome.location.write_image(0, normalize_image(source, outcome.spec.max_seed_side))
            else:
                text = source if isinstance(source, str) else ""
                if not text.strip():
                    raise ValueError("the doc's seed text is empty or missing")
                outcome.location.write_text(0, text)
            stats.seeds_stored += 1
        except Exception as exc:  # any bad doc fails alone
            outcome.failure = ChainFailure(0, "seed", f"{type(exc).__name__}: {exc}")

    def _describe_hop(self, hop: int, outcomes: list[ChainOutcome], stats: RunStats) -> None:
        groups: dict[str, list[ChainOutcome]] = {}
        for o in outcomes:
            key = stable_hash([o.spec.describe_prompt, o.spec.describer_kwargs])
            groups.setdefault(key, []).append(o)
        for group in groups.values():
            spec = group[0].spec
            for chunk in chunked(group, self.describer_batch):
                images, ready = [], []
                for o in chunk:
                    try:
                        images.append(o.location.read_image(hop - 1))
                        ready.append(o)
                    except Exception as exc:
                        o.failure = ChainFailure(hop, "describe", f"stored image unreadable: {exc}")
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

    @staticmethod
    def _reject_text(spec: ChainSpec, text) -> str | None:
        if isinstance(text, GenerationFailure):
            return text.reason
        if not isinstance(text, str) or not text.strip():
            return "empty description"
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
                    o.location.write_image(hop, normalize_image(image))
                except BadImageError as exc:
                    o.failure = ChainFailure(hop, "generate", f"generator returned a bad image: {exc}")
