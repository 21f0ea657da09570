"""The preflight through the front door: ``lmms-genbench check`` with a whole lmms-eval command
line, and the lmms-eval command itself, which runs the same check before any weight loads.
Every problem at once, exit 1, in seconds; the Hub unreachable or offline is one line that
names the endpoint. No Hub is reached: an endpoint nothing listens on stands for a machine
cut off (the local test Hub, tests/support/localhub, serves the reachable cases). The runs
through the commands themselves: tests/e2e/test_preflight_e2e.py."""

import errno
import re
import time

from lmms_genbench.preflight import Problem, check_run
from lmms_genbench.preflight.hub import HubProbe, collapse
from lmms_genbench.command import Role
from lmms_genbench.preflight.roles import device_problem

from tests.support.lmms_eval_runs import BIN, HEADLINE, NOWHERE, nonblank_lines, run


def test_check_lists_every_problem_of_one_bad_command_at_once(tmp_path):
    bad = (HEADLINE.replace("describer.pretrained=", "describer.colour=red,describer.pretrained=")
           + f",artifacts={tmp_path}/store")
    (tmp_path / "store").write_text("a file where the store's folder should be")
    start = time.monotonic()
    proc = run([str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", bad,
                "--tasks", "mmeception,sdp_nocaps,mmeception_folder", "--limit", "2", "--log_samples",
                "--output_path", str(tmp_path / "logs")], tmp_path, timeout=120,
               HF_HUB_OFFLINE="0", HF_DATASETS_OFFLINE="0", TRANSFORMERS_OFFLINE="0", HF_ENDPOINT=NOWHERE,
               MMECEPTION_IMAGE_DIR=str(tmp_path / "no_such_folder"), CUDA_VISIBLE_DEVICES="")
    seconds = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    listed = [line for line in nonblank_lines(proc.stderr) if re.match(r"\s+\d+\. ", line)]
    text = "\n".join(listed)
    assert len(listed) >= 3, proc.stderr
    assert f"the Hugging Face Hub at {NOWHERE} cannot be reached" in text and "HF_HUB_OFFLINE=1" in text
    assert "describer.pretrained=Qwen/Qwen2.5-VL-7B-Instruct" in text and "dataset lmms-lab-encoder/MME" in text
    assert "describer.colour is not an argument of lmms-eval's qwen2_5_vl class" in text
    assert "CUDA is asked for" in text
    assert "mmeception_folder" in text and "no_such_folder" in text
    assert f"the artifact store {tmp_path}/store cannot be written" in text
    assert nonblank_lines(proc.stderr)[-1] == f"lmms-genbench check: error: {len(listed)} problems found, listed above"
    assert seconds < 60, seconds  # seconds: nothing loads, the refused Hub is asked once


