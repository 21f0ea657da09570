"""A broken local folder through the front door: ``lmms-genbench check`` lists it, and the run
itself, with its own preflight turned off (``LMMS_GENBENCH_PREFLIGHT=0``, so the loader is what
stops it), ends on the same line: a diffusers generator, a describer and a unified model. A
``--limit`` lmms-eval 0.7.3 cannot run is refused by both. Each role's broken folders one by one,
in-process: tests/unit/preflight/test_folders.py."""

import shutil

import pytest

from tests.support.lmms_eval_runs import BIN, nonblank_lines, run


def _tiny_llava_without_weights(tmp_path):
    from lmms_genbench.smoke.llava import tiny_llava_path

    folder = tmp_path / "llava-no-weights"
    shutil.copytree(tiny_llava_path(), folder)
    (folder / "model.safetensors").unlink()
    return folder


def _error(stderr: str, prog: str) -> str:
    """The closing line's ``<cause>. Fix: <fix>``."""
    last = nonblank_lines(stderr)[-1]
    assert last.startswith(f"{prog}: error: "), stderr[-3000:]
    return last[len(f"{prog}: error: "):]


def _check(tmp_path, model_args: str, *more: str):
    return run([str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", model_args, "--tasks",
                "mmeception_smoke", "--output_path", str(tmp_path / "logs"), *more], tmp_path, timeout=300,
               LMMS_GENBENCH_ARTIFACTS=str(tmp_path / "art"))


def _run(tmp_path, model_args: str, *more: str, preflight: str = "0"):
    return run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", model_args, "--tasks", "mmeception_smoke",
                "--output_path", str(tmp_path / "logs"), *more], tmp_path, timeout=600,
               LMMS_GENBENCH_ARTIFACTS=str(tmp_path / "art"), LMMS_GENBENCH_PREFLIGHT=preflight)


@pytest.mark.parametrize("role", ["diffusers", "describer", "unified"])
def test_the_check_lists_the_line_the_loader_stops_on(role, tmp_path):
    (tmp_path / "empty").mkdir()
    model_args = {
        "diffusers": f"preset=smoke,generator=diffusers,generator.pretrained={tmp_path / 'empty'},generator.device=cpu",
        "describer": f"preset=smoke,describer.pretrained={_tiny_llava_without_weights(tmp_path) if role == 'describer' else ''}",
        "unified": f"unified=bagel,unified.pretrained={tmp_path / 'empty'},unified.device=cpu",
    }[role]
    checked = _check(tmp_path, model_args)
    assert checked.returncode == 1, checked.stderr[-3000:]
    listed = _error(checked.stderr, "lmms-genbench check")
    stopped = _run(tmp_path, model_args, "--limit", "2")
    assert stopped.returncode == 1, stopped.stderr[-3000:]
    assert "Traceback" not in stopped.stderr
    assert _error(stopped.stderr, "lmms-genbench") == listed  # the loader's own line, word for word
    reason = {"diffusers": "has no model_index.json", "describer": "has no weights",
              "unified": "is not a BAGEL checkpoint folder: it lacks llm_config.json"}[role]
    assert reason in listed, listed
    assert not list((tmp_path / "logs").rglob("*_results.json"))


def test_limit_zero_is_refused_by_the_check_and_the_run(tmp_path):
    checked = _check(tmp_path, "preset=smoke", "--limit", "0")
    assert checked.returncode == 1, checked.stderr[-3000:]
    listed = _error(checked.stderr, "lmms-genbench check")
    assert listed.startswith("--limit 0 gives lmms-eval 0.7.3 no doc to run"), listed
    stopped = _run(tmp_path, "preset=smoke", "--limit", "0", preflight="1")
    assert stopped.returncode == 1 and _error(stopped.stderr, "lmms-genbench") == listed, stopped.stderr[-3000:]
    fraction = _check(tmp_path, "preset=smoke", "--limit", "0.5")
    assert fraction.returncode == 0, fraction.stderr[-3000:]
    assert "--limit 0.5 is a fraction: lmms-eval runs 50% of each task's docs, rounded up" in fraction.stderr
