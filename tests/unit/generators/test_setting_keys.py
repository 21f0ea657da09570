"""One identity per drawing: a diffusers setting is normalised to its parameter's type before it
keys the store, a default keys as if absent, a pipeline that does not draw from text is refused
before loading, and stores keyed the earlier way are found again (adopted, not redrawn).

Plumbing on tiny replicas only (tests/support/tiny_pipelines.py, smoke/pipelines.py)."""

import json

import pytest

from lmms_genbench.core.args import ArgumentError
from lmms_genbench.core.errors import load_failure
from lmms_genbench.core.failures import ProbeFailure
from lmms_genbench.core.keys import generator_name, recorded_name
from lmms_genbench.generators import build_generator
from lmms_genbench.generators import pipeline_rules as rules
from lmms_genbench.generators.diffusers_backend import DiffusersGenerator
from lmms_genbench.store.identity import adopt_folder

from tests.support.tiny_pipelines import PipelineRecorder, tiny_flux, tiny_sd3


@pytest.fixture(scope="module")
def flux():
    return tiny_flux()


def _gen(pipe, **kwargs):
    return build_generator("diffusers", pretrained="tiny/pipe", pipeline=pipe, device="cpu",
                           steps=1, width=32, height=32, **kwargs)


@pytest.mark.parametrize("kind, given, want", [
    (bool, 0, False), (bool, "false", False), (bool, "0", False), (bool, False, False), (bool, 1, True),
    (bool, "True", True), (int, 512.0, 512), (int, "512.0", 512), (int, "512", 512), (float, 2, 2.0),
    (float, "2", 2.0), (int, "none", None), (None, "7", 7), (str, "x", "x"),
])
def test_a_value_is_normalised_to_its_parameters_type(kind, given, want):
    got = rules.normalise("s", given, kind)
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize("kind, given, named", [
    (int, "abc", r"s: expected an integer \(int\); got 'abc'"), (int, 512.5, r"expected an integer \(int\)"),
    (float, "lots", r"expected a number \(float\)"), (bool, "maybe", r"expected true or false \(a bool\)"),
    (bool, 2, r"expected true or false"), (int, True, r"expected an integer"),
])
def test_a_value_its_type_cannot_hold_is_refused_naming_the_type(kind, given, named):
    with pytest.raises(ArgumentError, match=named):
        rules.normalise("s", given, kind)


def test_the_parameter_type_comes_from_the_default_else_the_annotation():
    import inspect

    def call(a: int = 3, b: float | None = None, c: "Optional[int]" = None, d=None, e: "str | int" = None):  # noqa: F821
        pass

    params = inspect.signature(call).parameters
    assert [rules.setting_type(params[n]) for n in "abcde"] == [int, float, int, None, None]


def test_a_default_given_keys_as_if_absent_and_binning_0_and_false_key_alike():
    import diffusers

    assert rules.check_call_settings(diffusers.FluxPipeline, {"true_cfg_scale": 1}) == {}
    assert rules.check_call_settings(diffusers.FluxPipeline, {"true_cfg_scale": "1.0"}) == {}
    assert rules.check_call_settings(diffusers.FluxPipeline, {"true_cfg_scale": 2}) == {"true_cfg_scale": 2.0}
    keys = [rules.check_call_settings(diffusers.PixArtSigmaPipeline, {"use_resolution_binning": v})
            for v in (0, "false", "0", False)]
    assert keys == [{"use_resolution_binning": False}] * 4
    assert rules.check_call_settings(diffusers.PixArtSigmaPipeline, {"use_resolution_binning": 1}) == {}
    with pytest.raises(ArgumentError, match=r"max_sequence_length: expected an integer \(int\); got 'long'"):
        rules.check_call_settings(diffusers.FluxPipeline, {"max_sequence_length": "long"})


def test_true_cfg_scale_1_given_or_omitted_is_one_name(flux):
    assert _gen(flux, true_cfg_scale=1).name == _gen(flux).name == _gen(flux, true_cfg_scale="1").name


def test_max_sequence_length_512_point_0_draws():
    gen = _gen(tiny_sd3(), max_sequence_length=512.0)
    assert gen.call_settings == {"max_sequence_length": 512}
    recorder = PipelineRecorder(gen.pipeline)
    gen.pipeline = recorder
    assert not hasattr(gen.generate(["a cat"], [0])[0], "reason")
    assert type(recorder.calls[0]["max_sequence_length"]) is int


