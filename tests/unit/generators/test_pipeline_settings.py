"""The diffusers generator on tiny random-weight SD3 and FLUX pipelines (tests/support/tiny_pipelines.py):
settings passed through to the pipeline's ``__call__`` and into the key, the size rule read from
the pipeline, the tokens each text encoder cuts, and keys from the weights' identity.

Plumbing on tiny replicas only: no real checkpoint was loaded.
"""

import json
import logging
import shutil
import warnings

import pytest
import torch
from PIL import Image

from lmms_genbench.core.errors import ActionableError
from lmms_genbench.core.keys import generator_name
from lmms_genbench.generators import build_generator
from lmms_genbench.generators.diffusers_backend import DiffusersGenerator

from tests.support.tiny_pipelines import CLIP_TOKENS, PipelineRecorder, tiny_flux, tiny_sd3

LONG = "a red cat on a blue rug beside the window " * 18  # 300 to 500 tiny-tokenizer tokens


@pytest.fixture(scope="module")
def sd3():
    return tiny_sd3()


@pytest.fixture(scope="module")
def flux():
    return tiny_flux()


@pytest.fixture(scope="module")
def saved_flux(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt") / "flux"
    tiny_flux(0).save_pretrained(folder)
    other = tmp_path_factory.mktemp("ckpt") / "flux_seed1"
    tiny_flux(1).save_pretrained(other)
    return folder, other


def _gen(pipe, **kwargs):
    return build_generator("diffusers", pretrained="tiny/pipe", pipeline=pipe, device="cpu",
                           steps=1, width=32, height=32, **kwargs)


# ---------------------------------------------------------------- pass-through
def test_sd3_takes_max_sequence_length_512_into_the_call_and_the_key(sd3):
    base = _gen(sd3)
    longer = _gen(sd3, max_sequence_length="512")  # as the command line gives it
    assert longer.call_settings == {"max_sequence_length": 512}
    assert longer.name != base.name
    assert longer.name == _gen(sd3, max_sequence_length=512).name
    recorder = PipelineRecorder(sd3)
    longer.pipeline = recorder
    longer.generate(["a cat"], [0])
    assert recorder.calls[0]["max_sequence_length"] == 512
    # T5 now reads 512 tokens of each prompt
    assert longer.text_budget["text_encoder_3:T5EncoderModel"] == 512
    assert base.text_budget["text_encoder_3:T5EncoderModel"] == 256


def test_unknown_pipeline_setting_is_refused_with_the_ones_it_takes(sd3):
    with pytest.raises(ValueError, match=r"unknown argument 'max_seq_len': StableDiffusion3Pipeline takes none .*"
                       r"passes through only .*max_sequence_length.*skip_guidance_layers"):
        _gen(sd3, max_seq_len=512)
    with pytest.raises(ValueError, match=r"num_inference_steps: set it as generator.steps"):
        _gen(sd3, num_inference_steps=4)


def test_flux_negative_prompt_without_true_cfg_is_warned_once_and_left_out_of_the_key(flux, caplog):
    plain = _gen(flux)
    with caplog.at_level(logging.WARNING, "lmms_genbench"):
        ignored = _gen(flux, negative_prompt="blurry")
    warned = [r for r in caplog.records if "negative_prompt is ignored" in r.getMessage()]
    assert len(warned) == 1 and "true_cfg_scale > 1" in warned[0].getMessage()
    assert ignored.name == plain.name and ignored.negative_prompt is None
    used = _gen(flux, negative_prompt="blurry", true_cfg_scale="2")
    assert used.negative_prompt == "blurry" and used.call_settings == {"true_cfg_scale": 2.0}
    assert used.name != plain.name
    recorder = PipelineRecorder(flux)
    used.pipeline = recorder
    assert isinstance(used.generate(["a cat"], [0])[0], Image.Image)
    assert recorder.calls[0]["true_cfg_scale"] == 2.0 and recorder.calls[0]["negative_prompt"] == ["blurry"]


def test_a_hub_id_keeps_its_key_and_its_revision_joins_it(sd3):
    gen = _gen(sd3)
    old = generator_name("diffusers", "tiny/pipe", {
        "pretrained": "tiny/pipe", "steps": 1, "guidance": None, "width": 32, "height": 32,
        "dtype": "float32", "negative_prompt": None, "device": "cpu"})
    assert gen.name == old  # the formula of stores written before this change
    assert _gen(sd3, revision="abc123").name != old


# ---------------------------------------------------------------- size rules
@pytest.mark.parametrize("build", [tiny_sd3, tiny_flux])
def test_sizes_off_the_pipelines_multiple_are_refused_at_load(build):
    pipe = build()
    with pytest.raises(ValueError, match=r"width: .* draws sizes that are multiples of 16 pixels \(VAE scale "
                       r"factor x patch size\); got 72, nearest 64 or 80"):
        build_generator("diffusers", pretrained="tiny/pipe", pipeline=pipe, device="cpu", width=72, height=64)
    _gen(pipe)  # 32 px is a multiple of 16


def test_t2i_load_with_a_wrong_size_is_one_line(saved_flux, tmp_path):
    from lmms_genbench.models.t2i import TextToImageModel

    folder, _ = saved_flux
    with pytest.raises(ActionableError) as caught:
        TextToImageModel(generator="diffusers", output_dir=str(tmp_path), **{
            "generator.pretrained": str(folder), "generator.device": "cpu", "generator.width": 72})
    line = str(caught.value)
    assert "\n" not in line and line.startswith("lmms-genbench: error: the generator diffusers did not load")
    assert "multiples of 16" in line and "Fix:" in line


# ---------------------------------------------------------------- text budget
def test_each_encoder_reports_the_tokens_it_cuts(sd3):
    gen = _gen(sd3)
    tokens = len(sd3.tokenizer(LONG)["input_ids"])
    assert 300 < tokens < 500
    assert gen.text_budget == {"text_encoder:CLIPTextModelWithProjection": CLIP_TOKENS,
                               "text_encoder_2:CLIPTextModelWithProjection": CLIP_TOKENS,
                               "text_encoder_3:T5EncoderModel": 256}
    long_cut, short_cut = gen.text_cuts([LONG, "a cat"])
    assert long_cut == {"text_encoder:CLIPTextModelWithProjection": tokens - 77,
                        "text_encoder_2:CLIPTextModelWithProjection": tokens - 77,
                        "text_encoder_3:T5EncoderModel": tokens - 256}
    assert set(short_cut.values()) == {0}
    assert set(_gen(sd3, max_sequence_length=512).text_cuts([LONG])[0].values()) == {tokens - 77, 0}


def test_diffusers_per_batch_truncation_warning_is_replaced_by_one_of_ours(flux, caplog):
    gen = _gen(flux)
    seen = []

    class Catch(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    catcher = Catch()
    logging.getLogger("diffusers").addHandler(catcher)
    try:
        with caplog.at_level(logging.WARNING, "lmms_genbench"):
            for _ in range(2):
                gen.text_cuts([LONG])
                gen.generate([LONG], [0])
        # outside our calls the pipeline's own logger is as it was
        flux(prompt=[LONG], generator=[torch.Generator().manual_seed(0)], num_inference_steps=1,
             width=32, height=32)
    finally:
        logging.getLogger("diffusers").removeHandler(catcher)
    ours = [r for r in caplog.records if "are cut" in r.getMessage()]
    assert len(ours) == 1
    assert sum("truncated" in m for m in seen) == 1  # only the direct call's (CLIP; T5 reads 512)


def test_the_chain_record_holds_the_cut_and_reports_sum_it(flux, tmp_path):
    from lmms_genbench.engine import ArtifactStore, ChainJob, ChainSpec, CycleEngine
    from lmms_genbench.store import read_records, text_cut_summary

    from tests.support.fakes import FakeDescriber

    class Wordy(FakeDescriber):
        def describe(self, images, *args, **kwargs):
            return [LONG if i % 2 else "a cat" for i, _ in enumerate(images)]

    gen = _gen(flux)
    store = ArtifactStore(tmp_path)
    spec = ChainSpec.from_request("Describe.", {"iterations": 1, "generate_prompt": "{description}"})
    ns = store.namespace("d", gen.name, spec.protocol_id("t"))
    seeds = [Image.new("RGB", (8, 8), (i, 1, 1)) for i in range(4)]
    jobs = [ChainJob(str(i), spec, store.chain(ns, str(i)), (lambda s=s: s)) for i, s in enumerate(seeds)]
    outcomes, _ = CycleEngine(Wordy(), gen, describer_batch=4).run(jobs)
    assert all(o.ok for o in outcomes)
    tokens = len(flux.tokenizer(LONG)["input_ids"])
    record = read_records(outcomes[1].location.directory)[2]
    assert record["cut"] == {"text_encoder:CLIPTextModel": [77, tokens - 77], "text_encoder_2:T5EncoderModel": [512, 0]}
    assert len(json.dumps(record)) < 300  # small per-doc records
    summary = text_cut_summary((o.location.directory, 3) for o in outcomes)
    assert summary["text_encoder:CLIPTextModel"] == {
        "tokens_read": 77, "descriptions": 4, "truncated": 2, "share_truncated": 0.5,
        "mean_tokens_cut": (tokens - 77) / 2, "mean_tokens_cut_when_truncated": tokens - 77}
    assert summary["text_encoder_2:T5EncoderModel"]["share_truncated"] == 0.0
    # only the hops a chain holds for the task count
    assert text_cut_summary((o.location.directory, 2) for o in outcomes) == {}


# ---------------------------------------------------------------- keys from the weights
def test_a_moved_folder_keeps_its_key_and_replaced_weights_get_a_new_one(saved_flux, tmp_path):
    folder, other = saved_flux
    kwargs = dict(device="cpu", steps=1, width=32, height=32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = DiffusersGenerator(pretrained=str(folder), **kwargs)
    assert not [w for w in caught if "torch_dtype" in str(w.message)]
    assert first.name.startswith("diffusers-fluxpipeline-")
    moved = tmp_path / "elsewhere" / "renamed"
    shutil.copytree(folder, moved)
    assert DiffusersGenerator(pretrained=str(moved), **kwargs).name == first.name
    # the same shapes, other values: headers and sizes agree, the sampled bytes do not
    weights = "transformer/diffusion_pytorch_model.safetensors"
    assert (other / weights).stat().st_size == (moved / weights).stat().st_size
    shutil.copyfile(other / weights, moved / weights)
    assert DiffusersGenerator(pretrained=str(moved), **kwargs).name != first.name


def test_unknown_settings_of_a_local_folder_are_refused_before_loading(saved_flux, monkeypatch):
    from lmms_genbench.generators import diffusers_backend

    folder, _ = saved_flux
    monkeypatch.setattr(diffusers_backend, "_load_pipeline", lambda *a, **k: pytest.fail("loaded the weights"))
    with pytest.raises(ValueError, match="unknown argument 'max_seq_len': FluxPipeline"):
        DiffusersGenerator(pretrained=str(folder), device="cpu", max_seq_len=512)


def test_resolution_binning_is_known_and_can_be_switched_off():
    import diffusers

    from lmms_genbench.generators import pipeline_rules as rules

    for cls in (diffusers.PixArtSigmaPipeline, diffusers.SanaPipeline):
        assert rules.uses_resolution_binning(cls, {})  # on by default: the log says so at load
        off = rules.check_call_settings(cls, {"use_resolution_binning": "false"})
        assert off == {"use_resolution_binning": False} and not rules.uses_resolution_binning(cls, off)
    assert not rules.uses_resolution_binning(diffusers.StableDiffusion3Pipeline, {})


# ---------------------------------------------------------------- offload
def test_offload_is_refused_on_the_cpu_and_calls_diffusers_offload_otherwise(monkeypatch):
    import diffusers

    from lmms_genbench.generators import diffusers_backend

    with pytest.raises(ValueError, match="offload: model moves weights between the CPU and an accelerator"):
        DiffusersGenerator(pretrained="org/x", device="cpu", offload="model")
    with pytest.raises(ValueError, match="offload: expected one of"):
        DiffusersGenerator(pretrained="org/x", device="cpu", offload="disk")

    class Loaded:
        def __init__(self):
            self.calls = []

        def enable_model_cpu_offload(self, device):
            self.calls.append(("model", device))

        def enable_sequential_cpu_offload(self, device):
            self.calls.append(("sequential", device))

        def to(self, device):
            self.calls.append(("to", device))
            return self

    loaded = Loaded()
    monkeypatch.setattr(diffusers.AutoPipelineForText2Image, "from_pretrained", lambda *a, **k: loaded)
    for offload in ("model", "sequential", "none"):
        diffusers_backend._load_pipeline("org/x", "float16", "cuda:1", offload=offload)
    assert loaded.calls == [("model", "cuda:1"), ("sequential", "cuda:1"), ("to", "cuda:1")]
