"""``unified=showo`` as a user types it, through the local test hub: the real ids of Show-o's three
repositories (showlab/show-o-512x512, showlab/magvitv2, microsoft/phi-1_5) on ``sdp_nocaps``.

TEST SCAFFOLDING: the hub serves the tiny checkpoints the authors' code wrote
(tests/support/data/parity/showo, whose numbers tests/unit/generators/test_showo_parity.py
checks), so this run checks the plumbing (ids, files, loading, both roles, scoring), never
the real model's behaviour or scores.
"""

from tests.support.unified_runs import check_unified, run_unified

SHOWO_IDS = ("showlab/show-o-512x512", "showlab/magvitv2", "microsoft/phi-1_5")


def test_the_unified_showo_command_on_a_cpu(local_hub, tmp_path):
    # vq_model and tokenizer at their defaults: the ids configs/showo_demo_512x512.yaml names
    args = "unified=showo,unified.pretrained=showlab/show-o-512x512,unified.device=cpu,unified.dtype=float32"
    _, requests = run_unified(local_hub, tmp_path, args, SHOWO_IDS)
    fetched = " ".join(str(r) for r in requests)
    for repo in SHOWO_IDS:
        assert f"/{repo}/resolve/" in fetched, repo


def test_check_asks_the_hub_for_each_of_showos_repositories(local_hub, tmp_path):
    """``lmms-genbench check`` knows the three repositories unified=showo reads: all served, it
    passes; an id the hub lacks (here the tokenizer's) is named by its argument."""
    from tests.support.lmms_eval_runs import nonblank_lines
    from tests.support.localhub.repos import add_models

    add_models(local_hub, ids=list(SHOWO_IDS))
    base = "unified=showo,unified.device=cpu,unified.dtype=float32,artifacts=./artifacts"
    for extra, ok in (("", True), (",unified.tokenizer=showlab/no-such-phi", False)):
        proc = check_unified(local_hub, tmp_path, base + extra)
        last = nonblank_lines(proc.stderr)[-1]
        if ok:
            assert proc.returncode == 0 and last.endswith("nothing missing for --model cycle --tasks sdp_nocaps"), \
                proc.stderr[-3000:]
        else:
            assert proc.returncode == 1 and "unified.tokenizer=showlab/no-such-phi" in proc.stderr, proc.stderr[-3000:]
    assert not list((tmp_path / "hf").rglob("*.safetensors"))  # no weights fetched
