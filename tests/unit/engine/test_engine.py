import io
import os

import numpy as np
import pytest
from PIL import Image
from tqdm import tqdm

from lmms_genbench import host

from lmms_genbench.engine import (
    ArtifactStore,
    BadImageError,
    ChainJob,
    ChainSpec,
    CycleEngine,
    normalize_image,
)
from lmms_genbench.engine.describer import LmmsDescriber

from lmms_genbench.generators import GenerationFailure

from tests.support.fakes import FakeDescriber, FakeGenerator


def _hops(outcome):
    """The stored hops of an outcome's chain: kind, path and (for a text) its text."""
    chain = outcome.to_chain()
    hops = []
    for hop in range(chain.hops):
        path = chain.path(hop)
        text = path.read_text(encoding="utf-8") if chain.kind(hop) == "text" else None
        hops.append({"kind": chain.kind(hop), "path": str(path), "text": text})
    return hops


def _spec(**gen_kwargs):
    return ChainSpec.from_request("Describe the image.", {"iterations": 2, **gen_kwargs})


def _jobs(store, spec, seeds):
    ns = store.namespace("d", "g", spec.protocol_id("test"))
    return [ChainJob(str(k), spec, store.chain(ns, str(k)), (lambda s=s: [s])) for k, s in enumerate(seeds)]


def _colours(n):
    return [Image.new("RGB", (16, 16), (20 * i, 100, 200)) for i in range(n)]


# -- protocol -------------------------------------------------------------------


def test_spec_from_generation_kwargs():
    spec = ChainSpec.from_request("P", {"iterations": 3, "max_new_tokens": 512, "until": [], "temperature": 0})
    assert spec.hops == 6 and spec.direction == "image_first"
    assert [spec.kind(h) for h in range(4)] == ["image", "text", "image", "text"]
    assert spec.describer_kwargs == {"max_new_tokens": 512, "temperature": 0}  # empty `until` dropped
    text_first = ChainSpec.from_request("P", {"generations": 4, "direction": "text_first", "seed_field": "caption"})
    assert text_first.hops == 4 and text_first.kind(0) == "text" and text_first.kind(1) == "image"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"iterations": 0}, "iterations must be >= 1"),
        ({"iterations": "three"}, "iterations must be an integer"),
        # core.args.as_int's rules: a bool is not a count and 2.5 is not truncated to 2
        ({"iterations": True}, "iterations must be an integer"),
        ({"generations": 2.5}, "generations must be an integer"),
        ({"seed": 3.7}, "seed must be an integer"),
        ({"direction": "sideways"}, "direction must be 'image_first' or 'text_first'"),
        ({"generate_prompt": "no placeholder"}, "must contain '{description}'"),
        ({"iterations": 1, "generations": 2}, "not both"),
    ],
)
def test_spec_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ChainSpec.from_request("P", kwargs)


def test_protocol_id_depends_on_settings_not_length():
    a = ChainSpec.from_request("P", {"iterations": 1})
    assert a.protocol_id("t") == ChainSpec.from_request("P", {"iterations": 3}).protocol_id("t")
    assert a.protocol_id("t") != ChainSpec.from_request("Q", {"iterations": 1}).protocol_id("t")
    assert a.protocol_id("t") != ChainSpec.from_request("P", {"iterations": 1, "max_new_tokens": 5}).protocol_id("t")


# -- breadth-first batching -----------------------------------------------------


def test_breadth_first_batches_and_complete_chains(tmp_path):
    store, spec = ArtifactStore(tmp_path), _spec()
    describer, generator = FakeDescriber(), FakeGenerator(batch_size=4)
    engine = CycleEngine(describer, generator, describer_batch=5)
    outcomes, stats = engine.run(_jobs(store, spec, _colours(7)))
    assert all(o.ok for o in outcomes)
    # 2 describe hops x ceil(7/5) calls; 2 draw hops x ceil(7/4) calls: never one doc per call
    assert describer.calls == [5, 2, 5, 2]
    assert generator.calls == [4, 3, 4, 3]
    hops = _hops(outcomes[0])
    assert [h["kind"] for h in hops] == ["image", "text", "image", "text", "image"]
    assert hops[1]["text"].startswith("a square of colour")
    assert all(os.path.isfile(h["path"]) for h in hops)
    chain = outcomes[0].to_chain("t")
    assert (chain.length, chain.hops, chain.status, chain.task) == (4, 5, "ok", "t")
    assert stats.describe_items == 14 and stats.generate_items == 14


