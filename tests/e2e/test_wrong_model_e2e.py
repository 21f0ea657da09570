"""A task run through the real ``lmms-eval`` command with a model type that cannot serve it stops
with one line naming the ``--model`` to use, and writes no results (the in-process checks:
tests/unit/models/test_wrong_model.py)."""

import glob
import re

import pytest

from tests.support.lmms_eval_runs import BIN, run


@pytest.mark.parametrize("task, model", [("mmeception_smoke", "cycle"), ("chef_icl_smoke", "chef")])
def test_lmms_eval_with_a_plain_model_stops_with_one_line_naming_the_model(tmp_path, task, model):
    """lmms-eval's built-in ``dummy`` model answers "A" to every request."""
    out = tmp_path / "out"
    proc = run([str(BIN / "lmms-eval"), "--model", "dummy", "--tasks", task, "--limit", "2",
                "--output_path", str(out), "--log_samples"], tmp_path, timeout=900)
    ours = [line for line in re.split(r"[\r\n]+", proc.stderr) if "lmms-genbench" in line]
    assert len(ours) == 1, proc.stderr[-3000:]  # stopped at the first doc, not retried
    assert ours[0].startswith("lmms-genbench: ") and f"must run with --model {model}. Fix: run them with --model {model}" in ours[0]
    assert proc.returncode == 1
    assert "RetryError" not in proc.stdout + proc.stderr  # not retried, not wrapped
    assert "Traceback" not in proc.stderr
    assert not glob.glob(str(out / "**" / "*_results.json"), recursive=True)
