"""lmms-genbench chef summary: normalised scores from hand-made results files, figures, errors."""

import json

import pytest
from PIL import Image

from lmms_genbench.analysis.chef_summary import summarize
from lmms_genbench.cli import main


def _results(path, model_args, tasks):
    results = {t: {"alias": t, **{f"{k},none": v for k, v in m.items()}} for t, m in tasks.items()}
    path.write_text(json.dumps({"results": results, "config": {"model": "chef", "model_args": model_args}}))
    return path


@pytest.fixture
def files(tmp_path):
    bins = {f"bin{b}_{k}": (0.5 if k != "n" else 1.0) for b in range(10) for k in ("acc", "conf", "n")}
    a1 = _results(tmp_path / "a1.json", "inner=llava_hf,inner.pretrained=m1", {
        "chef_calibration_mmbench": {"ece": 0.10, **bins}, "chef_calibration_scienceqa": {"ece": 0.20},
        "chef_icl_mmbench": {"riam": -0.2}, "chef_insfollow_mmbench": {"match_ratio": 0.4},
    })
    a2 = _results(tmp_path / "a2.json", "inner=llava_hf,inner.pretrained=m1", {
        "chef_robustness_mmbench": {"rrm": 0.7}, "chef_hallucination_random": {"pope_accuracy": 0.8},
        "chef_hallucination_popular": {"pope_accuracy": 0.7}, "chef_language_mmbench": {"judge_score": 6.5},
    })
    b = _results(tmp_path / "b.json", "inner=llava_hf,inner.pretrained=m2", {
        "chef_calibration_mmbench": {"ece": float("nan")}, "chef_robustness_mmbench": {"rrm": 1.4},
    })
    return a1, a2, b


def test_scores_are_normalised_and_runs_of_one_model_merge(files):
    summaries, errors = summarize(files)
    assert not errors and len(summaries) == 2
    a, b = summaries
    assert a.scores == pytest.approx({
        "calibration": 85.0,  # 100 (1 - mean(0.10, 0.20))
        "in_context_learning": 40.0,  # 50 (1 + RIAM)
        "instruction_following": 40.0,
        "language_performance": 65.0,
        "robustness": 70.0,
        "hallucination": 75.0,  # mean POPE accuracy over the splits
    })
    assert a.tasks["hallucination"] == ["chef_hallucination_random", "chef_hallucination_popular"]
    assert b.scores == {"robustness": 100.0}  # NaN ECE is skipped, RRM clipped
    assert list(a.reliability) == ["chef_calibration_mmbench"]
    assert a.stderr == {}  # no task carries a <metric>_stderr


def test_score_stderr_combines_the_tasks_bootstrap_stderr(tmp_path):
    path = _results(tmp_path / "r.json", "m", {
        "chef_calibration_mmbench": {"ece": 0.1, "ece_stderr": 0.03}, "chef_calibration_scienceqa": {"ece": 0.2, "ece_stderr": 0.04},
        "chef_robustness_mmbench": {"rrm": 0.7, "rrm_stderr": 0.05}, "chef_hallucination_random": {"pope_accuracy": 0.8},
    })
    (s,), _ = summarize([path])
    # mean of two independent ECEs: sqrt(0.03² + 0.04²) / 2 = 0.025; the score is 100 (1 - ECE)
    assert s.stderr == pytest.approx({"calibration": 2.5, "robustness": 5.0})  # hallucination: no stderr given


def test_cli_writes_summary_and_figures(files, tmp_path, capsys):
    out = tmp_path / "fig"
    assert main(["chef", "summary", *map(str, files), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    assert [p.rsplit("/", 1)[-1] for p in printed] == ["chef_summary.json", "chef_desiderata.png", "chef_reliability.png"]
    summary = json.loads((out / "chef_summary.json").read_text())
    assert len(summary) == 2 and all(" (" in label for label in summary)
    assert Image.open(out / "chef_desiderata.png").size[0] > 300


def test_cli_labels_and_errors(files, tmp_path, capsys):
    out = tmp_path / "fig"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"results": {"mme": {"acc,none": 1.0}}}))
    code = main(["chef", "summary", str(files[2]), str(bad), "--label", "B", "X", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "no chef_* task" in err
    # two desiderata or fewer: bars instead of a radar, still written
    assert json.loads((out / "chef_summary.json").read_text()) == {
        "B": {"scores": {"robustness": 100.0}, "stderr": {}, "raw": {"robustness": 1.4}, "tasks": {"robustness": ["chef_robustness_mmbench"]},
              "left_out": {"calibration": ["chef_calibration_mmbench: ece is nan"]}}
    }
    assert "B: calibration has no score: chef_calibration_mmbench: ece is nan" in err
    assert (out / "chef_desiderata.png").is_file()
    assert main(["chef", "summary", str(files[0]), "--label", "a", "b", "--out", str(out)]) == 2


def test_a_desideratum_without_a_number_is_kept_and_said(tmp_path, capsys):
    """A language task whose judge never parsed (judge_score NaN) keeps its axis and is
    named, with its counts, in the summary and on stderr."""
    path = _results(tmp_path / "2026-01-01T00-00-00_results.json", "preset=smoke", {
        "chef_calibration_smoke": {"ece": 0.2}, "chef_icl_smoke": {"riam": 0.0},
        "chef_language_smoke": {"judge_score": float("nan"), "n_judged": 0, "n_judge_failed": 6},
    })
    summaries, _ = summarize([path])
    assert summaries[0].left_out == {
        "language_performance": ["chef_language_smoke: judge_score is nan (n_judge_failed=6, n_judged=0)"]
    }
    out = tmp_path / "fig"
    assert main(["chef", "summary", str(tmp_path), "--out", str(out)]) == 0  # a folder works too
    err = capsys.readouterr().err
    assert "language_performance has no score: chef_language_smoke: judge_score is nan" in err
    summary = json.loads((out / "chef_summary.json").read_text())["chef (preset=smoke)"]
    assert "language_performance" not in summary["scores"] and summary["left_out"]["language_performance"]
