"""The steps of one run of the cycle engine, each on the chains of one wave: load a wave
(lock, verify, start reading each chain's input on a loader thread), describe a hop (on the
calling thread), draw a hop (on the drawer thread), retire a wave, and check what stops the
run. :class:`WaveSteps` is whole: it holds what the steps use (the run's frozen policy, the
describer, generator, locks, writer, statistics, progress bar) and its own threads;
:class:`.waves.WaveRunner` only decides which step runs when.
"""

from __future__ import annotations

import hashlib
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from ..core.failures import GenerationFailure, GeneratorConfigError
from ..core.keys import stable_hash
from ..core.signals import checkpoint, deferred, interrupt_at
from ..store import ChainFailure, StoreWriter, failure_reason
from .images import BadImageError, check_utf8, is_blank, normalize_image
from .planning import ChainState, RunPolicy, Wave, chunked, load_lazy, resume
from .protocol import ChainSpec

__all__ = ["PROMPT_CHARS", "PROMPT_CUT", "WaveSteps", "batch_size_of", "generation_seed", "read_seed", "reject_text",
           "sweep_temporary_files"]


def batch_size_of(generator) -> int:
    """Prompts per generator call (its ``batch_size``, at least 1)."""
    return max(1, int(getattr(generator, "batch_size", 1)))


def generation_seed(spec: ChainSpec, key: str, hop: int) -> int:
    """Per-doc, per-hop seed: reproducible and independent of batching and rank."""
    digest = hashlib.sha256(f"{spec.seed}|{key}|{hop}".encode()).hexdigest()
    return int(digest[:8], 16) & 0x7FFFFFFF


@dataclass
class _Loaded:
    """What a loader thread produced for one chain: its next input, or why not."""

    value: Any = None
    failure: ChainFailure | None = None
    seed_stored: bool = False


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


