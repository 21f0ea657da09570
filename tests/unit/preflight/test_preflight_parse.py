"""The preflight takes the one reading of the command (lmms_genbench.command): every problem of
the headline's broken command in one list, an unknown task alone a problem, a generator's
settings checked once against its pipeline class (an img2img class refused in one line), CUDA
told in what the user typed, and a store that holds every hop recognised without asking for
weights, a GPU or the Hub. In-process; the commands themselves: tests/e2e/test_one_parse_e2e.py."""

import json

import pytest

from lmms_genbench.preflight import check_run
from lmms_genbench.preflight.stored import stored_run
from lmms_genbench.command import read_command

from tests.support import import_graph


@pytest.fixture
def hub_offline(monkeypatch):
    import datasets.config
    from huggingface_hub import constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HOME", "/nonexistent/hf_home")


def test_the_headline_broken_command_lists_every_problem(hub_offline, tmp_path):
    problems = check_run("cycle", {"describer": "qwen25_vl", "generator": "diffusers",
                                   "generator.pretrained": "stabilityai/sdxl-turbo",
                                   "generator.num_inference_step": 4, "describer_batch": 0,
                                   "artifacts": str(tmp_path / "art")},
                         ["mmeception", "sdp_nocap"], "/proc/x")
    text = "\n".join(p.cause for p in problems)
    assert "no lmms-eval model qwen25_vl for the describer (did you mean qwen2_5_vl?)" in text
    assert "no task sdp_nocap (did you mean sdp_nocaps?)" in text
    assert "describer_batch must be an integer >= 1, got 0" in text
    assert "lmms-lab-encoder/MME" in text and "offline" in text
    assert "CUDA is asked for (generator.device=cuda (its default))" in text
    assert "--output_path /proc/x cannot be written" in text
    assert len(problems) == 6, text


def test_an_unknown_task_alone_is_a_problem(tmp_path):
    problems = check_run("cycle", {"preset": "smoke", "artifacts": str(tmp_path)}, ["sdp_nocap"])
    assert [p.cause for p in problems] == ["no task sdp_nocap (did you mean sdp_nocaps?)"]
    assert check_run("cycle", {"preset": "smoke", "artifacts": str(tmp_path)}, ["mmeception_smoke", "mme"]) == []


def test_offload_to_cuda_without_cuda_names_what_the_user_typed(tmp_path):
    from lmms_genbench.smoke.pipelines import tiny_family_path

    args = {"preset": "smoke", "generator": "diffusers", "generator.pretrained": str(tiny_family_path("sd3")),
            "generator.offload": "model", "generator.device": "cuda", "artifacts": str(tmp_path)}
    problems = check_run("cycle", args, ["mmeception_smoke"])
    assert [p.cause.split(" but ")[0] for p in problems] == ["CUDA is asked for (generator.device=cuda)"]
    assert not any("device=cpu they are" in p.cause for p in problems)


def test_a_pipeline_that_does_not_draw_from_text_is_one_line(tmp_path):
    refiner = tmp_path / "refiner"
    refiner.mkdir()
    (refiner / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionXLImg2ImgPipeline"}))
    args = {"preset": "smoke", "generator": "diffusers", "generator.pretrained": str(refiner),
            "generator.device": "cpu", "generator.strength": 0.5, "artifacts": str(tmp_path / "art")}
    problems = check_run("cycle", args, ["mmeception_smoke"])
    assert len(problems) == 1 and "StableDiffusionXLImg2ImgPipeline, which is not a text-to-image" in problems[0].cause


def test_the_preflight_imports_nothing_from_models():
    graph = import_graph.imports(module_level_only=False)
    up = {m: sorted(t for t, _ in edges if t.startswith("lmms_genbench.models"))
          for m, edges in graph.items() if m.startswith("lmms_genbench.preflight")}
    assert {m: t for m, t in up.items() if t} == {}


def _finished_store(root, describer_name, generator_args, chains=2, hops=2):
    generator = root / describer_name / "smoke-gen"
    generator.mkdir(parents=True)
    (generator / "identity.json").write_text(json.dumps({"name": "smoke-gen", "model": "smoke",
                                                         "given": generator_args}))
    namespace = generator / "proto-1"
    namespace.mkdir()
    (namespace / "protocol.json").write_text(json.dumps({"task": "mmeception_smoke", "hops": hops}))
    (namespace / "runs.jsonl").write_text(json.dumps({"task": "mmeception_smoke", "chains": chains, "failed": 0}) + "\n")
    for i in range(chains):
        chain = namespace / f"doc-{i}"
        chain.mkdir()
        for hop in range(hops + 1):
            (chain / f"{hop:03d}.{'png' if hop % 2 == 0 else 'txt'}").write_text("x")
    return namespace


def test_a_store_that_holds_every_hop_is_recognised_and_asks_for_nothing(tmp_path):
    from lmms_genbench.host import model_identity

    args = {"describer": "llava_hf", "describer.pretrained": "org/vlm", "describer.device": "cuda",
            "generator": "smoke", "generator.size": 64, "artifacts": str(tmp_path)}
    namespace = _finished_store(tmp_path, model_identity("llava_hf", {"pretrained": "org/vlm", "device": "cuda"}),
                                {"size": 64})
    command = read_command("cycle", args, ["mmeception_smoke"])
    line = stored_run(command)
    assert line.startswith(f"the store {namespace.parent} holds every hop of mmeception_smoke")
    assert [r.stored for r in command.roles] == [namespace.parent.parent.name, "smoke-gen"]
    assert check_run(command) == []  # no CUDA, no Hub id asked for (org/vlm exists nowhere)
    (namespace / "doc-1" / "002.png").unlink()  # a hop missing: the full check
    assert stored_run(read_command("cycle", args, ["mmeception_smoke"])) is None
    other = {**args, "generator.size": 32}  # another generator setting: not this store
    assert stored_run(read_command("cycle", other, ["mmeception_smoke"])) is None


def test_a_task_of_an_include_path_folder_is_known(tmp_path):
    from lmms_genbench.preflight.task_names import unknown_task_problems

    (tmp_path / "variant").mkdir()
    (tmp_path / "variant" / "mine.yaml").write_text('include: x.yaml\ntask: "mmeception_smoke_t5"\n')
    assert [p.cause for p in unknown_task_problems(["mmeception_smoke_t5"])] == [
        "no task mmeception_smoke_t5 (did you mean mmeception_smoke?)"]
    assert unknown_task_problems(["mmeception_smoke_t5"], [str(tmp_path / "variant")]) == []