def test_duplicate_docs_run_once(tmp_path):
    store, spec = ArtifactStore(tmp_path), _spec(iterations=1)
    describer = FakeDescriber()
    jobs = _jobs(store, spec, _colours(2))
    outcomes, _ = CycleEngine(describer, FakeGenerator()).run(jobs + jobs[:1])  # rank padding repeats a doc
    assert describer.calls == [2] and len(outcomes) == 3 and outcomes[2] is outcomes[0]


# -- resume ---------------------------------------------------------------------


def _mtimes(root):
    """Hop files' mtimes (a run appends hash records to hops.jsonl and takes .lock files)."""
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file() and p.suffix in (".png", ".txt")}


def test_stop_then_resume_recomputes_nothing(tmp_path):
    store, spec = ArtifactStore(tmp_path), _spec()
    first = CycleEngine(FakeDescriber(), FakeGenerator(), stop_after_hop=2)
    partial, stats = first.run(_jobs(store, spec, _colours(3)))
    assert all(o.failure.stage == "incomplete" for o in partial)
    assert stats.failures == {"incomplete": 3}
    before = _mtimes(tmp_path)

    describer, generator = FakeDescriber(), FakeGenerator()
    done, stats = CycleEngine(describer, generator).run(_jobs(store, spec, _colours(3)))
    assert all(o.ok for o in done)
    assert describer.calls == [3] and generator.calls == [3]  # only hops 3 and 4
    assert stats.hops_reused == 9  # hops 0-2 of three docs
    assert all(_mtimes(tmp_path)[p] == t for p, t in before.items())


def test_interrupted_run_resumes_from_last_complete_hop(tmp_path):
    store, spec = ArtifactStore(tmp_path), _spec()
    with pytest.raises(KeyboardInterrupt):
        CycleEngine(FakeDescriber(), FakeGenerator(batch_size=2, interrupt_on_call=2)).run(
            _jobs(store, spec, _colours(3))
        )
    # no half-written file is left behind
    assert not [p for p in tmp_path.rglob("*.tmp")]
    describer, generator = FakeDescriber(), FakeGenerator(batch_size=2)
    outcomes, _ = CycleEngine(describer, generator).run(_jobs(store, spec, _colours(3)))
    assert all(o.ok for o in outcomes)
    assert describer.calls == [3]  # hop 1 was stored before the interrupt
    assert generator.calls == [1, 2, 1]  # hop 2 for the doc not drawn yet, then hop 4


def test_resumed_chain_equals_uninterrupted(tmp_path):
    spec = _spec()
    a, b = ArtifactStore(tmp_path / "a"), ArtifactStore(tmp_path / "b")
    full, _ = CycleEngine(FakeDescriber(), FakeGenerator()).run(_jobs(a, spec, _colours(3)))
    CycleEngine(FakeDescriber(), FakeGenerator(), stop_after_hop=1).run(_jobs(b, spec, _colours(3)))
    resumed, _ = CycleEngine(FakeDescriber(), FakeGenerator()).run(_jobs(b, spec, _colours(3)))
    texts = lambda outs: [[h["text"] for h in _hops(o)] for o in outs]  # noqa: E731
    assert texts(full) == texts(resumed)


# -- bad input ------------------------------------------------------------------


