"""Janus 1.3B as DeepSeek published it, through the front door: ``unified.pretrained=deepseek-ai/Janus-1.3B``
served by the local test hub in DeepSeek's layout (the tiny checkpoint DeepSeek's own code built,
tests/support/data/parity/janus13), ``sdp_nocaps --limit 3`` scored in all four MCD mappings.

TEST SCAFFOLDING: tiny random weights; this checks loading DeepSeek's files through the hub and
the plumbing, not Janus 1.3B's behaviour (test_janus13_parity.py compares outputs with DeepSeek's code).
"""

from tests.support.unified_runs import check_unified, run_unified, served

ARGS = "unified=janus,unified.pretrained=deepseek-ai/Janus-1.3B,unified.device=cpu,unified.dtype=float32"


def test_janus_13b_in_deepseeks_layout_scores_sdp_nocaps(local_hub, tmp_path):
    # 3 docs scored, all four mappings a finite cosine: run_unified's checks
    _, requests = run_unified(local_hub, tmp_path, ARGS, ["deepseek-ai/Janus-1.3B"])
    # DeepSeek's files, fetched from the hub under the real id
    paths = served(requests)
    for name in ("config.json", "model.safetensors", "processor_config.json", "tokenizer.json"):
        assert any("/deepseek-ai/Janus-1.3B/resolve/" in p and p.endswith(name) for p in paths), (name, paths[-20:])


def test_check_finds_the_deepseek_layout_on_the_hub_without_loading_it(local_hub, tmp_path):
    """``lmms-genbench check`` asks the hub for the id and the file both layouts hold (config.json),
    fetches no weights, and names an id the hub does not have."""
    from tests.support.localhub.repos import add_models

    add_models(local_hub, ids=["deepseek-ai/Janus-1.3B"])

    def check(repo):
        args = ARGS.replace("deepseek-ai/Janus-1.3B", repo) + f",artifacts={tmp_path / 'art'}"
        return check_unified(local_hub, tmp_path, args, limit=None)

    first = len(local_hub.requests)
    ok = check("deepseek-ai/Janus-1.3B")
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert any(p.startswith("/api/models/deepseek-ai/Janus-1.3B") for _, p, _ in local_hub.requests[first:])
    assert not list((tmp_path / "hf").rglob("*.safetensors"))
    missing = check("deepseek-ai/Janus-0.1B")
    assert missing.returncode == 1 and "deepseek-ai/Janus-0.1B" in missing.stderr, missing.stderr[-3000:]
