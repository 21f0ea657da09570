"""Unified models: the interface, the Janus adapter on a tiny random Janus, the
cycle model's unified= arguments (one sdp_smoke run through the lmms-eval command:
tests/e2e/test_unified_e2e.py)."""

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lmms_genbench.core.failures import GeneratorConfigError
from lmms_genbench.engine import ArtifactStore, ChainJob, ChainSpec, CycleEngine
from lmms_genbench.generators import GenerationFailure
from lmms_genbench.generators.unified import (
    UNIFIED_MODELS,
    UnifiedModel,
    build_unified,
    run_isolated,
)

from tests.support.fakes import FakeDescriber, FakeGenerator


class FakeUnified(FakeDescriber, FakeGenerator):
    """Both halves of the fakes in one object, failing if the halves ever overlap."""

    name = "fake-unified"
    concurrent = False

    def __init__(self, batch_size=2):
        FakeDescriber.__init__(self)
        FakeGenerator.__init__(self, batch_size=batch_size)
        self._busy = threading.Lock()
        self.overlaps = 0

    def _exclusive(self, fn, *args):
        if not self._busy.acquire(blocking=False):
            self.overlaps += 1
            self._busy.acquire()
        try:
            time.sleep(0.002)  # widen the window an overlap would need
            return fn(self, *args)
        finally:
            self._busy.release()

    def describe(self, images, prompt, gen_kwargs):
        return self._exclusive(FakeDescriber.describe, images, prompt, gen_kwargs)

    def generate(self, prompts, seeds):
        return self._exclusive(FakeGenerator.generate, prompts, seeds)


def _jobs(tmp_path, n=6, hops=4):
    spec = ChainSpec(direction="image_first", hops=hops, describe_prompt="Describe.", generate_prompt="{description}")
    store = ArtifactStore(tmp_path / "art")
    ns = store.namespace("fake-unified", "fake-unified", spec.protocol_id("t"))
    colours = [(10 * i, 200 - 10 * i, 50) for i in range(n)]
    return [
        ChainJob(str(i), spec, store.chain(ns, str(i)), lambda c=c: Image.new("RGB", (8, 8), c))
        for i, c in enumerate(colours)
    ]


# -- the interface -------------------------------------------------------------


def test_fake_meets_the_protocol_and_runs_both_roles_in_turn(tmp_path):
    model = FakeUnified()
    assert isinstance(model, UnifiedModel)
    engine = CycleEngine(model, model, describer_batch=2, overlap=model.concurrent)
    outcomes, stats = engine.run(_jobs(tmp_path))
    assert all(o.ok for o in outcomes)
    assert stats.describe_items == 6 * 2 and stats.generate_items == 6 * 2
    assert model.overlaps == 0  # overlap=False: never describing while drawing
    assert all(n <= 2 for n in model.calls)


def test_run_isolated_pins_a_failure_on_its_item():
    def call(chunk):
        if "bad" in chunk:
            raise ValueError("cannot do bad")
        return [x.upper() for x in chunk]

    out = run_isolated(call, ["a", "bad", "c", "d"], 2, "fake describe")
    assert out[0] == "A" and out[2:] == ["C", "D"]
    assert isinstance(out[1], GenerationFailure) and "cannot do bad" in out[1].reason


def test_run_isolated_flags_a_wrong_result_count():
    out = run_isolated(lambda chunk: [], ["a"], 4, "fake generate")
    assert isinstance(out[0], GenerationFailure) and "returned 0 results for 1" in out[0].reason


# -- Janus on a tiny random checkpoint -------------------------------------------


@pytest.fixture(scope="module")
def janus(tiny_janus):
    return build_unified("janus", pretrained=tiny_janus, device="cpu", dtype="float32", batch_size=2)


def _pixels(image):
    return np.asarray(image).astype(int)


def test_tiny_janus_describes_in_words(janus):
    from lmms_genbench.smoke.janus import JANUS_IMAGE_SIZE

    assert isinstance(janus, UnifiedModel) and janus.concurrent is False
    assert janus.name.startswith("janus-tiny-janus-s0-")
    assert janus.image_size == JANUS_IMAGE_SIZE == 32
    images = [Image.new("RGB", (40, 30), (200, 10, 10)), Image.new("RGB", (20, 50), (10, 10, 200)),
              Image.new("L", (16, 16), 128)]
    texts = janus.describe(images, "Describe this image.", {"max_new_tokens": 6, "temperature": 0, "until": []})
    assert len(texts) == 3 and all(isinstance(t, str) and t.split() for t in texts)
    assert all(len(t.split()) <= 6 for t in texts)
    # greedy describing is deterministic, alone or in a batch
    assert janus.describe(images[:1], "Describe this image.", {"max_new_tokens": 6, "temperature": 0}) == texts[:1]


