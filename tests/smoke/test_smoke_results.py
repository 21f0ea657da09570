"""End to end through lmms-eval, read from the one shared smoke run (the ``smoke_run``
fixture): headline scores, intervals, rates, logged samples, the five-iteration variant, the
sdp chains and the HTML report. lmms-eval exits 0 even when a task crashed, so every test reads
the results files. Resume, bad input and two processes, with runs of their own:
tests/e2e/test_runs_e2e.py."""

import glob
import json
import math
import subprocess
from pathlib import Path

import pytest
from PIL import Image


from tests.support.lmms_eval_runs import BIN, read_results, results_file, sample_chain
from tests.support.lmms_eval_runs import samples as _samples
from tests.support.lmms_eval_runs import task_metrics
from tests.support.smoke_run import SMOKE_TASKS


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
        metrics = [m["metric"] for m in smoke_run.results["configs"][task]["metric_list"]]
        # each metric's "ok" costs its name (sdp_smoke lists 62 metrics since SDR): the rest, the
        # chain's address once, is >= 10x smaller than 17,562 bytes
        statuses = sum(len(f'"{m}": "ok", '.encode()) for m in metrics)
        per_doc = sum(len(line.encode()) for line in lines) / len(lines) - statuses
        assert per_doc < 1756, (task, per_doc)
        sample = json.loads(lines[0])
        assert all(sample[m] == "ok" for m in metrics)


def test_a_five_iteration_variant_scores_gc_at_5(smoke_run):
    metrics = task_metrics(smoke_run.results, "mmeception_smoke_t5")
    assert metrics["n_scored"] == 9 and metrics["n_failed"] == 0
    assert all(-1.0 <= metrics[f"s@{t}"] <= 1.0 for t in range(1, 6))
    assert metrics["gc@5"] == pytest.approx(sum(t * metrics[f"s@{t}"] for t in range(1, 6)) / 15, abs=0.05)
    assert math.isfinite(metrics["gc_fid@5"])


def test_cli_smoke_run_reports_gc_and_fid(smoke_run):
    tmp_path, out, proc = smoke_run.tmp, smoke_run.out, smoke_run.proc
    metrics = task_metrics(read_results(out), "mmeception_smoke")
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
    chain = sample_chain(samples[0])
    assert set(samples[0]) >= {"gc@3", "n_failed"} and "gc@3_existence" not in samples[0]
    assert chain.status == "ok" and chain.hops == 7 and chain.length == 6
    assert all(chain.path(h).is_file() for h in range(chain.hops))


def test_cli_sdp_smoke_scores_both_chains_and_all_mappings(smoke_run):
    out = smoke_run.out
    metrics = task_metrics(read_results(out), "sdp_smoke")
    assert metrics["n_scored"] == 18 and metrics["n_failed"] == 0  # 9 pairs x 2 directions
    mappings = ("text->text", "text->image", "image->image", "image->text")
    assert all(-1.0 <= metrics[f"mcd_{m}"] <= 1.0 for m in mappings)
    assert metrics["mcd_avg"] == pytest.approx(sum(metrics[f"mcd_{m}"] for m in mappings) / 4)
    # MCD_delta is the mean of S_delta(g) over the generations that mapping compares
    assert metrics["mcd_text->text"] == pytest.approx((metrics["s_text->text@2"] + metrics["s_text->text@4"]) / 2)
    assert metrics["mcd_image->text"] == pytest.approx((metrics["s_image->text@1"] + metrics["s_image->text@3"]) / 2)
    chains = [sample_chain(s) for s in _samples(out, "sdp_smoke")]
    assert sorted(c.direction for c in chains) == ["image_first"] * 9 + ["text_first"] * 9
    text_first = next(c for c in chains if c.direction == "text_first")
    assert [text_first.kind(h) for h in range(text_first.hops)] == ["text", "image", "text", "image", "text"]


def test_cli_sdp_geneval_smoke_scores_every_drawn_generation_and_plots(smoke_run, tmp_path):
    out = smoke_run.out
    metrics = task_metrics(read_results(out), "sdp_geneval_smoke")
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
    chains = [sample_chain(s) for task in (*SMOKE_TASKS, "mmeception_smoke_t5") for s in _samples(smoke_run.out, task)]
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


def test_sdp_smoke_reports_sdr_null_with_its_reason_and_b_lower_is_better(smoke_run):
    """Two generations per mapping cannot fit a three-parameter decay: SDR is null in the
    results, and the report says why for each fit; the results say b is better lower."""
    path, _ = results_file(smoke_run.out)
    data = _strict(path)
    results = data["results"]["sdp_smoke"]
    assert all(results[f"sdr_{p},none"] is None for p in "abc")
    assert results["sdr_b_text->text,none"] is None and results["sdr_avg_curve_b,none"] is None
    assert data["higher_is_better"]["sdp_smoke"]["sdr_b"] is False
    assert data["higher_is_better"]["sdp_smoke"]["sdr_c"] is True
    report = _strict(next(smoke_run.art.rglob("*/mcd_report.json")))
    assert report["summary"]["sdr_failures"]["text->text"] == "fewer than 3 generations"
    assert report["summary"]["sdr_failure_reasons"] == {"4 of 4 mapping fits failed": 1, "fewer than 3 generations": 5}
    assert report["null_reasons"]["/summary/sdr_b"] == "no SDR fit: 4 of 4 mapping fits failed"
