"""docs/models.md's BAGEL command through the front door: ``unified=bagel`` with the real id
``ByteDance-Seed/BAGEL-7B-MoT``, served by the local test hub from the tiny random checkpoint in
the published layout (tests/support/data/parity/bagel), on ``sdp_nocaps``.

TEST SCAFFOLDING: tiny random weights, so this checks the plumbing (the id, the published files,
loading, describing, drawing, scoring), never BAGEL's behaviour; its outputs are checked against the
authors' code in tests/unit/generators/test_bagel_parity.py. What a CPU run adds: a small
``unified.image_size`` and few ``unified.num_timesteps``.
"""

from tests.support.lmms_eval_runs import BIN, results_file, run

MAPPINGS = ("text->text", "text->image", "image->image", "image->text")


def test_the_unified_bagel_command_on_a_cpu(local_hub, tmp_path):
    from tests.support.localhub.repos import add_models

    add_models(local_hub, ids=["ByteDance-Seed/BAGEL-7B-MoT"])
    first = len(local_hub.requests)
    args = ("unified=bagel,unified.pretrained=ByteDance-Seed/BAGEL-7B-MoT,unified.device=cpu,unified.dtype=float32,"
            "unified.image_size=32,unified.num_timesteps=3,artifacts=./artifacts")
    cmd = [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args, "--tasks", "sdp_nocaps", "--limit", "3",
           "--output_path", "./logs"]
    proc = run(cmd, tmp_path, timeout=1500, **local_hub.env(hf_home=tmp_path / "hf"))
    log = (tmp_path / "lmms_eval.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    fetched = {path.rsplit("/", 1)[-1] for _, path, status in local_hub.requests[first:]
               if path.startswith("/ByteDance-Seed/BAGEL-7B-MoT/resolve/") and status in (200, 302)}
    assert {"ema.safetensors", "ae.safetensors", "llm_config.json", "vit_config.json"} <= fetched, fetched
    _, results = results_file(tmp_path / "logs")
    got = results["results"]["sdp_nocaps"]
    assert (got["n_scored,none"], got["n_failed,none"]) == (3, 0), got
    for mapping in MAPPINGS:
        assert -1.0 <= got[f"mcd_{mapping},none"] <= 1.0, got
