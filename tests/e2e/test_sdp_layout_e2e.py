"""Round trip through the Semantic Drift authors' folder layout, by the real commands: an
`lmms-eval` run of sdp_smoke with 8 generations (so SDR is fitted: 4 points per mapping),
`lmms-genbench sdp export` of its results, `lmms-genbench sdp score` of the folder; MCD, S_δ(g)
and SDR equal the run's, and sdp_geneval_smoke's MGG too (its images named by metadata line, as
the authors' mgg.py opens them). A malformed layout ends in one line, exit 1, nothing scored."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.lmms_eval_runs import BIN, offline_env, results_file, run
from tests.support.smoke_run import smoke_task_variant

TASK = "sdp_smoke_g8"


def _variant(folder: Path) -> None:
    """sdp_smoke with ``generations: 8``: a YAML change alone."""
    from lmms_genbench.metrics.scorers.mcd import MCD

    # fewer resamples: each refits SDR's curves, and only the values are compared here
    smoke_task_variant(folder, "sdp", "sdp_smoke.yaml", "sdp_smoke_pairs.jsonl", TASK,
                       [("generations: 4", "generations: 8"),
                        ("scorer: {preset: smoke,", "scorer: {preset: smoke, bootstrap: {resamples: 50},")],
                       "aggregate_mcd", MCD.metric_names(8, MCD.task_settings({"preset": "smoke"})))


def _cli(tmp_path, *args):
    return subprocess.run([str(BIN / "lmms-genbench"), *args], capture_output=True, text=True, cwd=tmp_path,
                          env=offline_env(tmp_path), timeout=900, check=False)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layout")
    _variant(tmp / "variant")
    out, art = tmp / "out", tmp / "art"
    proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", f"preset=smoke,artifacts={art}",
                "--tasks", f"{TASK},sdp_geneval_smoke", "--include_path", str(tmp / "variant"), "--output_path", str(out), "--log_samples"],
               tmp, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = results_file(out)[1]["results"]
    proc = _cli(tmp, "sdp", "export", str(out), str(tmp / "layout"))
    assert proc.returncode == 1 and "2 semantic-drift tasks" in proc.stderr and "--task" in proc.stderr
    proc = _cli(tmp, "sdp", "export", str(out), str(tmp / "layout"), "--task", TASK)
    assert proc.returncode == 0, proc.stderr
    assert "text_first: 9 chains, generations 0..8" in proc.stdout
    proc = _cli(tmp, "sdp", "export", str(out), str(tmp / "geneval"), "--task", "sdp_geneval_smoke")
    assert proc.returncode == 0, proc.stderr
    return tmp, results


def test_exported_chains_score_as_the_run_that_made_them(exported):
    tmp, results = exported
    results = results[TASK]
    # the same store root: its features are found again by content, so the scores are the same numbers
    proc = _cli(tmp, "sdp", "score", str(tmp / "layout"), "--preset", "smoke", "--artifacts", str(tmp / "art"),
                "--resamples", "50", "--json", str(tmp / "scores.json"))
    assert proc.returncode == 0, proc.stderr
    ours = json.loads((tmp / "scores.json").read_text())["metrics"]
    compared = 0
    for key, value in results.items():
        name = key.split(",")[0]
        if not name.startswith(("mcd_", "s_", "sdr_")) or "stderr" in name or name.startswith("mcd_avg_"):
            continue  # per-source values: the layout has no sources
        if value is None:
            assert ours[name] is None, name
        else:
            assert ours[name] == pytest.approx(value, rel=1e-12, abs=1e-15), name
        compared += 1
    assert compared == 4 + 1 + 16 + 18
    assert ours["n_scored"] == results["n_scored,none"] == 18
    assert not math.isnan(results["sdr_b,none"])  # 4 points per mapping: SDR was fitted in the run


def test_exported_geneval_chains_give_the_run_s_mgg(exported):
    from lmms_genbench.plugin import TASKS_DIR

    tmp, results = exported
    results = results["sdp_geneval_smoke"]
    # their mgg.py opens <imagedir>gen-<g>/<metadata line>.png
    assert sorted(p.name for p in (tmp / "geneval" / "text-first" / "gen-1").iterdir()) == [f"{i}.png" for i in range(6)]
    proc = _cli(tmp, "sdp", "score", str(tmp / "geneval"), "--preset", "smoke", "--artifacts", str(tmp / "art"),
                "--resamples", "0", "--geneval", str(Path(TASKS_DIR) / "sdp" / "geneval_smoke.jsonl"),
                "--json", str(tmp / "mgg.json"))
    assert proc.returncode == 0, proc.stderr
    ours = json.loads((tmp / "mgg.json").read_text())["metrics"]
    names = [k.split(",")[0] for k in results if k.split(",")[0].startswith(("mgg", "geneval@"))
             and "stderr" not in k]
    assert "mgg" in names and "geneval@3" in names
    for name in names:
        assert ours[name] == pytest.approx(results[f"{name},none"], rel=1e-12, abs=1e-15), name


@pytest.mark.parametrize("damage, named", [
    (lambda r: shutil.rmtree(r / "text-first" / "gen-5"), "text-first/gen-5: missing"),
    (lambda r: next((r / "image-first" / "gen-4").iterdir()).unlink(), "image-first/gen-4/"),
    (lambda r: (r / "text-first" / "gen-4.csv").write_text("file,text\n"), "text-first/gen-4.csv: columns are"),
    (lambda r: (r / "image-first" / "gen-3.csv").write_text(""), "image-first/gen-3.csv: empty"),
])
def test_a_malformed_layout_ends_in_one_line_and_nothing_is_scored(exported, tmp_path, damage, named):
    tmp, _ = exported
    broken = tmp_path / "broken"
    shutil.copytree(tmp / "layout", broken)
    damage(broken)
    proc = _cli(tmp_path, "sdp", "score", str(broken), "--preset", "smoke", "--artifacts", str(tmp_path / "art"))
    assert proc.returncode == 1 and proc.stdout == ""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and named in lines[0], proc.stderr
    assert not (tmp_path / "art").exists()
