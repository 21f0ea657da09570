"""unified=vila_u through the front door: docs/models.md's command on sdp_nocaps, the checkpoint fetched
from the local Hub under its real id (mit-han-lab/vila-u-7b-256, served from the committed parity
checkpoint in the authors' layout)."""

from tests.support.lmms_eval_runs import BIN, results_file, run

MAPPINGS = ("text->text", "text->image", "image->image", "image->text")


def test_the_unified_vila_u_command_on_a_cpu(local_hub, tmp_path):
    from tests.support.localhub.repos import add_models

    add_models(local_hub, ids=["mit-han-lab/vila-u-7b-256"])
    args = ("unified=vila_u,unified.pretrained=mit-han-lab/vila-u-7b-256,unified.device=cpu,unified.dtype=float32,"
            "artifacts=./artifacts")
    cmd = [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args, "--tasks", "sdp_nocaps",
           "--limit", "3", "--output_path", "./logs"]
    proc = run(cmd, tmp_path, timeout=1500, OMP_NUM_THREADS="1", **local_hub.env(hf_home=tmp_path / "hf"))
    log = (tmp_path / "lmms_eval.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    _, results = results_file(tmp_path / "logs")
    got = {k.split(",")[0]: v for k, v in results["results"]["sdp_nocaps"].items() if "," in k}
    assert (got["n_scored"], got["n_failed"]) == (3, 0), got
    for mapping in MAPPINGS:
        assert -1.0 <= got[f"mcd_{mapping}"] <= 1.0, got
