"""Janus 1.3B as DeepSeek published it, through the front door: ``unified.pretrained=deepseek-ai/Janus-1.3B``
served by the local test hub in DeepSeek's layout (the tiny checkpoint DeepSeek's own code built,
tests/support/data/parity/janus13), ``sdp_nocaps --limit 3`` scored in all four MCD mappings.

TEST SCAFFOLDING: tiny random weights; this checks loading DeepSeek's files through the hub and
the plumbing, not Janus 1.3B's behaviour (test_janus13_parity.py compares outputs with DeepSeek's code).
"""

import math

from tests.support.lmms_eval_runs import BIN, results_file, run

ARGS = "unified=janus,unified.pretrained=deepseek-ai/Janus-1.3B,unified.device=cpu,unified.dtype=float32"
MAPPINGS = ("text->text", "text->image", "image->image", "image->text")


def test_janus_13b_in_deepseeks_layout_scores_sdp_nocaps(local_hub, tmp_path):
    from tests.support.localhub.repos import add_models

    first = len(local_hub.requests)
    add_models(local_hub, ids=["deepseek-ai/Janus-1.3B"])
    cmd = [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", ARGS + ",artifacts=./artifacts",
           "--tasks", "sdp_nocaps", "--limit", "3", "--output_path", "./logs"]
    proc = run(cmd, tmp_path, timeout=1500, **local_hub.env(hf_home=tmp_path / "hf"))
    log = (tmp_path / "lmms_eval.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    _, results = results_file(tmp_path / "logs")
    got = results["results"]["sdp_nocaps"]
    assert (got["n_scored,none"], got["n_failed,none"]) == (3, 0), got
    for mapping in MAPPINGS:
        value = got[f"mcd_{mapping},none"]
        assert isinstance(value, float) and math.isfinite(value), (mapping, got)
    # DeepSeek's files, fetched from the hub under the real id
    paths = [p for _, p, status in local_hub.requests[first:] if status in (200, 206, 302)]
    for name in ("config.json", "model.safetensors", "processor_config.json", "tokenizer.json"):
        assert any("/deepseek-ai/Janus-1.3B/resolve/" in p and p.endswith(name) for p in paths), (name, paths[-20:])


def test_check_finds_the_deepseek_layout_on_the_hub_without_loading_it(local_hub, tmp_path):
    """``lmms-genbench check`` asks the hub for the id and the file both layouts hold (config.json),
    fetches no weights, and names an id the hub does not have."""
    import subprocess

    from tests.support.lmms_eval_runs import offline_env
    from tests.support.localhub.repos import add_models

    add_models(local_hub, ids=["deepseek-ai/Janus-1.3B"])
    env = {**offline_env(tmp_path), **local_hub.env(hf_home=tmp_path / "hf")}

    def check(repo):
        args = ARGS.replace("deepseek-ai/Janus-1.3B", repo) + f",artifacts={tmp_path / 'art'}"
        return subprocess.run([str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", args,
                               "--tasks", "sdp_nocaps", "--output_path", str(tmp_path / "logs")],
                              check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    first = len(local_hub.requests)
    ok = check("deepseek-ai/Janus-1.3B")
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert any(p.startswith("/api/models/deepseek-ai/Janus-1.3B") for _, p, _ in local_hub.requests[first:])
    assert not list((tmp_path / "hf").rglob("*.safetensors"))
    missing = check("deepseek-ai/Janus-0.1B")
    assert missing.returncode == 1 and "deepseek-ai/Janus-0.1B" in missing.stderr, missing.stderr[-3000:]