def test_tiny_janus_draws_per_prompt_seeded_images(janus):
    prompts = ["a red cat", "two blue dogs on a long sofa", "a tree"]
    first = janus.generate(prompts, [1, 2, 3])
    assert all(isinstance(im, Image.Image) and im.size == (32, 32) and im.mode == "RGB" for im in first)
    again = janus.generate(prompts, [1, 2, 3])
    assert all(np.array_equal(_pixels(a), _pixels(b)) for a, b in zip(first, again))
    # an image depends on its own prompt and seed, not its batch (up to uint8 rounding)
    alone = janus.generate(["a red cat"], [1])[0]
    assert np.abs(_pixels(alone) - _pixels(first[0])).max() <= 1
    other_seed = janus.generate(["a red cat"], [7])[0]
    assert np.abs(_pixels(other_seed) - _pixels(first[0])).mean() > 5


def test_tiny_janus_greedy_images_ignore_the_seed(tiny_janus):
    greedy = build_unified("janus", pretrained=tiny_janus, device="cpu", dtype="float32", image_temperature=0)
    a, b = greedy.generate(["a red cat", "a red cat"], [1, 2])
    assert np.array_equal(_pixels(a), _pixels(b))
    assert greedy.name != build_unified("janus", pretrained=tiny_janus, device="cpu", dtype="float32").name


def test_tiny_janus_failures_stay_with_their_item(janus, monkeypatch):
    real = janus.model.generate

    def fails_in_batches(**kwargs):
        if kwargs["input_ids"].shape[0] > 1:
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(**kwargs)

    monkeypatch.setattr(janus.model, "generate", fails_in_batches)
    drawn = janus.generate(["a red cat", "a tree"], [1, 2])  # retried one by one
    assert all(isinstance(im, Image.Image) for im in drawn)
    described = janus.describe([Image.new("RGB", (8, 8))] * 2, "Describe.", {"max_new_tokens": 3})
    assert all(isinstance(t, str) for t in described)

    def always_fails(**kwargs):
        raise RuntimeError("broken weights")

    monkeypatch.setattr(janus.model, "generate", always_fails)
    out = janus.generate(["a red cat"], [1]) + janus.describe([Image.new("RGB", (8, 8))], "Describe.", {})
    assert [type(o) for o in out] == [GenerationFailure, GenerationFailure]
    assert out[0].reason == "janus generate raised RuntimeError: broken weights"
    assert out[1].reason == "janus describe raised RuntimeError: broken weights"


def test_janus_arguments_are_validated_by_name(tiny_janus):
    cases = [
        ({"guidance_scale": 0.5}, "unified.guidance_scale: expected a finite number >= 1; got 0.5"),
        ({"batch_size": "two"}, "unified.batch_size: expected an integer >= 1; got 'two'"),
        ({"dtype": "int8"}, "unified.dtype: expected one of 'auto', 'float16', 'bfloat16', 'float32'; got 'int8'"),
        ({"image_temperature": -1}, "unified.image_temperature"),
        ({"steps": 4}, "unknown argument(s) unified.steps; allowed: unified.pretrained, unified.device"),
    ]
    for extra, message in cases:
        with pytest.raises(ValueError) as err:
            build_unified("janus", **{"pretrained": tiny_janus, "device": "cpu", **extra})
        assert message in str(err.value), (extra, str(err.value))
    with pytest.raises(ValueError, match="unified.pretrained: expected a non-empty string; got None"):
        build_unified("janus")
    # the list grows with each registered model: janus is in it, the unknown name is not
    with pytest.raises(ValueError, match=r"unified: expected one of ('[a-z0-9_]+', )*'janus'(, '[a-z0-9_]+')*; got 'no_such'"):
        build_unified("no_such")
    with pytest.raises(GeneratorConfigError, match="unified.pretrained: no such folder '.*missing'"):
        build_unified("janus", pretrained=str(Path(tiny_janus).parent / "missing"), device="cpu")


