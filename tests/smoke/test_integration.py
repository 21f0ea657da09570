"""End to end through lmms-eval: the CLI, simple_evaluate, resume, bad input
and two processes. lmms-eval exits 0 even when a task crashed, so every test
reads the results files."""

import glob
import json
import math
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.integration

from tests.support.lmms_eval_runs import BIN, offline_env, response, results_file, run
from tests.support.lmms_eval_runs import samples as _samples
from tests.support.smoke_run import SMOKE_TASKS

_env = offline_env


def _results(out_dir):
    return results_file(out_dir)[1]


def _chain(sample):
    from lmms_genbench.engine import Chain

    return Chain.from_json(response(sample))


def _metrics(results, task):
    return {k.split(",")[0]: v for k, v in results["results"][task].items() if "," in k}


def _lmms_eval(args, tmp_path, cwd, timeout=900, **env):
    return run([str(BIN / "lmms-eval"), *args], tmp_path, cwd=cwd, timeout=timeout, **env)


def _strict(path):
    """The file parsed as plain JSON: a bare NaN or Infinity fails."""
    def refuse(token):
        raise AssertionError(f"{path} holds a bare {token}")

    return json.loads(Path(path).read_text(), parse_constant=refuse)


def test_headline_scores_carry_a_bootstrap_stderr_and_files_are_plain_json(smoke_run):
    """lmms-eval's `<m>_stderr` of each headline is our bootstrap's (it writes "N/A" for
    aggregations it does not know; our `<m>_stderr` metric, aggregated after `m`, overwrites
    it), its table shows it in the ± column, and every results and report file is plain JSON."""
    path, _ = results_file(smoke_run.out)
    results = _strict(path)["results"]
    report = _strict(next(smoke_run.art.rglob("mmeception_smoke-*/report.json")))
    stderr = results["mmeception_smoke"]["gc@3_stderr,none"]
    assert isinstance(stderr, float) and stderr > 0 and stderr == report["intervals"]["gc@3"]["stderr"]
    interval = report["intervals"]["gc@3"]
    assert interval["low"] <= results["mmeception_smoke"]["gc@3,none"] <= interval["high"]
    assert interval["resamples"] == 1000 and interval["seed"] == 0 and interval["level"] == 0.95
    assert "set-level statistic" in report["intervals"]["gc_fid@3"]["reason"]
    row = next(line for line in smoke_run.proc.stdout.splitlines() if "|gc@3  " in line or "|gc@3 |" in line)
    assert f"±|{stderr:.4f}" in row.replace(" ", ""), row
    for task, metrics in (("sdp_smoke", ("mcd_avg", "mcd_text->text", "mcd_avg_matplotlib")),
                          ("sdp_geneval_smoke", ("mgg", "geneval@1", "geneval@3"))):
        for metric in metrics:
            assert isinstance(results[task][f"{metric}_stderr,none"], float), (task, metric)
    for name in ("mcd_report.json", "mgg_report.json"):
        saved = _strict(next(smoke_run.art.rglob(f"*/{name}")))
        assert saved["doc_scores"]["chain_ids"] and saved["estimators"] and saved["intervals"]


def test_the_report_says_how_much_of_each_description_the_generator_read(smoke_run):
    """Each drawn hop's record holds the tokens each text encoder cut; the store report sums
    them per encoder (the smoke generator's CLIP reads 512 tokens)."""
    report = _strict(next(smoke_run.art.rglob("mmeception_smoke-*/report.json")))
    (budget,) = report["text_budget"].values()
    assert list(report["text_budget"]) == ["text_encoder:CLIPTextModel"]
    assert budget["tokens_read"] == 512 and budget["descriptions"] >= 27
    assert 0.0 <= budget["share_truncated"] <= 1.0 and budget["mean_tokens_cut"] >= 0.0
    records = next(smoke_run.art.rglob("mmeception_smoke-*/*/hops.jsonl")).read_text().splitlines()
    drawn = [json.loads(line) for line in records if '"cut"' in line]
    assert drawn and all(set(r["cut"]) == {"text_encoder:CLIPTextModel"} and r["cut"]["text_encoder:CLIPTextModel"][0] == 512
                         for r in drawn)


def test_the_results_file_carries_the_runs_own_rates(smoke_run):
    """The cycle model logs each engine run to lmms-eval's throughput log (issue 24, item 5):
    the results file's ``throughput`` gives seconds per described and per drawn hop."""
    from lmms_genbench.analysis.rates import rates_from_throughput

    throughput = smoke_run.results["throughput"]
    rates = rates_from_throughput(throughput)
    assert set(rates) == {"describe", "draw"}, throughput
    assert all(r["seconds_per_item"] > 0 and r["items"] > 0 for r in rates.values())
    assert throughput["total_gen_tokens"] > 0 and throughput["avg_describe_words"] > 0


