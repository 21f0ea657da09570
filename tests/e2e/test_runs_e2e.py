"""End to end through lmms-eval with runs of their own: simple_evaluate and sdp resume (nothing
recomputed), bad input counted per doc, two processes giving the same scores. lmms-eval exits 0
even when a task crashed, so every test reads the results files (what the one shared smoke run
shows: tests/smoke/test_smoke_results.py)."""

import glob
import json
import math
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.support.lmms_eval_runs import BIN, offline_env, read_results, run, sample_chain
from tests.support.lmms_eval_runs import samples as _samples
from tests.support.lmms_eval_runs import task_metrics

_env = offline_env


def _lmms_eval(args, tmp_path, cwd, timeout=900, **env):
    return run([str(BIN / "lmms-eval"), *args], tmp_path, cwd=cwd, timeout=timeout, **env)


def _simple_evaluate(tmp_path, model_args, limit=None, task="mmeception_smoke"):
    from lmms_eval.evaluator import simple_evaluate

    results = simple_evaluate(
        model="cycle", model_args=model_args, tasks=[task], limit=limit, log_samples=False,
    )
    return task_metrics(results, task)


def _runs(art):
    files = list(Path(art).rglob("runs.jsonl"))
    assert len(files) == 1
    return [json.loads(line) for line in files[0].read_text().splitlines()]


def test_simple_evaluate_resume_recomputes_nothing(tmp_path, monkeypatch):
    for key, value in _env(tmp_path).items():
        monkeypatch.setenv(key, value)
    staged, fresh = tmp_path / "staged", tmp_path / "fresh"

    first = _simple_evaluate(tmp_path, f"preset=smoke,artifacts={staged},stop_after_hop=2", limit=3)
    assert first["n_scored"] == 0 and first["n_failed"] == 3  # incomplete chains are failures, never GC@1
    stored = {p: p.stat().st_mtime_ns for p in staged.rglob("*.*") if p.suffix in (".png", ".txt")}
    assert len(stored) == 9  # seed, description and drawing of iteration 1, three docs

    resumed = _simple_evaluate(tmp_path, f"preset=smoke,artifacts={staged}", limit=3)
    runs = _runs(staged)
    assert runs[1]["describe_items"] == 6 and runs[1]["generate_items"] == 6  # iterations 2 and 3 only
    assert runs[1]["hops_reused"] == 9
    assert all(p.stat().st_mtime_ns == t for p, t in stored.items())

    again = _simple_evaluate(tmp_path, f"preset=smoke,artifacts={staged}", limit=3)
    assert _runs(staged)[2]["describe_items"] == 0 and _runs(staged)[2]["generate_items"] == 0

    uninterrupted = _simple_evaluate(tmp_path, f"preset=smoke,artifacts={fresh}", limit=3)
    assert resumed["n_scored"] == 3
    for key in ("gc@3", "s@1", "s@2", "s@3"):
        assert resumed[key] == pytest.approx(uninterrupted[key], abs=1e-6)
        assert again[key] == resumed[key]


