"""Errors a person can act on, through the real ``lmms-eval`` command: a model or scorer network
that does not load, a task run on the wrong model type, a task that produced no score. Each ends
with one line naming the cause and the fix, with no retried (RetryError) traceback (the
lmms-genbench subcommands and the line itself: tests/unit/core/test_errors.py)."""

import json

from PIL import Image

from tests.support.lmms_eval_runs import BIN, last_line, results_file, run


def _lmms_eval(tmp_path, *args, **env):
    return run([str(BIN / "lmms-eval"), *args, "--output_path", str(tmp_path / "out")], tmp_path, timeout=600, **env)


# ----------------------------------------------------------------------- lmms-eval
def test_a_describer_that_does_not_load_names_its_argument(tmp_path):
    args = ("--model", "cycle", "--model_args", "describer=llava_hf,describer.pretrained=/nonexistent,generator=smoke,"
            "describer.device=cpu", "--tasks", "mmeception_smoke")
    # the run's preflight names it before any weight loads
    proc = _lmms_eval(tmp_path, *args)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "RetryError" not in proc.stderr + proc.stdout
    assert last_line(proc.stderr).startswith(
        "lmms-genbench: error: the describer llava_hf did not load: its weights describer.pretrained=/nonexistent "
        "do not exist (FileNotFoundError: ")
    checked = last_line(proc.stderr)
    # and so does the load itself, where the preflight is switched off: the same reading of the folder
    # (host.read_weights_folder) before the class loads, so the same line (issue 53)
    proc = _lmms_eval(tmp_path, *args, LMMS_GENBENCH_PREFLIGHT="0")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "RetryError" not in proc.stderr + proc.stdout
    assert last_line(proc.stderr) == checked
    assert last_line(proc.stderr).endswith(
        "Fix: give describer.pretrained=<an existing checkpoint folder or a hub id>, "
        "or run offline with --model_args preset=smoke")


def test_a_scorer_network_that_does_not_load_names_the_variable(tmp_path):
    proc = _lmms_eval(tmp_path, "--model", "cycle", "--model_args", f"preset=smoke,artifacts={tmp_path / 'art'}",
                      "--tasks", "mmeception_smoke", "--limit", "2", LMMS_GENBENCH_IMAGE_ENCODER="/nonexistent")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "RetryError" not in proc.stderr + proc.stdout
    last = last_line(proc.stderr)
    assert last.startswith("lmms-genbench: error: the genception scorer of mmeception_smoke could not load its "
                           "image_encoder network '/nonexistent' (set by LMMS_GENBENCH_IMAGE_ENCODER=/nonexistent)")
    assert "Fix: point LMMS_GENBENCH_IMAGE_ENCODER at a network that loads here" in last
    assert "preset=smoke" in last


def test_a_cycle_task_on_another_model_type_says_use_the_cycle_model(tmp_path):
    from lmms_genbench.smoke.llava import tiny_llava_path

    proc = _lmms_eval(tmp_path, "--model", "llava_hf", "--model_args",
                      f"pretrained={tiny_llava_path()},device=cpu,device_map=cpu,dtype=float32",
                      "--tasks", "mmeception_smoke", "--limit", "1", "--gen_kwargs", "max_new_tokens=4")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "RetryError" not in proc.stderr + proc.stdout
    last = last_line(proc.stderr)
    assert last.startswith("lmms-genbench: error: the genception scorer got response is not a chain")
    assert last.endswith("must run with --model cycle. Fix: run them with --model cycle "
                         "(--model_args describer=...,generator=... or unified=...)")


def test_a_task_with_no_score_says_so_last(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    (images / "broken.png").write_bytes(b"not a png")
    Image.new("RGB", (4, 4)).save(images / "truncated.jpg")
    (images / "truncated.jpg").write_bytes((images / "truncated.jpg").read_bytes()[:20])
    proc = _lmms_eval(tmp_path, "--model", "cycle", "--model_args", f"preset=smoke,artifacts={tmp_path / 'art'}",
                      "--tasks", "mmeception_folder", MMECEPTION_IMAGE_DIR=str(images))
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = results_file(tmp_path / "out")[1]["results"]["mmeception_folder"]
    assert metrics["n_scored,none"] == 0 and metrics["n_failed,none"] == 2
    assert last_line(proc.stderr).startswith(
        "lmms-genbench: mmeception_folder produced no score: 0 of 2 docs scored (seed failed at hop 0 (2))")
    (report,) = (tmp_path / "art").rglob("report.json")
    failed = json.loads(report.read_text())["failed_docs"]
    assert [f["chain_id"] for f in failed] == ["broken.png", "truncated.jpg"]
    assert all("unreadable image" in f["reason"] for f in failed)
