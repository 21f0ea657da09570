"""Janus-Pro as DeepSeek publishes it, through the front door: ``unified.pretrained=deepseek-ai/Janus-Pro-7B``
served by the local test hub in DeepSeek's layout (the tiny Pro checkpoint DeepSeek's own code
built, with Janus-Pro's processor files: tests/support/data/parity/janus_pro7b), ``sdp_nocaps --limit 2``
scored in all four MCD mappings.

TEST SCAFFOLDING: tiny random weights; this checks that the roles file is read from the hub and the
plumbing, not Janus-Pro's behaviour (test_janus_pro_parity.py compares outputs with DeepSeek's code).
"""

from tests.support.unified_runs import run_unified, served

ARGS = "unified=janus,unified.pretrained=deepseek-ai/Janus-Pro-7B,unified.device=cpu,unified.dtype=float32"


def test_janus_pro_in_deepseeks_layout_scores_sdp_nocaps(local_hub, tmp_path):
    _, requests = run_unified(local_hub, tmp_path, ARGS, ["deepseek-ai/Janus-Pro-7B"], limit=2)
    paths = served(requests)
    # special_tokens_map.json names the roles (<|User|>, <|Assistant|>): fetched under the real id
    for name in ("config.json", "model.safetensors", "special_tokens_map.json", "tokenizer.json"):
        assert any("/deepseek-ai/Janus-Pro-7B/resolve/" in p and p.endswith(name) for p in paths), (name, paths[-20:])