def test_janus_refuses_a_missing_accelerator(tiny_janus):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        build_unified("janus", pretrained=tiny_janus, device="cuda")


def test_janus_describe_rejects_bad_task_settings(janus):
    with pytest.raises(ValueError, match="gen_kwargs max_new_tokens: expected an integer >= 1; got 0"):
        janus.describe([Image.new("RGB", (8, 8))], "Describe.", {"max_new_tokens": 0})


# -- the cycle model ---------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        ({"unified": "janus", "describer": "llava_hf"}, "replaces the describer and the generator, but describer"),
        ({"unified": "janus", "generator.steps": 2}, "but generator.steps was given too"),
        ({"preset": "smoke_unified", "describer": "llava_hf"}, "but describer was given too"),
        ({"unified.device": "cpu"}, "unified.device given without unified=<name>"),
        ({"preset": "tiny"}, "preset must be one of ['smoke', 'smoke_unified']"),
    ],
)
def test_cycle_model_keeps_unified_and_decoupled_apart(args, message):
    from lmms_genbench.core.errors import ActionableError
    from lmms_genbench.models.cycle import CycleModel

    with pytest.raises(ActionableError) as err:  # one line through lmms-eval, not a traceback
        CycleModel(**args)
    assert message in str(err.value)


def test_cycle_model_uses_one_unified_model_for_both_roles(tmp_path, monkeypatch):
    from lmms_genbench.models.cycle import CycleModel

    monkeypatch.setitem(UNIFIED_MODELS.entries, "fake", "tests.unit.generators.test_unified:FakeUnified")
    model = CycleModel(unified="fake", **{"unified.batch_size": 3}, artifacts=str(tmp_path))
    assert model.describer is model.generator and model.generator.batch_size == 3
    assert model.engine.overlap is False


def test_smoke_unified_preset_builds_a_tiny_janus(tmp_path, monkeypatch):
    from lmms_genbench.models.cycle import CycleModel

    monkeypatch.setenv("LMMS_GENBENCH_CACHE", str(tmp_path / "cache"))
    model = CycleModel(preset="smoke_unified", **{"unified.guidance_scale": 2}, artifacts=str(tmp_path / "art"))
    assert model.describer is model.generator and model.engine.overlap is False
    assert model.generator.name.startswith("janus-tiny-janus-s0-") and model.generator.loaded is None
    janus = model.generator.load()  # what the first describe or draw does
    assert janus.name == model.generator.name and janus.guidance_scale == 2.0 and str(janus.device) == "cpu"


def test_a_janus_run_loads_its_weights_at_first_use_and_names_them_before(tiny_janus, monkeypatch):
    """Issue 24: a rerun served from the store loads nothing, so the unified model is planned
    (named, every argument and the device checked) and loaded only when a role has work."""
    from lmms_genbench.core.errors import ActionableError
    from lmms_genbench.models.cycle import CycleModel

    loads = []
    real = UNIFIED_MODELS.build
    monkeypatch.setattr(UNIFIED_MODELS, "build", lambda name, **kw: loads.append(name) or real(name, **kw))
    args = {"unified": "janus", "unified.pretrained": tiny_janus, "unified.device": "cpu", "unified.dtype": "float32"}
    model = CycleModel(**args)
    assert loads == [] and model.generator.name == real("janus", **{k[8:]: v for k, v in args.items() if "." in k}).name
    loads.clear()
    model.describer.describe([Image.new("RGB", (8, 8))], "Describe.", {"max_new_tokens": 2})
    model.generator.generate(["a red cube"], [0])
    assert loads == ["janus"]  # once, for both roles
    # an argument or a device still stops the run at start, in one line
    for bad in ({"unified.guidance_scale": "0.5"}, {"unified.device": "cuda:7"}):
        with pytest.raises(ActionableError) as err:
            CycleModel(**{**args, **bad})
        assert "\n" not in str(err.value)
    # weights that do not load stop the run at first use, in the same one line
    lazy = CycleModel(**{**args, "unified.pretrained": str(Path(tiny_janus).parent / "missing")})
    with pytest.raises(ActionableError, match="unified model janus did not load|missing"):
        lazy.generator.generate(["a red cube"], [0])