def test_logged_samples_hold_each_doc_once(smoke_run):
    """--log_samples: the chain's address once per doc and a status per metric, not a
    copy of the doc's record under every metric name (17.6 KB per sdp_geneval_smoke doc before)."""
    for task in SMOKE_TASKS:
        path = glob.glob(str(smoke_run.out / "**" / f"*_samples_{task}.jsonl"), recursive=True)[0]
        lines = Path(path).read_text().splitlines()
        per_doc = sum(len(line.encode()) for line in lines) / len(lines)
        assert per_doc < 1756, (task, per_doc)  # >= 10x smaller than 17,562 bytes
        sample = json.loads(lines[0])
        metrics = [m["metric"] for m in smoke_run.results["configs"][task]["metric_list"]]
        assert all(sample[m] == "ok" for m in metrics)


def test_a_five_iteration_variant_scores_gc_at_5(smoke_run):
    metrics = _metrics(smoke_run.results, "mmeception_smoke_t5")
    assert metrics["n_scored"] == 9 and metrics["n_failed"] == 0
    assert all(-1.0 <= metrics[f"s@{t}"] <= 1.0 for t in range(1, 6))
    assert metrics["gc@5"] == pytest.approx(sum(t * metrics[f"s@{t}"] for t in range(1, 6)) / 15, abs=0.05)
    assert math.isfinite(metrics["gc_fid@5"])


def test_cli_smoke_run_reports_gc_and_fid(smoke_run):
    tmp_path, out, proc = smoke_run.tmp, smoke_run.out, smoke_run.proc
    metrics = _metrics(_results(out), "mmeception_smoke")
    assert metrics["n_scored"] == 9 and metrics["n_failed"] == 0
    assert -1.0 <= metrics["gc@3"] <= 1.0
    for t in (1, 2, 3):
        assert -1.0 <= metrics[f"s@{t}"] <= 1.0
    # GC@3 = sum t*s(t) / 6 holds per category, so it sits between min and max s(t)
    assert math.isfinite(metrics["gc_fid@3"]) and metrics["gc_fid@3"] >= 0
    # matplotlib has one photo: its FID is NaN and left out of the mean and of n_min, and named
    assert metrics["gc_fid@3_n_min"] == 2 and metrics["gc_fid@3_n_excluded"] == 1
    # the per-category breakdown, with the sample size behind every FID, sits beside the chains
    report = json.loads(next((tmp_path / "art").rglob("mmeception_smoke-*/report.json")).read_text())
    cats = report["categories"]
    assert cats["scikit-image"]["n_scored"] == 6 and cats["scikit-image"]["fid_n"] == 6
    assert cats["scikit-learn"]["fid_n"] == 2
    # one photo: no FID, written as null (report.json is plain JSON) with the reason beside it
    assert cats["matplotlib"]["gc_fid@3"] is None and cats["matplotlib"]["fid_n"] == 1
    assert "at least 2 scored images" in report["null_reasons"]["/categories/matplotlib/gc_fid@3"]
    assert report["summary"]["gc@3"] == pytest.approx(metrics["gc@3"])
    assert report["summary"]["gc_fid@3_excluded"] == ["matplotlib"]
    # the terminal table shows the score; scoring drew its progress on stderr (--verbosity INFO)
    assert "gc@3" in proc.stdout
    assert "GenCeption scikit-image" in proc.stderr and "MCD text_first chains" in proc.stderr
    # the terminal table shows the score; stderr a progress bar of the chains, with rate and
    # time left, and no per-call bar of the describer's own class
    assert "cycle: chains" in proc.stderr and "9/9" in proc.stderr and "chain/s" in proc.stderr
    assert "Model Responding" not in proc.stderr
    samples = _samples(out, "mmeception_smoke")
    assert len(samples) == 9
    chain = _chain(samples[0])
    assert set(samples[0]) >= {"gc@3", "n_failed"} and "gc@3_existence" not in samples[0]
    assert chain.status == "ok" and chain.hops == 7 and chain.length == 6
    assert all(chain.path(h).is_file() for h in range(chain.hops))


def _simple_evaluate(tmp_path, model_args, limit=None, task="mmeception_smoke"):
    from lmms_eval.evaluator import simple_evaluate

    results = simple_evaluate(
        model="cycle", model_args=model_args, tasks=[task], limit=limit, log_samples=False,
    )
    return _metrics(results, task)


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
    metrics = _metrics(_results(out), "mmeception_folder")
    assert metrics["n_scored"] == 7 and metrics["n_failed"] == 2
    assert math.isfinite(metrics["gc@3"])
    assert "cycle: chains" not in proc.stderr  # --verbosity ERROR: no progress bar
    failed = {}
    for sample in _samples(out, "mmeception_folder"):
        chain = _chain(sample)
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
    m2, m1 = _metrics(_results(tmp_path / "out2"), "mmeception_smoke"), _metrics(_results(tmp_path / "out1"), "mmeception_smoke")
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