@dataclass(eq=False)
class WaveSteps:
    """The steps of one run, handed what they use: the run's frozen ``policy``, the
    ``describer`` and ``generator``, the chain ``locks``, the ``writer``, the run's ``stats``
    and progress ``bar``. Its threads (a drawer, or drawing inline when the policy does not
    overlap, and two loaders) run from :meth:`open` to :meth:`close`."""

    policy: RunPolicy
    describer: Any
    generator: Any
    locks: Any
    writer: StoreWriter
    stats: Any
    bar: Any

    def __post_init__(self) -> None:
        self.failed = 0
        self.drawer: ThreadPoolExecutor | _Inline | None = None
        self.loader: ThreadPoolExecutor | None = None
        self._draws: list = []  # the drawer's futures, checked by check()
        self._describe_keys: dict[int, str] = {}
        self._first_draw = True  # a first batch that fails whole stops the run (_draw)
        self._first_describe = True  # the generator loads before it (describe_step)

    def open(self) -> None:
        """Start the drawer and loader threads."""
        self.drawer = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="genbench-draw")
                       if self.policy.overlap else _Inline())
        self.loader = ThreadPoolExecutor(max_workers=2, thread_name_prefix="genbench-load")

    def close(self, cancel: bool = False) -> None:
        """Wait for the threads; ``cancel`` drops queued drawings and loads (what is written stays)."""
        for pool in (self.drawer, self.loader):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=cancel)
        self.drawer = self.loader = None

    def check(self) -> None:
        """Raise what stops the run: a failed store write, or an error from the drawer
        thread (a generator that no retry fixes, an interrupt), or a signal held back."""
        checkpoint()
        self.writer.check()
        for future in [f for f in self._draws if f.done()]:
            self._draws.remove(future)
            future.result()

    # -- waves ----------------------------------------------------------------------

    def load(self, wave: Wave) -> None:
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

    def retire(self, wave: Wave) -> None:
        """A wave with nothing left to compute: store pending seeds, release its chains once
        the writer has stored their hops, count it on the progress bar."""
        for chain in wave.chains:
            if chain.pending is not None:
                self._take(chain, 0, "seed")  # a seed to store and nothing else to compute
            chain.carry = None
        folders = [c.outcome.location.directory for c in wave.chains if not c.deferred]
        locks = self.locks
        self.writer.after(lambda: [locks.release(folder) for folder in folders])
        self.failed += sum(1 for c in wave.chains if c.outcome.failure is not None)
        self.bar.update(sum(1 for c in wave.chains if not c.deferred))
        if self.failed:
            self.bar.set_postfix_str(f"{self.failed} failed", refresh=False)

    # -- inputs -------------------------------------------------------------------

    def _read_input(self, chain: ChainState, hop: int | None, seed_missing: bool) -> _Loaded:
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

    def _take(self, chain: ChainState, hop: int, stage: str) -> Any:
        """Chain's input for ``hop`` (and forget it); None after recording a failure."""
        if chain.pending is not None:
            loaded = chain.pending.result()
            chain.pending = None
            if loaded.seed_stored:
                self.stats.seed_stored()
            if loaded.failure is not None:
                chain.fail(loaded.failure.hop, loaded.failure.stage, loaded.failure.reason)
                return None
            return loaded.value
        value, chain.carry = chain.carry, None
        if value is None and chain.hop is not None:
            chain.fail(hop, stage, "input missing (not stored, not in memory)")
        return value

    def _advance(self, chain: ChainState, done: int, value: Any) -> None:
        """Hop ``done`` is computed (``value``, queued for the store): move on. Later hops
        were moved aside under the chain's lock, so the next one is always computed."""
        outcome = chain.outcome
        outcome.verified = done + 1
        if outcome.spec.kind(done) == "text":
            outcome.described += 1
        else:
            outcome.drawn += 1
        self.stats.hop_computed()  # from the describer's and the drawer's threads both
        nxt = done + 1
        chain.hop = nxt if nxt <= outcome.spec.hops and self.policy.may_compute(nxt) else None
        chain.carry = value if chain.hop is not None else None

    # -- describing -----------------------------------------------------------------

    def _describe_key(self, spec: ChainSpec) -> str:
        key = self._describe_keys.get(id(spec))
        if key is None:
            key = self._describe_keys[id(spec)] = stable_hash([spec.describe_prompt, spec.describer_kwargs])
        return key

    def describe_step(self, wave: Wave, hop: int) -> None:
        """Describe the wave's chains at ``hop``; draw ``hop + 1`` in full generator
        batches on the drawer thread as the descriptions come."""
        batch = batch_size_of(self.generator)
        todo = [c for c in wave.chains if c.hop == hop]
        # chains whose description is stored already can be drawn right away
        ready = [c for c in wave.chains if c.hop == hop + 1 and c.kind == "image"]

        def submit(chains):
            with deferred():  # a signal inside would leave a started drawer thread unjoined: held to check()
                future = self.drawer.submit(self._draw, hop + 1, list(chains))
            wave.draws.append(future)
            self._draws.append(future)

        groups: dict[str, list[ChainState]] = {}
        for chain in todo:
            groups.setdefault(self._describe_key(chain.outcome.spec), []).append(chain)
        for group in groups.values():
            spec = group[0].outcome.spec
            for chunk in chunked(group, self.policy.describer_batch):
                self.check()  # e.g. GeneratorConfigError from the drawer: stop describing at once
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
                if self._first_describe and hop < spec.hops and self.policy.may_compute(hop + 1):
                    # the generator loads (and a local pipeline draws its probe) before anything is
                    # described: one that cannot draw ends the run before paying for descriptions
                    load_lazy(self.generator)
                self._first_describe = False
                load_lazy(self.describer)  # outside describe time (a vLLM engine starts in ~40 s)
                t0 = time.perf_counter()
                with deferred():  # a signal now waits for the answers, which are stored before the run stops
                    interrupt_at("describe")
                    texts = self.describer.describe(images, spec.describe_prompt, spec.describer_kwargs)
                self.stats.described(time.perf_counter() - t0, len(described))
                del images
                for chain, text in zip(described, texts):
                    reason = reject_text(chain.outcome.spec, text)
                    if reason:
                        chain.fail(hop, "describe", reason)
                        continue
                    text = text.strip()
                    self.stats.description_kept(text)
                    self.writer.write_text(chain.outcome.location, hop, text)
                    self._advance(chain, hop, text)
                    if chain.hop == hop + 1:
                        ready.append(chain)
                checkpoint()  # a signal held back while describing: the answers are queued, stop now
        while ready:
            submit(ready[:batch])
            del ready[:batch]
        self.check()

    # -- drawing ------------------------------------------------------------------

    def draw_step(self, wave: Wave, hop: int) -> None:
        """Draw the wave's chains at ``hop`` on the drawer thread, in full generator batches."""
        for chunk in chunked([c for c in wave.chains if c.hop == hop], batch_size_of(self.generator)):
            with deferred():  # as in describe_step's submit
                future = self.drawer.submit(self._draw, hop, list(chunk))
            wave.draws.append(future)
            self._draws.append(future)

    def _draw(self, hop: int, chains: list[ChainState]) -> None:
        """On the drawer thread: one generator call for ``chains`` at ``hop``."""
        interrupt_at("draw")
        prompts, seeds, drawn, chars_cut = [], [], [], []
        for chain in chains:
            description = self._take(chain, hop, "generate")
            if description is None:
                continue
            spec = chain.outcome.spec
            over = len(description) - PROMPT_CHARS
            if over > 0:  # stored in full, drawn from its first PROMPT_CHARS characters
                description = description[:PROMPT_CHARS]
            prompts.append(spec.generate_prompt.format(description=description))
            seeds.append(generation_seed(spec, chain.outcome.key, hop))
            drawn.append(chain)
            chars_cut.append(max(over, 0))
        if not drawn:
            return
        t0 = time.perf_counter()
        try:
            images = self.generator.generate(prompts, seeds)
        except GeneratorConfigError:
            raise  # nothing will draw: stop, keeping every stored hop
        except Exception as exc:  # a backend that raised instead of returning failures
            images = [GenerationFailure(f"generator error: {type(exc).__name__}: {exc}")] * len(drawn)
        self.stats.drew(time.perf_counter() - t0, len(drawn))
        if self._first_draw:
            self._first_draw = False
            if images and all(isinstance(image, GenerationFailure) for image in images):
                # the same cause would fail every doc, after paying for its descriptions
                raise GeneratorConfigError(
                    f"every prompt of the first generator batch failed ({len(images)} of {len(images)}), "
                    f"the first with {images[0].reason}",
                    "fix what that reason names (usually a generator.<arg> value), then rerun: "
                    "the descriptions already stored are reused")
        cuts = _text_cuts(self.generator, prompts)
        for i, over in enumerate(chars_cut):
            if over:  # recorded like an encoder's cut: [characters read, characters cut]
                cuts[i] = {**(cuts[i] or {}), PROMPT_CUT: [PROMPT_CHARS, over]}
        for chain, image, cut in zip(drawn, images, cuts):
            if isinstance(image, GenerationFailure):
                chain.fail(hop, "generate", image.reason)
                continue
            try:
                image = normalize_image(image)
            except BadImageError as exc:
                chain.fail(hop, "generate", f"generator returned a bad image: {exc}")
                continue
            if self.policy.reject_blank and is_blank(image):
                chain.fail(hop, "generate", "generator returned a blank image (one colour, e.g. a safety filter)")
                continue
            self.writer.write_image(chain.outcome.location, hop, image, {"cut": cut} if cut else None)
            self._advance(chain, hop, image)