def _png_bytes(img):
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def test_bad_and_odd_seeds_fail_alone(tmp_path):
    store, spec = ArtifactStore(tmp_path), _spec(iterations=1)
    good = Image.new("RGB", (32, 32), (10, 20, 30))
    seeds = {
        "good": good,
        "truncated": _png_bytes(Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)))[:200],
        "not_an_image": b"hello world",
        "rgba": Image.new("RGBA", (16, 16), (255, 0, 0, 0)),
        "palette": Image.new("P", (16, 16), 3),
        "sixteen_bit": Image.fromarray(np.arange(256, dtype=np.uint16).reshape(16, 16) * 200),
        "grayscale": Image.new("L", (16, 16), 128),
        "one_pixel": Image.new("RGB", (1, 1), (1, 2, 3)),
        "very_large": Image.new("RGB", (6000, 4000), (5, 5, 5)),
        "missing": [],
    }
    ns = store.namespace("d", "g", spec.protocol_id("test"))
    jobs = [ChainJob(k, spec, store.chain(ns, k), (lambda s=s: s if isinstance(s, list) else [s])) for k, s in seeds.items()]
    outcomes, stats = CycleEngine(FakeDescriber(), FakeGenerator()).run(jobs)
    status = {o.key: (o.ok, o.failure and o.failure.reason) for o in outcomes}
    for ok in ("good", "rgba", "palette", "sixteen_bit", "grayscale", "one_pixel", "very_large"):
        assert status[ok][0], (ok, status[ok])
    for bad in ("truncated", "not_an_image", "missing"):
        assert not status[bad][0]
        assert outcomes[list(seeds).index(bad)].failure.stage == "seed"
    assert "unreadable image" in status["truncated"][1]
    assert stats.failures == {"seed": 3}
    large = store.chain(ns, "very_large").read_image(0)
    assert max(large.size) == 2048  # downscaled, not rejected


def test_empty_refused_and_generator_failures_are_per_doc(tmp_path):
    store, spec = ArtifactStore(tmp_path), _spec(iterations=1)
    seeds = [Image.new("RGB", (8, 8), c) for c in [(1, 1, 1), (2, 2, 2), (3, 3, 3), (4, 4, 4)]]
    describer = FakeDescriber(replies={(1, 1, 1): "   ", (2, 2, 2): "I'm sorry, I can't help with that."})
    generator = FakeGenerator(fail_on=("3 3 3",))
    outcomes, stats = CycleEngine(describer, generator).run(_jobs(store, spec, seeds))
    reasons = [o.failure and (o.failure.stage, o.failure.reason) for o in outcomes]
    assert reasons[0] == ("describe", "empty description")
    assert reasons[1][0] == "describe" and reasons[1][1].startswith("refused description")
    assert reasons[2] == ("generate", "backend refused this prompt")
    assert reasons[3] is None
    assert stats.failures == {"describe": 2, "generate": 1}
    # the failed doc keeps what it had computed
    assert [h["kind"] for h in _hops(outcomes[2])] == ["image", "text"]


def test_blank_drawings_fail_their_chain_and_the_rest_complete(tmp_path):
    store, spec = ArtifactStore(tmp_path), _spec(iterations=2)
    seeds = [Image.new("RGB", (8, 8), c) for c in [(7, 7, 7), (9, 9, 9)]]
    generator = FakeGenerator(blank_on=("7 7 7",))
    outcomes, stats = CycleEngine(FakeDescriber(), generator).run(_jobs(store, spec, seeds))
    assert outcomes[0].failure.stage == "generate" and "blank image" in outcomes[0].failure.reason
    assert outcomes[1].ok
    assert stats.failures == {"generate": 1}
    # switched off, the flat image is kept as a drawing
    outcomes, _ = CycleEngine(FakeDescriber(), generator, reject_blank=False).run(
        _jobs(ArtifactStore(tmp_path / "keep"), spec, seeds)
    )
    assert all(o.ok for o in outcomes)