def _write_bad_folder(root):
    photos = root / "photos"
    photos.mkdir(parents=True)
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)
    Image.fromarray(noise).save(photos / "good.png")
    Image.new("RGBA", (40, 30), (255, 0, 0, 128)).save(photos / "rgba.png")
    Image.fromarray(noise).convert("P").save(photos / "palette.png")
    Image.fromarray((np.arange(64 * 64, dtype=np.uint16).reshape(64, 64) * 16)).save(photos / "gray16.png")
    Image.new("L", (50, 50), 90).save(photos / "gray.png")
    Image.new("RGB", (1, 1), (9, 9, 9)).save(photos / "one_pixel.png")
    Image.new("RGB", (4096, 3072), (30, 60, 90)).save(photos / "very_large.png")
    Image.fromarray(noise).save(photos / "truncated.jpg", quality=90)
    data = (photos / "truncated.jpg").read_bytes()
    (photos / "truncated.jpg").write_bytes(data[: len(data) // 3])
    (photos / "not_an_image.png").write_text("this is not a png")


def test_folder_task_counts_bad_images_and_keeps_the_rest(tmp_path):
    images = tmp_path / "images"
    _write_bad_folder(images)
    out = tmp_path / "out"
    proc = _lmms_eval(
        ["--model", "cycle", "--model_args", f"preset=smoke,artifacts={tmp_path / 'art'}",
         "--tasks", "mmeception_folder", "--output_path", str(out), "--log_samples",
         "--gen_kwargs", "max_new_tokens=24", "--verbosity", "ERROR"],
        tmp_path, cwd=tmp_path,
        # the folder task scores with the paper's networks; a smoke model's chains are
        # scored with the offline ones, with no variable to set
        MMECEPTION_IMAGE_DIR=str(images),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = task_metrics(read_results(out), "mmeception_folder")
    assert metrics["n_scored"] == 7 and metrics["n_failed"] == 2
    assert math.isfinite(metrics["gc@3"])
    assert "cycle: chains" not in proc.stderr  # --verbosity ERROR: no progress bar
    failed = {}
    for sample in _samples(out, "mmeception_folder"):
        chain = sample_chain(sample)
        if not chain.ok:
            failed[chain.chain_id] = chain.failure
    assert set(failed) == {"photos/truncated.jpg", "photos/not_an_image.png"}
    assert all(f.stage == "seed" and "unreadable image" in f.reason for f in failed.values())


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.distributed
def test_two_processes_give_the_same_scores(tmp_path):
    common = ["--tasks", "mmeception_smoke", "--limit", "5"]
    two = subprocess.run(
        # `--cpu` alone runs one process; several CPU processes need the multi-process
        # launcher with ACCELERATE_USE_CPU (gloo backend)
        [str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
         "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
         "-m", "lmms_eval", "--model", "cycle", "--model_args", f"preset=smoke,artifacts={tmp_path / 'a2'}",
         *common, "--output_path", str(tmp_path / "out2")],
        cwd=tmp_path, env=_env(tmp_path, ACCELERATE_USE_CPU="true"), capture_output=True, text=True, timeout=1200,
    )
    (tmp_path / "accelerate.log").write_text(two.stdout + two.stderr)
    assert two.returncode == 0, two.stderr[-3000:]
    one = _lmms_eval(
        ["--model", "cycle", "--model_args", f"preset=smoke,artifacts={tmp_path / 'a1'}",
         *common, "--output_path", str(tmp_path / "out1")],
        tmp_path, cwd=tmp_path,
    )
    assert one.returncode == 0
    m2, m1 = task_metrics(read_results(tmp_path / "out2"), "mmeception_smoke"), task_metrics(read_results(tmp_path / "out1"), "mmeception_smoke")
    assert m2["n_scored"] == m1["n_scored"] == 5
    for key in ("gc@3", "s@1", "s@2", "s@3"):
        assert m2[key] == pytest.approx(m1[key], abs=1e-6), key
    # The scorer is shard-invariant (it sorts chains and sums exactly), but the tiny SD
    # pipeline's pixels depend on its batch in the last bit: with ranks drawing 3 and 2
    # prompts instead of 5, one channel of one pixel of one redraw moved by one level
    # (measured). FID over 5 images in 2048 dimensions amplifies that to ~1.4e-6 relative.
    assert m2["gc_fid@3"] == pytest.approx(m1["gc_fid@3"], rel=1e-5)
    # both ranks wrote their own share of the chains
    ranks = {json.loads(line)["rank"] for p in (tmp_path / "a2").rglob("runs.jsonl") for line in p.read_text().splitlines()}
    assert ranks == {0, 1}


def test_cli_sdp_bad_input_is_counted_per_doc_and_the_run_completes(tmp_path):
    """Empty and over-long captions and a missing image, through lmms-eval. (Arrow refuses
    non-UTF-8 text when the dataset loads; the engine's own checks are in test_engine.)"""
    from lmms_genbench.plugin import TASKS_DIR

    task_dir = tmp_path / "tasks"
    task_dir.mkdir()
    long_caption = " ".join(["a very long caption about a red cup on a table"] * 120)
    rows = [
        {"pair_id": "skimage/astronaut", "source": "good", "caption": "An astronaut smiles."},
        {"pair_id": "skimage/coffee", "source": "empty", "caption": ""},
        {"pair_id": "skimage/camera", "source": "long", "caption": long_caption},
        {"pair_id": "nowhere/missing", "source": "missing", "caption": "A photo that is not there."},
    ]
    (task_dir / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (task_dir / "utils.py").write_text("from lmms_genbench.tasks.sdp.utils import *  # noqa: F401,F403\n")
    smoke = (Path(TASKS_DIR) / "sdp" / "sdp_smoke.yaml").read_text()
    smoke = smoke.replace("include: _sdp_base.yaml", f"include: {Path(TASKS_DIR) / 'sdp' / '_sdp_base.yaml'}")
    smoke = smoke.replace("task: sdp_smoke", "task: sdp_bad_input").replace("sdp_smoke_pairs.jsonl", "pairs.jsonl")
    (task_dir / "sdp_bad_input.yaml").write_text(smoke)
    out = tmp_path / "out"
    proc = _lmms_eval(
        ["--model", "cycle", "--model_args", f"preset=smoke,artifacts={tmp_path / 'art'}",
         "--tasks", "sdp_bad_input", "--include_path", str(task_dir), "--output_path", str(out)],
        tmp_path, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = task_metrics(read_results(out), "sdp_bad_input")
    # 4 pairs x 2 chains; the empty caption fails its text-first chain, the missing image
    # its image-first chain
    assert metrics["n_scored"] == 6 and metrics["n_failed"] == 2
    assert -1.0 <= metrics["mcd_avg"] <= 1.0
    report = json.loads(Path(glob.glob(str(tmp_path / "art" / "**" / "mcd_report.json"), recursive=True)[0]).read_text())
    summary, sources = report["summary"], report["sources"]
    reasons = summary["failure_reasons"]
    assert sum(reasons.values()) == 2 and all(r.startswith("seed failed at hop 0") for r in reasons)
    assert sources["empty"]["n_failed"] == 1 and sources["good"]["n_failed"] == 0
    assert sources["missing"]["n_failed"] == 1 and sources["long"]["n_failed"] == 0
    # each failed doc by id with its reason, in a report keyed by the scorer settings
    assert [f["chain_id"] for f in report["failed_docs"]] == ["nowhere/missing#image_first", "skimage/coffee#text_first"]
    assert all(f["reason"].startswith("seed failed at hop 0: ") for f in report["failed_docs"])
    stable = sorted(glob.glob(str(tmp_path / "art" / "**" / "mcd_report.json"), recursive=True))
    keyed = sorted(glob.glob(str(tmp_path / "art" / "**" / f"mcd_report-{report['scorer']['key']}.json"), recursive=True))
    assert len(keyed) == len(stable)  # one per namespace (direction) the chains live in
    assert [Path(k).read_text() for k in keyed] == [Path(s).read_text() for s in stable]
    assert summary["n_clip_truncated"] >= 1  # the long caption, counted rather than silently cut


def test_sdp_resume_computes_only_the_missing_generations(tmp_path, monkeypatch):
    for key, value in _env(tmp_path).items():
        monkeypatch.setenv(key, value)
    staged, fresh = tmp_path / "staged", tmp_path / "fresh"
    first = _simple_evaluate(tmp_path, f"preset=smoke,artifacts={staged},stop_after_hop=2", task="sdp_smoke")
    assert first["n_scored"] == 0 and first["n_failed"] == 18  # 2 of 4 generations: not scored

    resumed = _simple_evaluate(tmp_path, f"preset=smoke,artifacts={staged}", task="sdp_smoke")
    runs = [json.loads(line) for f in sorted(staged.rglob("runs.jsonl")) for line in f.read_text().splitlines()]
    second = runs[len(runs) // 2:]  # one run per direction, each time
    # generations 3 and 4 only: one description and one drawing per chain
    assert sum(r["describe_items"] for r in second) == 18 and sum(r["generate_items"] for r in second) == 18

    uninterrupted = _simple_evaluate(tmp_path, f"preset=smoke,artifacts={fresh}", task="sdp_smoke")
    assert resumed["n_scored"] == uninterrupted["n_scored"] == 18
    for key in ("mcd_avg", "mcd_text->text", "mcd_text->image", "mcd_image->image", "mcd_image->text"):
        assert resumed[key] == pytest.approx(uninterrupted[key], abs=1e-6)
