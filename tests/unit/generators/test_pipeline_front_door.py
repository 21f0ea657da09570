"""Pipeline settings as users give them: ``generator.pretrained=<saved folder>`` plus
``generator.<name>=<value>`` in ``--model_args``, for each of the eight tiny diffusers families
(lmms_genbench/smoke/pipelines.py). The model is built from the model_args string exactly as
lmms-eval builds it (``create_from_arg_string``); one test runs the real ``lmms-eval`` command.

Plumbing on tiny random-weight replicas only: no real checkpoint was loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from lmms_genbench.generators.diffusers_backend import DiffusersGenerator
from lmms_genbench.smoke.pipelines import tiny_family_path

from tests.support.lmms_eval_runs import BIN, results_file, run
from tests.support.tiny_pipelines import PipelineRecorder

# Kandinsky 3 sizes its latents for a scale-8 MoVQ in 64-px steps; the others draw 32 px
SIZES = {"kandinsky3": 64}
#: family -> (a setting its __call__ takes, the value as a command line gives it, as the call gets it)
SETTINGS = {
    "sd3": ("max_sequence_length", "512", 512),
    "flux": ("true_cfg_scale", "2", 2.0),
    "sdxl": ("guidance_rescale", "0.7", 0.7),
    "playground": ("guidance_rescale", "0.5", 0.5),
    "pixart_sigma": ("use_resolution_binning", "false", False),
    "sana": ("use_resolution_binning", "false", False),
    "lumina2": ("cfg_trunc_ratio", "0.5", 0.5),
}


def _model_args(family: str, extra: str = "") -> str:
    size = SIZES.get(family, 32)
    args = ("preset=smoke,generator=diffusers,"
            f"generator.pretrained={tiny_family_path(family)},generator.device=cpu,generator.dtype=float32,"
            f"generator.steps=1,generator.width={size},generator.height={size}")
    return f"{args},{extra}" if extra else args


def _cycle(model_args: str, tmp_path):
    """The cycle model as lmms-eval's evaluator makes it from ``--model_args``."""
    from lmms_eval.models import get_model

    return get_model("cycle").create_from_arg_string(f"{model_args},artifacts={tmp_path}",
                                                     {"batch_size": 1, "device": None})


#: in the default run (the rest with --e2e)
QUICK = ("sd3", "flux", "sana")


@pytest.mark.parametrize("family", [f if f in QUICK else pytest.param(f, marks=pytest.mark.integration)
                                    for f in sorted(SETTINGS)])
def test_a_setting_from_the_model_args_reaches_the_pipeline_and_the_key(family, tmp_path):
    name, given, value = SETTINGS[family]
    plain = _cycle(_model_args(family), tmp_path)
    model = _cycle(_model_args(family, f"generator.{name}={given}"), tmp_path)
    assert model.generator.name != plain.generator.name  # the key records the setting
    generator = model.generator.load()  # what the first drawing does: the weights load, the probe draws
    assert isinstance(generator, DiffusersGenerator) and generator.name == model.generator.name
    assert generator.call_settings[name] == value
    recorder = PipelineRecorder(generator.pipeline)
    generator.pipeline = recorder
    (image,) = generator.generate(["a red cat on a blue rug"], [0])
    assert recorder.calls[0][name] == value and image.size == (SIZES.get(family, 32),) * 2


def test_sd3_512_tokens_from_a_folder_are_what_t5_reads(tmp_path):
    generator = _cycle(_model_args("sd3", "generator.max_sequence_length=512"), tmp_path).generator.load()
    assert generator.text_budget["text_encoder_3:T5EncoderModel"] == 512


def test_kandinsky3_takes_no_setting_and_says_so_in_one_line(tmp_path):
    from lmms_genbench.core.errors import ActionableError

    with pytest.raises(ActionableError) as caught:
        _cycle(_model_args("kandinsky3", "generator.max_sequence_length=512"), tmp_path)
    line = str(caught.value)
    assert "unknown argument 'max_sequence_length': Kandinsky3Pipeline" in line and "\n" not in line


def test_the_accepted_names_are_whole_in_the_one_line(tmp_path):
    from lmms_genbench.core.errors import ActionableError

    with pytest.raises(ActionableError) as caught:
        _cycle(_model_args("sdxl", "generator.guidance_rescal=0.7"), tmp_path)
    line = str(caught.value)
    assert "passes through only guidance_rescale, " in line  # the closest name first
    listed = line.split("passes through only ", 1)[1].split(" and ", 1)[0].split(")", 1)[0]
    names = set(DiffusersGenerator.__init__.__code__.co_varnames) | set(
        __import__("lmms_genbench.generators.pipeline_rules", fromlist=["x"]).passable_settings(
            __import__("diffusers").StableDiffusionXLPipeline))
    assert all(each.strip() in names for each in listed.split(","))  # no name cut in two
    assert "more (its __call__ arguments)" in line