#: characters of a description a generator is given (docs/models.md): a describer that answers
#: megabytes (an API without a length limit) has its answer stored in full, drawn from the first
#: PROMPT_CHARS characters (DALL-E 3's prompt limit; ~4x what a T5-XXL encoder reads at 512 tokens)
PROMPT_CHARS = 4000
#: the record's ``cut`` entry of a description cut to PROMPT_CHARS (beside the encoders' entries)
PROMPT_CUT = "prompt_chars"



def _text_cuts(generator, prompts: list[str]) -> list:
    """Per prompt, ``{encoder: [tokens it reads, tokens cut]}`` from a generator that knows its
    text budget (``text_cuts``), else None; counting never fails a drawing."""
    count = getattr(generator, "text_cuts", None)
    budget = getattr(generator, "text_budget", None) or {}
    if count is None or not budget:
        return [None] * len(prompts)
    try:
        return [{e: [budget[e], n] for e, n in cut.items()} for cut in count(prompts)]
    except Exception:  # noqa: BLE001 - a tokenizer problem loses the count, not the image
        return [None] * len(prompts)


def read_seed(outcome, load: Callable[[], Any]):
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
    failed = failure_reason(text)
    if failed:
        return f"the describer's answer is a failure: {failed}"
    try:
        check_utf8(text, "the description")
    except ValueError as exc:
        return str(exc)
    pattern = spec.refusal(text)
    if pattern:
        return f"refused description (matched {pattern!r}): {text.strip()[:120]!r}"
    return None


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