def test_text_seeds_empty_or_not_utf8_fail_alone(tmp_path):
    store = ArtifactStore(tmp_path)
    spec = ChainSpec.from_request("Describe.", {"generations": 2, "direction": "text_first", "seed_field": "caption"})
    seeds = {
        "ok": "a square of colour 1 2 3",
        "bytes_ok": "a square of colour 4 5 6".encode("utf-8"),
        "empty": "   ",
        "latin1_bytes": "caf\xe9".encode("latin-1"),
        "surrogate": "bad \udcff text",
        "none": None,
    }
    ns = store.namespace("d", "g", spec.protocol_id("test"))
    jobs = [ChainJob(k, spec, store.chain(ns, k), (lambda s=s: s)) for k, s in seeds.items()]
    outcomes, stats = CycleEngine(FakeDescriber(), FakeGenerator()).run(jobs)
    by_key = {o.key: o for o in outcomes}
    assert by_key["ok"].ok and by_key["bytes_ok"].ok
    assert "empty or missing" in by_key["empty"].failure.reason
    assert "empty or missing" in by_key["none"].failure.reason
    assert "not valid UTF-8" in by_key["latin1_bytes"].failure.reason
    assert "not valid UTF-8" in by_key["surrogate"].failure.reason
    assert stats.failures == {"seed": 4}


def test_a_description_that_is_not_utf8_fails_its_chain_only(tmp_path):
    store, spec = ArtifactStore(tmp_path), _spec(iterations=1)
    seeds = [Image.new("RGB", (8, 8), c) for c in [(1, 1, 1), (2, 2, 2)]]
    describer = FakeDescriber(replies={(1, 1, 1): "broken \udc80 text"})
    outcomes, _ = CycleEngine(describer, FakeGenerator()).run(_jobs(store, spec, seeds))
    assert outcomes[0].failure.stage == "describe" and "not valid UTF-8" in outcomes[0].failure.reason
    assert outcomes[1].ok


def test_generator_exception_after_the_first_batch_fails_its_batch_not_the_run(tmp_path):
    class Broken(FakeGenerator):
        def generate(self, prompts, seeds):
            if self.calls:
                raise RuntimeError("CUDA out of memory")
            return super().generate(prompts, seeds)

    store, spec = ArtifactStore(tmp_path), _spec(iterations=1)
    outcomes, _ = CycleEngine(FakeDescriber(), Broken(batch_size=2), describer_batch=2).run(
        _jobs(store, spec, _colours(4)))
    assert [o.ok for o in outcomes] == [True, True, False, False]
    assert all(o.failure.stage == "generate" and "out of memory" in o.failure.reason for o in outcomes[2:])


@pytest.mark.parametrize("broken", ["raises", "returns failures"])
def test_a_first_generator_batch_that_fails_whole_stops_the_run_naming_the_exception(tmp_path, broken):
    from lmms_genbench.generators import GeneratorConfigError

    class Broken(FakeGenerator):
        def generate(self, prompts, seeds):
            if broken == "raises":
                raise ValueError("`height` and `width` have to be divisible by 16 but are 72 and 72.")
            return [GenerationFailure("pipeline raised ValueError: `height` and `width` have to be divisible "
                                      "by 16 but are 72 and 72.")] * len(prompts)

    store, spec = ArtifactStore(tmp_path), _spec(iterations=2)
    generator = Broken(batch_size=2)
    with pytest.raises(GeneratorConfigError, match=r"every prompt of the first generator batch failed \(2 of 2\), "
                       r"the first with .*ValueError: `height` and `width` have to be divisible by 16"):
        CycleEngine(FakeDescriber(), generator, describer_batch=2).run(_jobs(store, spec, _colours(4)))
    # the descriptions already paid for are kept for the rerun
    assert len(list(tmp_path.rglob("001.txt"))) >= 2


def test_generator_config_error_stops_the_run(tmp_path):
    from lmms_genbench.generators import GeneratorConfigError

    class NoKey(FakeGenerator):
        def generate(self, prompts, seeds):
            raise GeneratorConfigError("OPENAI_API_KEY is not set")

    store, spec = ArtifactStore(tmp_path), _spec(iterations=1)
    with pytest.raises(GeneratorConfigError):
        CycleEngine(FakeDescriber(), NoKey()).run(_jobs(store, spec, _colours(2)))
    # the descriptions already paid for are kept for the rerun
    assert len(list(tmp_path.rglob("001.txt"))) == 2