def test_a_hub_id_not_downloaded_yet_is_checked_against_the_class_its_model_index_names(monkeypatch):
    """The class comes from model_index.json, fetched alone (no weights) when the cache lacks it."""
    import diffusers

    from lmms_genbench.generators import diffusers_backend

    asked = []

    def load_config(pretrained, revision=None, local_files_only=False):
        asked.append(local_files_only)
        if local_files_only:
            raise OSError("not in the cache")
        return {"_class_name": "FluxPipeline"}

    monkeypatch.setattr(diffusers.DiffusionPipeline, "load_config", staticmethod(load_config))
    monkeypatch.setattr(diffusers_backend, "_load_pipeline", lambda *a, **k: pytest.fail("loaded the weights"))
    plan = DiffusersGenerator.plan(pretrained="org/flux-like", device="cpu", true_cfg_scale="2")
    assert plan is not None and asked == [True, False]
    with pytest.raises(ValueError, match="unknown argument 'true_cfg': FluxPipeline"):
        DiffusersGenerator(pretrained="org/flux-like", device="cpu", true_cfg="2")


@pytest.mark.integration
def test_settings_run_cycles_through_the_lmms_eval_command(tmp_path):
    """SD3 max_sequence_length=512, FLUX true_cfg_scale=2, PixArt-Sigma and Sana without
    resolution binning: one ``lmms-eval --config`` call, a scored chain each, and the store
    keyed by a name that holds the setting."""
    runs = {"sd3": "generator.max_sequence_length=512", "flux": "generator.true_cfg_scale=2",
            "pixart_sigma": "generator.use_resolution_binning=false", "sana": "generator.use_resolution_binning=false"}
    art = tmp_path / "art"
    configs = [{"model": "cycle", "model_args": f"{_model_args(family, extra)},artifacts={art}",
                "tasks": "mmeception_smoke", "limit": 1, "output_path": str(tmp_path / "out" / family)}
               for family, extra in runs.items()]
    config = tmp_path / "runs.yaml"
    config.write_text(yaml.safe_dump(configs))
    proc = run([str(BIN / "lmms-eval"), "--config", str(config)], tmp_path, cwd=tmp_path, timeout=1200)
    log = proc.stdout + proc.stderr
    for family, extra in runs.items():
        metrics = results_file(tmp_path / "out" / family)[1]["results"]["mmeception_smoke"]
        assert metrics["n_scored,none"] == 1 and metrics["n_failed,none"] == 0, (family, log[-3000:])
        name, value = extra.split("=")
        args = dict(pair.split("=", 1) for pair in _model_args(family).split(",") if pair.startswith("generator."))
        kwargs = {k[len("generator."):]: v for k, v in args.items()}
        with_setting = DiffusersGenerator.plan(**kwargs, **{name[len("generator."):]: value}).name
        without = DiffusersGenerator.plan(**kwargs).name
        assert with_setting != without
        stored = {p.name for p in art.glob("*/*") if p.is_dir()}
        assert with_setting in stored, (family, stored)
    # the budget line reaches lmms-eval's own log at INFO, our counting adds no transformers warning
    assert "StableDiffusion3Pipeline reads" in log and "512 tokens with text_encoder_3:T5EncoderModel" in log
    assert "Token indices sequence length" not in log


@pytest.mark.integration
def test_a_pipeline_that_cannot_draw_stops_before_any_description(tmp_path):
    """SD3 refuses max_sequence_length above 512 only when it draws: the probe drawing at load
    ends the run in one line, exit 1, with nothing described."""
    art = tmp_path / "art"
    proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args",
                f"{_model_args('sd3', 'generator.max_sequence_length=1000')},artifacts={art}",
                "--tasks", "mmeception_smoke", "--limit", "2", "--output_path", str(tmp_path / "out")],
               tmp_path, cwd=tmp_path)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert err[-1].startswith("lmms-genbench: error: the generator diffusers did not load")
    assert "probe picture" in err[-1] and "max_sequence_length" in err[-1]
    described = [p for p in art.rglob("*.txt")]
    assert described == []  # no describe call ran: each would have stored its text
    assert not list((tmp_path / "out").rglob("*_results.json"))


def test_the_engine_loads_the_generator_before_its_first_description(tmp_path):
    """Counted at the engine: a generator that fails to load ends the run with zero describe calls."""
    from PIL import Image

    from lmms_genbench.core.errors import ActionableError
    from lmms_genbench.engine import ArtifactStore, ChainJob, ChainSpec, CycleEngine
    from lmms_genbench.generators import GeneratorPlan, LazyGenerator

    from tests.support.fakes import FakeDescriber

    calls = []

    class Counting(FakeDescriber):
        def describe(self, images, *args, **kwargs):
            calls.append(len(images))
            return super().describe(images, *args, **kwargs)

    def build():
        raise ActionableError("the generator diffusers did not load (probe failed)", "fix it")

    generator = LazyGenerator(GeneratorPlan("diffusers-x-1234", 2), build)
    store = ArtifactStore(tmp_path)
    spec = ChainSpec.from_request("Describe.", {"iterations": 1, "generate_prompt": "{description}"})
    ns = store.namespace("d", generator.name, spec.protocol_id("t"))
    seeds = [Image.new("RGB", (8, 8), (i, 1, 1)) for i in range(3)]
    jobs = [ChainJob(str(i), spec, store.chain(ns, str(i)), (lambda s=s: s)) for i, s in enumerate(seeds)]
    with pytest.raises(ActionableError):
        CycleEngine(Counting(), generator, describer_batch=2).run(jobs)
    assert calls == []
    assert not list(Path(tmp_path).rglob("*.txt"))
    json.dumps(calls)
