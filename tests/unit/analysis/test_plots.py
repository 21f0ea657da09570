"""`lmms-genbench plot`: drift curves and MGG heatmaps from hand-made results files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lmms_genbench.cli import main
from lmms_genbench.analysis.plots import (
    CURVES_FILENAME,
    HEATMAP_FILENAME,
    label_from_config,
    load_results,
    plot_results,
)

MAPPINGS = ("text->text", "text->image", "image->image", "image->text")
TAGS = ("single_object", "two_object", "counting", "colors", "position", "color_attr")
SECRET = "sk-THISISASECRET123"


def _task_results(scale: float, generations: int = 4, mgg: bool = False) -> dict:
    """A task's results as lmms-eval writes them: "<metric>,none" plus stderr entries."""
    out: dict = {"alias": "sdp_smoke", "mcd_avg,none": 0.5 * scale, "mcd_avg_stderr,none": "N/A"}
    for i, m in enumerate(MAPPINGS):
        same = m.split("->")[0] == m.split("->")[1]
        for g in range(1, generations + 1):
            if (g % 2 == 0) == same:
                out[f"s_{m}@{g},none"] = scale * (0.9 - 0.05 * g - 0.1 * i)
                out[f"s_{m}@{g}_stderr,none"] = "N/A"
                # a per-source key must not enter the pooled curve
                out[f"s_{m}@{g}_docci,none"] = -5.0
    if mgg:
        for t, tag in enumerate(TAGS):
            for g in range(generations + 1):
                out[f"mgg_{tag}@{g},none"] = scale * max(0.0, 0.95 - 0.1 * g - 0.05 * t)
    return out


def _write(path: Path, task_results: dict, model: str = "cycle", model_args: str = "") -> Path:
    path.write_text(
        json.dumps(
            {
                "results": {"sdp_smoke": task_results},
                "config": {"model": model, "model_args": model_args},
            }
        )
    )
    return path


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    a = _write(tmp_path / "a_results.json", _task_results(1.0), "cycle", "preset=smoke")
    b = _write(
        tmp_path / "b_results.json",
        _task_results(0.5, mgg=True),
        "cycle",
        f"preset=openai,api_key={SECRET},HF_TOKEN=hf_abc,describer=/models/llava-7b",
    )
    return a, b


def _check_png(path: Path, min_size: tuple[int, int] = (400, 300)) -> None:
    assert path.is_file(), path
    with Image.open(path) as img:
        assert img.format == "PNG"
        assert img.size[0] >= min_size[0] and img.size[1] >= min_size[1], img.size
        pixels = np.asarray(img.convert("RGB"), dtype=np.float64)
    assert pixels.var() > 0, f"{path} is blank"


def test_cli_plots_curves_and_heatmap(two_runs, tmp_path, capsys):
    a, b = two_runs
    out = tmp_path / "figs"
    assert main(["plot", str(a), str(b), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / CURVES_FILENAME), str(out / HEATMAP_FILENAME)]
    _check_png(out / CURVES_FILENAME, (1000, 700))
    _check_png(out / HEATMAP_FILENAME)


def test_labels_redacted_and_per_run(two_runs, tmp_path):
    a, b = two_runs
    report = plot_results([a, b], out_dir=tmp_path / "o")
    assert report.errors == []
    assert report.curve_labels == [
        "cycle (preset=smoke)",
        "cycle (preset=openai, describer=llava-7b)",
    ]
    # only b has mgg keys; a is noted, not an error
    assert report.heatmap_labels == ["cycle (preset=openai, describer=llava-7b)"]
    assert any("a_results.json" in n and "MGG" in n for n in report.notes)
    for label in report.curve_labels + report.heatmap_labels:
        assert SECRET not in label and "hf_abc" not in label and "api_key" not in label


def test_label_from_config_redaction():
    cfg = {
        "model": "openai_t2i",
        "model_args": "model=gpt-image-1,OPENAI_API_KEY=x,auth_token=y,client_secret=z,"
        "Password=p,base=sk-live-zzz,artifacts=/very/long/path/to/run_artifacts_folder_2026",
    }
    label = label_from_config(cfg, fallback="f")
    assert label == "openai_t2i (model=gpt-image-1, artifacts=run_artifacts_folder_20…)"
    assert label_from_config({"model_args": {"token": "t", "a": 1}}, fallback="file") == "file (a=1)"
    assert label_from_config(None, fallback="file") == "file"


def test_explicit_labels_and_default_out_dir(two_runs):
    a, b = two_runs
    report = plot_results([a, b], labels=["mine", "theirs"])
    assert report.curve_labels == ["mine", "theirs"]
    assert report.written == [a.parent / CURVES_FILENAME, a.parent / HEATMAP_FILENAME]
    assert main(["plot", str(a), str(b), "--label", "only-one"]) == 2  # count mismatch
    assert main(["plot", str(a), "--label", " "]) == 2
    assert main(["plot"]) == 2  # argparse usage error, returned not raised


def test_same_label_is_made_distinct(tmp_path):
    a = _write(tmp_path / "a.json", _task_results(1.0), "cycle", "preset=smoke")
    b = _write(tmp_path / "b.json", _task_results(0.7), "cycle", "preset=smoke")
    assert plot_results([a, b]).curve_labels == ["cycle (preset=smoke)", "cycle (preset=smoke) #2"]


def test_curves_read_pooled_values_only(two_runs):
    run = load_results(two_runs[0])[0]
    assert list(run.curves) == list(MAPPINGS)
    assert list(run.curves["text->text"]) == [2, 4]
    assert list(run.curves["text->image"]) == [1, 3]
    assert run.curves["text->text"][2] == pytest.approx(0.8)  # not the -5 per-source key
    assert run.mgg == {}
    mgg = load_results(two_runs[1])[0].mgg
    assert list(mgg) == list(TAGS) and list(mgg["counting"]) == [0, 1, 2, 3, 4]