def test_truncated_image_fails_even_when_pil_is_told_to_accept_it(monkeypatch):
    from PIL import ImageFile

    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)  # what lmms-eval does at import
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(1).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(buf, "JPEG")
    with pytest.raises(BadImageError, match="truncated"):
        normalize_image(buf.getvalue()[: len(buf.getvalue()) // 3])
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True  # restored for everyone else


def test_normalize_image_modes():
    assert normalize_image(Image.new("LA", (4, 4), (0, 0))).getpixel((0, 0)) == (255, 255, 255)
    img16 = Image.fromarray(np.array([[0, 65535]], dtype=np.uint16))
    assert normalize_image(img16).getpixel((1, 0)) == (255, 255, 255)
    with pytest.raises(BadImageError, match="unsupported image type"):
        normalize_image(3.14)


# -- lmms-eval describer adapter ------------------------------------------------


class _SimpleLM:
    is_simple = True

    def __init__(self):
        self.task_dict = {}
        self.seen = []

    def generate_until(self, requests):
        out = []
        for r in requests:
            ctx, kwargs, doc_to_visual, doc_id, task, split = r.args
            visual = doc_to_visual(self.task_dict[task][split][doc_id])
            kwargs.pop("until", None)  # real models mutate their kwargs
            self.seen.append((ctx, visual[0].size))
            out.append(f"desc {doc_id}")
        return out


class _BarLM(_SimpleLM):
    """Draws a per-call bar as lmms-eval's transformers classes do (``tqdm`` of its module)."""

    def generate_until(self, requests):
        bar = tqdm(total=len(requests), desc="Model Responding")
        bar.update(len(requests))
        bar.close()
        return ["ok"] * len(requests)


_TQDM = tqdm  # what this module's name holds outside a quiet call


class _ChatLM(_SimpleLM):
    is_simple = False

    def generate_until(self, requests):
        out = []
        for r in requests:
            ctx, doc_to_messages, kwargs, doc_id, task, split = r.args
            messages = doc_to_messages(self.task_dict[task][split][doc_id])
            content = messages[0]["content"]
            assert content[0]["type"] == "image" and content[1] == {"type": "text", "text": ctx}
            out.append(f"chat {doc_id}")
        return out


@pytest.mark.parametrize("lm_cls, prefix", [(_SimpleLM, "desc"), (_ChatLM, "chat")])
def test_lmms_describer_builds_requests_for_both_apis(lm_cls, prefix):
    lm = lm_cls()
    kwargs = {"max_new_tokens": 5, "until": ["x"]}
    texts = LmmsDescriber(lm, "x").describe(_colours(3), "Describe.", kwargs)
    assert texts == [f"{prefix} 0", f"{prefix} 1", f"{prefix} 2"]
    assert kwargs == {"max_new_tokens": 5, "until": ["x"]}  # caller's dict untouched
    assert lm.task_dict == {}


def test_lmms_describer_isolates_a_failing_image():
    class Flaky(_SimpleLM):
        def generate_until(self, requests):
            # reads each image as a model does: doc_to_visual(task_dict[task][split][doc_id])
            images = [r.args[2](self.task_dict[r.args[4]][r.args[5]][r.args[3]])[0] for r in requests]
            if any(image.size == (1, 1) for image in images):
                raise RuntimeError("bad pixel values")
            return ["fine"] * len(requests)

    images = [Image.new("RGB", (4, 4)), Image.new("RGB", (1, 1)), Image.new("RGB", (4, 4))]
    out = LmmsDescriber(Flaky(), "x").describe(images, "p", {})
    assert out[0] == "fine" and out[2] == "fine"
    assert "bad pixel values" in out[1].reason


# -- overlapping describe and draw ----------------------------------------------


def test_overlap_gives_the_same_chains_as_strict_alternation(tmp_path):
    spec = _spec(iterations=3)
    runs = {}
    for overlap in (True, False):
        store = ArtifactStore(tmp_path / str(overlap))
        outcomes, _ = CycleEngine(FakeDescriber(), FakeGenerator(batch_size=3), describer_batch=2, overlap=overlap).run(
            _jobs(store, spec, _colours(7))
        )
        runs[overlap] = [[h["text"] for h in _hops(o)] for o in outcomes]
    assert runs[True] == runs[False]


def test_drawing_starts_while_the_describer_is_still_working(tmp_path):
    import time

    events = []

    class SlowDescriber(FakeDescriber):
        def describe(self, images, prompt, gen_kwargs):
            time.sleep(0.05)
            events.append(("describe_end", time.perf_counter()))
            return super().describe(images, prompt, gen_kwargs)

    class RecordingGenerator(FakeGenerator):
        def generate(self, prompts, seeds):
            events.append(("generate_start", time.perf_counter()))
            return super().generate(prompts, seeds)

    store, spec = ArtifactStore(tmp_path), _spec(iterations=1)
    outcomes, _ = CycleEngine(SlowDescriber(), RecordingGenerator(batch_size=2), describer_batch=2).run(
        _jobs(store, spec, _colours(6))
    )
    assert all(o.ok for o in outcomes)
    first_draw = min(t for kind, t in events if kind == "generate_start")
    last_describe = max(t for kind, t in events if kind == "describe_end")
    assert first_draw < last_describe


def test_config_error_while_overlapping_stops_describing(tmp_path):
    import time

    from lmms_genbench.generators import GeneratorConfigError

    class NoQuota(FakeGenerator):
        def generate(self, prompts, seeds):
            raise GeneratorConfigError("insufficient_quota")

    class SlowDescriber(FakeDescriber):
        def describe(self, images, prompt, gen_kwargs):
            time.sleep(0.05)  # give the drawer time to fail
            return super().describe(images, prompt, gen_kwargs)

    describer = SlowDescriber()
    store, spec = ArtifactStore(tmp_path), _spec(iterations=1)
    with pytest.raises(GeneratorConfigError):
        CycleEngine(describer, NoQuota(batch_size=1), describer_batch=1).run(_jobs(store, spec, _colours(8)))
    assert len(describer.calls) < 8  # did not pay for every description


def test_a_lost_seed_file_is_restored_on_rerun(tmp_path):
    store, spec = ArtifactStore(tmp_path), _spec(iterations=1)
    jobs = _jobs(store, spec, _colours(2))
    CycleEngine(FakeDescriber(), FakeGenerator()).run(jobs)
    jobs[0].location.path(0, "image").unlink()
    describer = FakeDescriber()
    outcomes, _ = CycleEngine(describer, FakeGenerator()).run(jobs)
    assert all(o.ok for o in outcomes) and describer.calls == []
    assert jobs[0].location.has(0, "image")


# -- memory, the critical path and progress ------------------------------------------


def test_seeds_are_read_wave_by_wave_not_up_front(tmp_path):
    """A doc's seed is loaded shortly before its wave runs: when the describer is first
    called, only the first waves' seeds have been read, not all forty."""
    store, spec = ArtifactStore(tmp_path), _spec(iterations=1)
    read, seen_at_first_call = [], []

    class Counting(FakeDescriber):
        def describe(self, images, prompt, gen_kwargs):
            seen_at_first_call.append(len(read))
            return super().describe(images, prompt, gen_kwargs)

    ns = store.namespace("d", "g", spec.protocol_id("test"))

    def seed(k):
        read.append(k)
        return [Image.new("RGB", (8, 8), (k, 100, 200))]

    jobs = [ChainJob(str(k), spec, store.chain(ns, str(k)), (lambda k=k: seed(k))) for k in range(40)]
    outcomes, stats = CycleEngine(Counting(), FakeGenerator(batch_size=4), describer_batch=4).run(jobs)
    assert all(o.ok for o in outcomes) and sorted(read) == list(range(40))  # each read once
    # wave of 4: the first wave and the next one being prefetched, at most three waves
    assert seen_at_first_call[0] <= 12
    assert stats.seeds_stored == 40


def test_a_seed_reaches_the_describer_as_decoded_not_through_a_png_round_trip(tmp_path, monkeypatch):
    from lmms_genbench.store import ChainLocation

    reads = []
    original = ChainLocation.read_image
    monkeypatch.setattr(ChainLocation, "read_image", lambda self, hop: reads.append(hop) or original(self, hop))
    received = []

    class Keeping(FakeDescriber):
        def describe(self, images, prompt, gen_kwargs):
            received.extend(images)
            return super().describe(images, prompt, gen_kwargs)

    store, spec = ArtifactStore(tmp_path), _spec(iterations=2)
    seeds = _colours(3)
    outcomes, _ = CycleEngine(Keeping(), FakeGenerator()).run(_jobs(store, spec, seeds))
    assert all(o.ok for o in outcomes)
    # hop 1 describes the very objects the docs gave (already RGB and small); hop 3 the drawings
    assert all(a is b for a, b in zip(received[:3], seeds))
    assert reads == []  # no hop of a fresh run is read back from the store
    assert all(o.location.has(0, "image") for o in outcomes)  # and the seeds are stored


def test_a_failing_store_write_stops_the_run_cleanly_and_keeps_what_was_written(tmp_path, monkeypatch):
    from lmms_genbench.core.errors import ActionableError
    from lmms_genbench.store import ChainLocation
    from lmms_genbench.store import StoreWriteError

    store, spec = ArtifactStore(tmp_path), _spec()
    CycleEngine(FakeDescriber(), FakeGenerator(), stop_after_hop=1).run(_jobs(store, spec, _colours(3)))
    before = _mtimes(tmp_path)

    original = ChainLocation.write_image

    def disk_full(self, hop, image):
        if hop == 2 and self.directory.name.startswith("1-"):
            raise OSError(28, "No space left on device")
        return original(self, hop, image)

    monkeypatch.setattr(ChainLocation, "write_image", disk_full)
    describer = FakeDescriber()
    with pytest.raises(StoreWriteError) as caught:
        CycleEngine(describer, FakeGenerator(batch_size=1)).run(_jobs(store, spec, _colours(3)))
    # one line naming the file and the cause (a SystemExit: lmms-eval does not swallow it)
    assert isinstance(caught.value, ActionableError)
    assert "002.png" in str(caught.value) and "No space left on device" in str(caught.value)
    assert "rerun" in caught.value.fix
    assert all(_mtimes(tmp_path)[p] == t for p, t in before.items())  # nothing stored was touched
    assert not list(tmp_path.rglob("*.tmp"))
    # writes stop at the failure, so no chain has a hop stored past a missing one
    broken = next(p for p in tmp_path.rglob("1-*") if p.is_dir())
    assert not (broken / "002.png").exists() and not (broken / "003.txt").exists()

    monkeypatch.setattr(ChainLocation, "write_image", original)
    outcomes, _ = CycleEngine(FakeDescriber(), FakeGenerator()).run(_jobs(store, spec, _colours(3)))
    assert all(o.ok and o.stored_hops() == 5 for o in outcomes)


def test_progress_bar_on_stderr_and_silent_at_error_verbosity(tmp_path, capfd, monkeypatch):
    monkeypatch.delenv("VERBOSITY", raising=False)
    spec = _spec(iterations=1)
    CycleEngine(FakeDescriber(), FakeGenerator()).run(_jobs(ArtifactStore(tmp_path / "a"), spec, _colours(3)))
    err = capfd.readouterr().err
    assert "cycle: chains" in err and "3/3" in err and "chain/s" in err
    monkeypatch.setenv("VERBOSITY", "ERROR")  # lmms-eval --verbosity ERROR
    CycleEngine(FakeDescriber(), FakeGenerator()).run(_jobs(ArtifactStore(tmp_path / "b"), spec, _colours(3)))
    assert capfd.readouterr().err == ""


def test_the_describer_class_per_call_bar_is_silenced(capfd):
    lm = _BarLM()
    host.generate(lm, [("Describe.", {}, [Image.new("RGB", (4, 4))])])
    assert "Model Responding" in capfd.readouterr().err
    out = LmmsDescriber(lm, "bar").describe([Image.new("RGB", (4, 4))] * 2, "Describe.", {})
    assert out == ["ok", "ok"] and "Model Responding" not in capfd.readouterr().err
    assert tqdm is _TQDM  # put back after the call