def test_a_store_keyed_with_the_default_spelled_out_is_adopted(tmp_path):
    """Before normalisation, true_cfg_scale=1 keyed a folder of its own: its plan names that folder
    as a legacy name, so the next run renames it and reuses its hops."""
    from lmms_genbench.smoke.pipelines import tiny_family_path

    folder = str(tiny_family_path("flux"))
    kwargs = {"pretrained": folder, "device": "cpu", "dtype": "float32", "steps": 1, "width": 32, "height": 32}
    plan = DiffusersGenerator.plan(**kwargs, true_cfg_scale=1)
    assert plan.name == DiffusersGenerator.plan(**kwargs).name
    old = generator_name("diffusers", "FluxPipeline", {**plan.identity["settings"], "call": {"true_cfg_scale": 1.0}})
    assert old in plan.legacy_names
    describer = tmp_path / "describer-x"
    (describer / old / "proto" / "doc").mkdir(parents=True)
    (describer / old / "proto" / "doc" / "001.txt").write_text("a cat")
    adopted = adopt_folder(describer, plan.name, plan.legacy_names)
    assert (adopted / "proto" / "doc" / "001.txt").read_text() == "a cat"


def test_the_plan_identity_hashes_to_its_name_and_names_settings_and_folder():
    from lmms_genbench.smoke.pipelines import tiny_family_path

    folder = str(tiny_family_path("sd3"))
    plan = DiffusersGenerator.plan(pretrained=folder, device="cpu", dtype="float32", steps=1, width=32, height=32,
                                   max_sequence_length="512")
    identity = json.loads(json.dumps(plan.identity))  # as written and read back
    assert recorded_name(identity) == plan.name
    assert identity["settings"]["call"] == {"max_sequence_length": 512}
    assert identity["pretrained"] == folder and identity["pipeline"] == "StableDiffusion3Pipeline"
    assert identity["settings"]["pretrained"] == f"weights:{identity['weights_sha256']}"


def test_an_img2img_folder_is_refused_before_loading(tmp_path, monkeypatch):
    from lmms_genbench.generators import diffusers_backend

    refiner = tmp_path / "refiner"
    refiner.mkdir()
    (refiner / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionXLImg2ImgPipeline"}))
    monkeypatch.setattr(diffusers_backend, "_load_pipeline", lambda *a, **k: pytest.fail("loaded the weights"))
    with pytest.raises(ArgumentError, match="StableDiffusionXLImg2ImgPipeline, which is not a text-to-image"):
        DiffusersGenerator.plan(pretrained=str(refiner), device="cpu", strength=0.5)
    with pytest.raises(ArgumentError, match="not a text-to-image pipeline"):
        DiffusersGenerator(pretrained=str(refiner), device="cpu")


def test_a_probe_that_fails_says_it_did_not_draw():
    line = load_failure(ProbeFailure("the pipeline could not draw its probe picture: boom"), "generator",
                        "diffusers", {"pretrained": "org/x"}, "generator.")
    assert "loaded with generator.pretrained=org/x but did not draw its probe picture" in str(line)
    assert "did not load" not in str(line)


def test_the_openai_generator_states_what_made_its_name(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    gen = build_generator("openai", model="dall-e-3", size="1024x1024")
    assert recorded_name(json.loads(json.dumps(gen.identity))) == gen.name
    assert "sk-test" not in json.dumps(gen.identity)


def test_a_planned_generator_loads_what_its_plan_checked_without_checking_again(monkeypatch):
    """Each setting is checked once, against the pipeline class, before any weight loads."""
    from lmms_genbench.generators import diffusers_plan
    from lmms_genbench.smoke.pipelines import tiny_family_path

    plan = DiffusersGenerator.plan(pretrained=str(tiny_family_path("sd3")), device="cpu", dtype="float32", steps=1,
                                   width=32, height=32, max_sequence_length="300")
    monkeypatch.setattr(rules, "check_call_settings", lambda *a: pytest.fail("checked again"))
    monkeypatch.setattr(diffusers_plan, "pipeline_class", lambda *a: pytest.fail("model_index.json read again"))
    loaded = plan.load()
    assert loaded.name == plan.name and loaded.call_settings == {"max_sequence_length": 300}
