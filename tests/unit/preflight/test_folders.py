"""Broken local folders, role by role: each one the run would stop on is listed by the preflight
with the run's own line (the cause ``lmms-genbench check`` prints is the one the run ends with),
and the intact folder passes both. The run's side is the run's own code: ``build_roles`` of the
``--model cycle`` command and the first use of the role it builds; it stops at the loader's
folder reading, before any weight loads. Through the commands themselves:
tests/e2e/test_preflight_folders_e2e.py."""

import json
import os
import shutil
from pathlib import Path

import pytest

from lmms_genbench.command import read_command
from lmms_genbench.core.errors import ActionableError
from lmms_genbench.preflight import check_run
from lmms_genbench.preflight.tasks import limit_note, limit_problem


def _copy(source: Path, target: Path) -> Path:
    """``source`` linked file by file (its weights are not copied); edit a file by replacing it."""
    shutil.copytree(source, target, copy_function=os.symlink)
    return target


def _write(path: Path, text: str) -> None:
    if path.is_symlink():
        path.unlink()
    path.write_text(text)


def _edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    _write(path, json.dumps(data))


def _broken(kind: str, base: Path, tmp: Path) -> Path:
    """One broken folder of ``kind``; ``base``: an intact folder of the role."""
    if kind == "missing":
        return tmp / "no_such_folder"
    if kind == "empty":
        (tmp / "empty").mkdir()
        return tmp / "empty"
    if kind == "a file":
        (tmp / "weights.bin").write_bytes(b"not a folder")
        return tmp / "weights.bin"
    folder = _copy(base, tmp / kind.replace(" ", "_"))
    action, _, name = kind.partition(" ")
    if action == "without":  # a file or a folder the loader reads
        target = folder / name
        shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()
    elif action == "unknown":  # a config naming a class that does not exist
        config, key, value = {"pipeline": ("model_index.json", "_class_name", "NoSuchPipeline"),
                              "model_type": ("config.json", "model_type", "no_such_model")}[name]
        _edit_json(folder / config, **{key: value})
    elif action == "component":  # model_index.json naming an unknown class for unet/
        _edit_json(folder / "model_index.json", unet=["diffusers", "NoSuchUNet2DModel"])
    elif action == "unreadable":
        _write(folder / name, "{ not json")
    return folder


def _run_error(model_args: dict, role: str) -> ActionableError | None:
    """What the run stops on: the roles built as ``--model cycle`` builds them, ``role`` used."""
    from lmms_genbench.models.cycle_roles import build_roles

    command = read_command("cycle", model_args)
    try:
        describer, generator, _ = build_roles(command)
        (describer if role == "describer" else generator).load()
    except ActionableError as exc:
        return exc
    return None


def _check_causes(model_args: dict) -> list[str]:
    return [p.cause for p in check_run(read_command("cycle", model_args))]


def _agree(model_args: dict, role: str) -> None:
    stopped = _run_error(model_args, role)
    listed = [(p.cause, p.fix) for p in check_run(read_command("cycle", model_args))]
    assert stopped is not None, f"the run did not stop on {model_args}"
    assert (stopped.cause, stopped.fix) in listed, (stopped.message, listed)  # the run's line, cause and fix
    assert "(" in stopped.cause  # the loader's reason, in its own words, after the role's line


@pytest.fixture(scope="module")
def sdxl():
    from lmms_genbench.smoke.pipelines import tiny_family_path

    return tiny_family_path("sdxl")


DIFFUSERS = ["missing", "empty", "a file", "without model_index.json", "without unet", "without vae/diffusion_pytorch_model.safetensors",
             "without text_encoder/model.safetensors", "without scheduler/scheduler_config.json",
             "without tokenizer/tokenizer.json", "unknown pipeline", "component unet", "unreadable model_index.json"]


@pytest.mark.parametrize("kind", DIFFUSERS)
def test_a_broken_diffusers_folder_is_listed_with_the_runs_line(kind, sdxl, tmp_path):
    folder = _broken(kind, sdxl, tmp_path)
    _agree({"preset": "smoke", "generator": "diffusers", "generator.pretrained": str(folder),
            "generator.device": "cpu", "artifacts": str(tmp_path / "art")}, "generator")


def test_an_intact_diffusers_folder_passes_the_check(sdxl, tmp_path):
    args = {"preset": "smoke", "generator": "diffusers", "generator.pretrained": str(_copy(sdxl, tmp_path / "p")),
            "generator.device": "cpu", "artifacts": str(tmp_path / "art")}
    assert _check_causes(args) == []


@pytest.fixture(scope="module")
def llava():
    from lmms_genbench.smoke.llava import tiny_llava_path

    return tiny_llava_path()


DESCRIBER = ["missing", "empty", "a file", "without config.json", "without model.safetensors", "without tokenizer.json",
             "without processor_config.json", "unknown model_type", "unreadable config.json"]


@pytest.mark.parametrize("kind", DESCRIBER)
def test_a_broken_describer_folder_is_listed_with_the_runs_line(kind, llava, tmp_path):
    folder = _broken(kind, llava, tmp_path)
    _agree({"preset": "smoke", "describer.pretrained": str(folder), "artifacts": str(tmp_path / "art")}, "describer")


def test_an_intact_describer_folder_passes_the_check(llava, tmp_path):
    args = {"preset": "smoke", "describer.pretrained": str(_copy(llava, tmp_path / "d")),
            "artifacts": str(tmp_path / "art")}
    assert _check_causes(args) == []


@pytest.fixture(scope="module")
def janus():
    from lmms_genbench.smoke.janus import tiny_janus_path

    return tiny_janus_path()


UNIFIED = [("janus", kind) for kind in ("missing", "empty", "a file", "without config.json", "without model.safetensors",
                                         "without processor_config.json", "unknown model_type")]
UNIFIED += [("bagel", kind) for kind in ("empty", "a file")] + [("blip3o", "empty"), ("vila_u", "empty"),
                                                                ("showo", "empty")]


@pytest.mark.parametrize("name,kind", UNIFIED)
def test_a_broken_unified_folder_is_listed_with_the_runs_line(name, kind, janus, tmp_path):
    folder = _broken(kind, janus, tmp_path)
    _agree({"unified": name, "unified.pretrained": str(folder), "unified.device": "cpu",
            "artifacts": str(tmp_path / "art")}, "unified")


def test_an_intact_unified_folder_passes_the_check(janus, tmp_path):
    args = {"unified": "janus", "unified.pretrained": str(_copy(janus, tmp_path / "j")), "unified.device": "cpu",
            "unified.dtype": "float32", "artifacts": str(tmp_path / "art")}
    assert _check_causes(args) == []


def test_limits_lmms_eval_reads_otherwise_than_they_look_are_refused_or_explained():
    assert "did not find any docs" in limit_problem(0.0).cause  # lmms-eval 0.7.3 keeps instances[:0]
    assert "refused by lmms-eval" in limit_problem(-2.0).cause
    assert limit_problem(-1.0) is None and limit_problem(None) is None and limit_problem(3.0) is None
    assert "50% of each task's docs, rounded up" in limit_note(0.5)
    assert "read as 2 docs" in limit_note(2.5)
    assert limit_note(3.0) is None and limit_note(-1.0) is None