def test_check_passes_the_offline_smoke_command(tmp_path):
    proc = run([str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", "preset=smoke",
                "--tasks", "mmeception_smoke", "--output_path", str(tmp_path / "logs")], tmp_path, timeout=120,
               LMMS_GENBENCH_ARTIFACTS=str(tmp_path / "art"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert nonblank_lines(proc.stderr)[-1] == "lmms-genbench check: ok: nothing missing for --model cycle --tasks mmeception_smoke"
    assert not (tmp_path / "art").exists() and not (tmp_path / "logs").exists()  # checked, nothing written


def test_the_hub_lines_collapse_into_one_that_names_the_endpoint_and_the_offline_switch():
    probe = HubProbe.__new__(HubProbe)
    probe.endpoint, probe.offline, probe.unreachable = NOWHERE, False, "ConnectError: refused"
    other = Problem("CUDA is asked for", "use a GPU")
    found = collapse([Problem("a: not checked", "", hub="describer.pretrained=a/b"), other,
                      Problem("b: not checked", "", hub="dataset c/d")], probe)
    assert found[1:] == [other]
    assert found[0].cause == (f"the Hugging Face Hub at {NOWHERE} cannot be reached (ConnectError: refused); this run "
                              "reads describer.pretrained=a/b, dataset c/d from it")
    assert "HF_HUB_OFFLINE=1" in found[0].fix and "HF_ENDPOINT" in found[0].fix
    probe.offline = True
    alone = Problem("task t could not load its dataset c/d: this run is offline", "fix", hub="dataset c/d")
    assert collapse([alone], probe) == [alone]  # one offline miss keeps its own, more precise line


def test_cuda_asked_for_is_one_problem_naming_every_role():
    roles = [Role("describer", "llava_hf", {}, "describer.", defaults={"device": "cuda"}),
             Role("generator", "diffusers", {"device": "cuda:1"}, "generator."),
             Role("generator", "smoke", {"device": "cpu"}, "generator.")]
    problem = device_problem(roles, cuda_devices=0)
    assert problem.cause.startswith("CUDA is asked for (describer.device=cuda (its default), generator.device=cuda:1)")
    assert "describer.device=cpu, generator.device=cpu" in problem.fix
    assert device_problem(roles, cuda_devices=2) is None
    assert "8 processes" in device_problem(roles, cuda_devices=2, processes=8).cause
    # lmms-eval's qwen2_5_vl puts inputs on cuda while its device_map is "auto": the hint names both
    qwen = [Role("describer", "qwen2_5_vl", {}, "describer.", defaults={"device": "cuda", "device_map": "auto"})]
    assert "describer.device=cpu, describer.device_map=cpu (slow" in device_problem(qwen, cuda_devices=0).fix


def test_an_api_describer_without_its_key_and_a_missing_folder_are_named(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    problems = check_run("cycle", {"describer": "openai", "describer.model_version": "gpt-4o", "generator": "diffusers",
                                   "generator.pretrained": str(tmp_path / "gone"), "generator.device": "cpu",
                                   "artifacts": str(tmp_path / "art")}, ["mmeception_smoke"])
    causes = [p.cause for p in problems]
    assert "the describer openai calls an API and OPENAI_API_KEY is not set" in causes
    assert any(c.startswith(f"the generator diffusers did not load: its weights generator.pretrained={tmp_path}/gone "
                            "do not exist") for c in causes), causes
    assert len(problems) == 2, causes


def test_unwritable_folders_are_found_without_writing_the_store(tmp_path, monkeypatch):
    import tempfile

    from lmms_genbench import preflight

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", full)
    problems = preflight._store_problems("cycle", {"artifacts": str(tmp_path / "a" / "b")}, None)
    assert [p.cause for p in problems] == [f"the artifact store {tmp_path}/a/b cannot be written (No space left on device)"]
    assert not (tmp_path / "a").exists()


def test_a_unified_model_reading_several_repositories_has_each_checked():
    from lmms_genbench.preflight.roles import weights_needed

    role = Role("unified", "showo", {"pretrained": "/nowhere/show-o", "device": "cpu"}, "unified.")
    assert weights_needed(role) == [
        ("unified.pretrained=/nowhere/show-o", "/nowhere/show-o", None, "pytorch_model.safetensors"),
        ("unified.vq_model=showlab/magvitv2 (the class default)", "showlab/magvitv2", None, "pytorch_model.safetensors"),
        ("unified.tokenizer=microsoft/phi-1_5 (the class default)", "microsoft/phi-1_5", None, "tokenizer_config.json"),
    ]
    janus = Role("unified", "janus", {"pretrained": "deepseek-community/Janus-Pro-7B"}, "unified.")
    assert [w[1:] for w in weights_needed(janus)] == [("deepseek-community/Janus-Pro-7B", None, "config.json")]


def test_a_native_unified_models_default_device_is_cuda():
    problem = device_problem([Role("unified", "showo", {}, "unified.")], cuda_devices=0)
    assert problem is not None and "unified.device=cuda (its default)" in problem.cause
    assert "unified.device=cpu" in problem.fix


def test_a_unified_models_default_checkpoint_is_checked_like_a_given_one():
    from lmms_genbench.command import read_command
    from lmms_genbench.preflight.roles import weights_of

    command = read_command("cycle", {"unified": "vila_u"})
    assert not command.problems
    (role,) = command.roles
    assert weights_of(role) == ("unified.pretrained=mit-han-lab/vila-u-7b-256 (the class default)",
                                "mit-han-lab/vila-u-7b-256", None, "config.json")
    (role,) = read_command("cycle", {"unified": "janus"}).roles  # no default checkpoint: nothing to check
    assert weights_of(role) is None


def test_a_blip3o_checkpoint_is_known_by_its_decoder_folder():
    from lmms_genbench.preflight.roles import weights_of

    role = Role("unified", "blip3o", {"pretrained": "BLIP3o/BLIP3o-Model-4B"}, "unified.")
    assert weights_of(role)[1:] == ("BLIP3o/BLIP3o-Model-4B", None, "diffusion-decoder/model_index.json")