def test_cli_sdp_smoke_scores_both_chains_and_all_mappings(smoke_run):
    out = smoke_run.out
    metrics = _metrics(_results(out), "sdp_smoke")
    assert metrics["n_scored"] == 18 and metrics["n_failed"] == 0  # 9 pairs x 2 directions
    mappings = ("text->text", "text->image", "image->image", "image->text")
    assert all(-1.0 <= metrics[f"mcd_{m}"] <= 1.0 for m in mappings)
    assert metrics["mcd_avg"] == pytest.approx(sum(metrics[f"mcd_{m}"] for m in mappings) / 4)
    # MCD_delta is the mean of S_delta(g) over the generations that mapping compares
    assert metrics["mcd_text->text"] == pytest.approx((metrics["s_text->text@2"] + metrics["s_text->text@4"]) / 2)
    assert metrics["mcd_image->text"] == pytest.approx((metrics["s_image->text@1"] + metrics["s_image->text@3"]) / 2)
    chains = [_chain(s) for s in _samples(out, "sdp_smoke")]
    assert sorted(c.direction for c in chains) == ["image_first"] * 9 + ["text_first"] * 9
    text_first = next(c for c in chains if c.direction == "text_first")
    assert [text_first.kind(h) for h in range(text_first.hops)] == ["text", "image", "text", "image", "text"]


def test_cli_sdp_geneval_smoke_scores_every_drawn_generation_and_plots(smoke_run, tmp_path):
    out = smoke_run.out
    metrics = _metrics(_results(out), "sdp_geneval_smoke")
    assert metrics["n_scored"] == 6 and metrics["n_failed"] == 0 and metrics["n_images"] == 12
    tags = ("single_object", "two_object", "counting", "colors", "position", "color_attr")
    for g in (1, 3):  # text-first chains of 4 generations draw at g = 1 and 3
        assert metrics[f"geneval@{g}"] == pytest.approx(sum(metrics[f"mgg_{t}@{g}"] for t in tags) / 6)
    assert metrics["mgg"] == pytest.approx((metrics["geneval@1"] + metrics["geneval@3"]) / 2)
    report = glob.glob(str(smoke_run.art / "**" / "mgg_report.json"), recursive=True)
    assert len(report) == 1 and json.loads(Path(report[0]).read_text())["n_images"] == 12
    results_file = glob.glob(str(out / "**" / "*_results.json"), recursive=True)[0]
    plot = subprocess.run(
        [str(BIN / "lmms-genbench"), "plot", results_file, "--out", str(tmp_path / "fig")],
        capture_output=True, text=True, timeout=300,
    )
    assert plot.returncode == 0, plot.stderr
    with Image.open(tmp_path / "fig" / "sdp_mgg_heatmap.png") as img:
        assert img.size[0] > 100 and img.size[1] > 100


def test_report_of_the_smoke_run_opens_in_chromium(smoke_run, tmp_path):
    """``lmms-genbench report`` as a person uses it: the command on the smoke run's
    --output_path, the page opened from disk in headless Chromium. It leaves
    ``report.png`` (the top of the page) and ``report-gallery.png`` in tmp_path."""
    from tests.support.browser import chromium_or_skip, open_report, shown_gallery_images, status

    page_file = tmp_path / "report.html"
    proc = subprocess.run([str(BIN / "lmms-genbench"), "report", str(smoke_run.out), "-o", str(page_file)],
                          check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    chains = [_chain(s) for task in (*SMOKE_TASKS, "mmeception_smoke_t5") for s in _samples(smoke_run.out, task)]
    images = sum(c.kind(h) == "image" for c in chains for h in range(c.hops))
    assert f"1 run(s), {len(chains)} chain(s), {images} image(s)" in proc.stderr
    chromium_or_skip()
    with open_report(page_file) as (page, problems):
        assert status(page) == f"chains 1–20 of {len(chains)} (page 1 of {math.ceil(len(chains) / 20)})"
        assert page.locator("section.task").count() == 4 and page.locator(".figures img").count() == 4
        page.screenshot(path=tmp_path / "report.png")
        page.select_option("#f-size", "all")
        shown = shown_gallery_images(page)
        assert len(shown) == images
        assert [i for i in shown if i["width"] == 0] == []
        assert [i for i in shown if not i["src"].startswith("data:image/")] == []
        page.locator("#gallery").screenshot(path=tmp_path / "report-gallery.png")
        assert problems == []
    with Image.open(tmp_path / "report.png") as shot:
        assert shot.size == (1400, 1000)
    print(f"screenshots: {tmp_path / 'report.png'} {tmp_path / 'report-gallery.png'}")


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
    metrics = _metrics(_results(out), "sdp_bad_input")
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