def test_bad_inputs_named_and_others_still_plot(two_runs, tmp_path, capsys):
    a, _ = two_runs
    missing = tmp_path / "missing.json"
    not_json = tmp_path / "notjson.json"
    not_json.write_text("this is { not json")
    no_drift = _write(tmp_path / "nodrift.json", {"alias": "x", "acc,none": 0.3})
    out = tmp_path / "o"
    code = main(["plot", str(missing), str(a), str(not_json), str(no_drift), "--out", str(out)])
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out.split() == [str(out / CURVES_FILENAME)]
    err = captured.err
    assert f"{missing}: no such file" in err
    assert f"{not_json}: not JSON" in err
    assert f"{no_drift}: no s_<mapping>@<g>" in err
    assert "MGG heatmap skipped" in err
    _check_png(out / CURVES_FILENAME)


def test_nothing_readable_writes_nothing(tmp_path, capsys):
    assert main(["plot", str(tmp_path / "nope.json"), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().out == ""
    assert not (tmp_path / "o").exists()


def test_cli_subprocess(two_runs, tmp_path):
    a, b = two_runs
    out = tmp_path / "sub"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "lmms_genbench.cli", "plot", str(a), str(b), "--out", str(out),
         "--label", "A", "B"],
        check=False, capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(out / CURVES_FILENAME), str(out / HEATMAP_FILENAME)]
    _check_png(out / HEATMAP_FILENAME)


def test_no_global_matplotlib_side_effects(two_runs, tmp_path):
    """Importing loads no matplotlib; plotting neither loads pyplot nor switches the
    user's backend (the figures draw on their own Agg canvas)."""
    code = (
        "import sys, lmms_genbench.analysis.plots, lmms_genbench.cli\n"
        "print('matplotlib' in sys.modules)\n"
        "import matplotlib\n"
        f"lmms_genbench.analysis.plots.plot_results([{str(two_runs[1])!r}], out_dir={str(tmp_path)!r})\n"
        "print('matplotlib.pyplot' in sys.modules, matplotlib.get_backend())\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "svg"}
    proc = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.stdout.split() == ["False", "False", "svg"], proc.stderr
    _check_png(tmp_path / HEATMAP_FILENAME)


def test_a_folder_is_searched_for_the_results_it_can_plot(tmp_path, capsys):
    """lmms-eval writes <output_path>/<model>/<date>_results.json, with <model> empty for
    preset=smoke: a folder argument finds both layouts and skips runs of other tasks."""
    logs = tmp_path / "logs"
    (logs / "llava-hf__llava-1.5-7b-hf").mkdir(parents=True)
    _write(logs / "2026-01-01T00-00-00_results.json", _task_results(1.0))
    _write(logs / "llava-hf__llava-1.5-7b-hf" / "2026-01-02T00-00-00_results.json", _task_results(0.5, mgg=True))
    (logs / "2026-01-03T00-00-00_results.json").write_text(json.dumps({"results": {"mmeception_smoke": {"gc@3,none": 0.5}}}))
    assert main(["plot", str(logs), "--out", str(tmp_path / "fig")]) == 0
    captured = capsys.readouterr()
    assert "using 2 of 3 results files" in captured.err
    assert sorted(Path(p).name for p in captured.out.split()) == [CURVES_FILENAME, HEATMAP_FILENAME]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["plot", str(empty)]) == 2
    assert capsys.readouterr().err.strip().endswith("give the --output_path of an lmms-eval run of these tasks, or the files")


def test_similarity_curves_draw_one_line_per_run_and_refuse_an_empty_set(tmp_path):
    from lmms_genbench.analysis.plots import draw_similarity_curves

    out = tmp_path / "s.png"
    labels = draw_similarity_curves([("a", {2: 0.9, 1: 0.95}), ("empty", {}), ("b", {1: 0.9})], out)
    assert labels == ["a", "b"]
    with Image.open(out) as img:
        assert img.size == (700, 420)
    with pytest.raises(ValueError, match="no run has values"):
        draw_similarity_curves([("empty", {})], out)


def test_sdr_fits_are_drawn_dashed_over_their_curves_and_null_ones_are_not(tmp_path):
    from matplotlib.figure import Figure

    results = _task_results(1.0, generations=8)
    results.update({"sdr_a_text->text,none": 0.5, "sdr_b_text->text,none": 0.2, "sdr_c_text->text,none": 0.3,
                    "sdr_a_image->text,none": None, "sdr_b_image->text,none": None, "sdr_c_image->text,none": None})
    run = load_results(_write(tmp_path / "r_results.json", results))[0]
    assert run.fits == {"text->text": (0.5, 0.2, 0.3)}  # a null fit (no SDR) draws nothing
    drawn = []
    real = Figure.savefig
    Figure.savefig = lambda fig, *a, **k: drawn.append(fig) or real(fig, *a, **k)
    try:
        from lmms_genbench.analysis.plots import draw_drift_curves

        labels = draw_drift_curves([run], tmp_path / "c.png")
    finally:
        Figure.savefig = real
    assert labels == [run.label]  # the fit has no legend entry of its own
    dashed = [ln for ax in drawn[0].axes for ln in ax.lines if ln.get_linestyle() == "--"]
    assert len(dashed) == 1 and dashed[0].get_xdata()[0] == 2 and dashed[0].get_xdata()[-1] == 8
    assert dashed[0].get_ydata()[0] == pytest.approx(0.5 * np.exp(-0.4) + 0.3)
    assert "SDR" in drawn[0].get_suptitle()
    _check_png(tmp_path / "c.png")
