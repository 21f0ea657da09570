"""Pipeline settings as users give them: ``generator.pretrained=<saved folder>`` plus
``generator.<name>=<value>`` in ``--model_args``, for each of the eight tiny diffusers families
(lmms_genbench/smoke/pipelines.py). The model is built from the model_args string exactly as
lmms-eval builds it (``create_from_arg_string``); the families left out of the default suite
and the real ``lmms-eval`` command: tests/e2e/test_pipeline_front_door_e2e.py.

Plumbing on tiny random-weight replicas only: no real checkpoint was loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmms_genbench.generators.diffusers_backend import DiffusersGenerator

from tests.support.pipeline_families import (
    QUICK,
    SETTINGS,
    check_setting_reaches_the_pipeline,
    cycle_from_model_args,
    family_model_args,
)


@pytest.mark.parametrize("family", [f for f in sorted(SETTINGS) if f in QUICK])
def test_a_setting_from_the_model_args_reaches_the_pipeline_and_the_key(family, tmp_path):
    check_setting_reaches_the_pipeline(family, tmp_path)


def test_sd3_512_tokens_from_a_folder_are_what_t5_reads(tmp_path):
    generator = cycle_from_model_args(family_model_args("sd3", "generator.max_sequence_length=512"), tmp_path).generator.load()
    assert generator.text_budget["text_encoder_3:T5EncoderModel"] == 512


def test_kandinsky3_takes_no_setting_and_says_so_in_one_line(tmp_path):
    from lmms_genbench.core.errors import ActionableError

    with pytest.raises(ActionableError) as caught:
        cycle_from_model_args(family_model_args("kandinsky3", "generator.max_sequence_length=512"), tmp_path)
    line = str(caught.value)
    assert "unknown argument 'max_sequence_length': Kandinsky3Pipeline" in line and "\n" not in line


def test_the_accepted_names_are_whole_in_the_one_line(tmp_path):
    from lmms_genbench.core.errors import ActionableError

    with pytest.raises(ActionableError) as caught:
        cycle_from_model_args(family_model_args("sdxl", "generator.guidance_rescal=0.7"), tmp_path)
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
