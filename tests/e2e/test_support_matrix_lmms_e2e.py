"""``generator=lmms:<model type>`` through the real ``lmms-eval`` command: the cycle model draws
with a stand-in of lmms-eval's own image-generating model types
(``lmms_genbench.smoke.host_image``; the in-process checks:
tests/unit/generators/test_support_matrix_lmms.py)."""

import json
import subprocess
import sys

from lmms_genbench.smoke.host_image import TINY_IMAGE_MODEL

from tests.support.lmms_eval_runs import offline_env, results_file

# registers the stand-in in the lmms-eval process, then runs lmms-eval's own entry point
_CLI = (
    "import sys; from lmms_genbench.smoke.host_image import register_tiny_image_model as r; r(); "
    "from lmms_eval.__main__ import cli_evaluate; sys.argv[0] = 'lmms-eval'; cli_evaluate()"
)


def test_cycle_draws_with_an_lmms_eval_generation_model(tmp_path):
    out, art = tmp_path / "out", tmp_path / "art"
    proc = subprocess.run(
        [sys.executable, "-c", _CLI, "--model", "cycle", "--model_args",
         f"preset=smoke,generator=lmms:{TINY_IMAGE_MODEL},generator.output_dir={tmp_path / 'images'},"
         f"artifacts={art}", "--tasks", "mmeception_smoke", "--limit", "2", "--output_path", str(out)],
        cwd=tmp_path, env=offline_env(tmp_path), capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = results_file(out)[1]["results"]["mmeception_smoke"]
    assert metrics["n_failed,none"] == 0 and metrics["n_scored,none"] == 2, metrics
    assert isinstance(metrics["gc@3,none"], float)
    [protocol] = art.rglob("protocol.json")
    assert json.loads(protocol.read_text())["generator"].startswith(f"lmms-{TINY_IMAGE_MODEL}-")
