"""``unified=showo`` as a user types it, through the local test hub: the real ids of Show-o's three
repositories (showlab/show-o-512x512, showlab/magvitv2, microsoft/phi-1_5) on ``sdp_nocaps``.

TEST SCAFFOLDING: the hub serves the tiny checkpoints the authors' code wrote
(tests/support/data/parity/showo, whose numbers tests/unit/generators/test_showo_parity.py
checks), so this run checks the plumbing (ids, files, loading, both roles, scoring), never
the real model's behaviour or scores.
"""

from tests.support.lmms_eval_runs import BIN, results_file, run

SHOWO_IDS = ("showlab/show-o-512x512", "showlab/magvitv2", "microsoft/phi-1_5")


def test_the_unified_showo_command_on_a_cpu(local_hub, tmp_path):
    from tests.support.localhub.repos import add_models

    add_models(local_hub, ids=list(SHOWO_IDS))
    first = len(local_hub.requests)
    # vq_model and tokenizer at their defaults: the ids configs/showo_demo_512x512.yaml names
    args = "unified=showo,unified.pretrained=showlab/show-o-512x512,unified.device=cpu,unified.dtype=float32"
    cmd = [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args + ",artifacts=./artifacts",
           "--tasks", "sdp_nocaps", "--limit", "3", "--output_path", "./logs"]
    proc = run(cmd, tmp_path, timeout=1500, **local_hub.env(hf_home=tmp_path / "hf"))
    log = (tmp_path / "lmms_eval.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    _, results = results_file(tmp_path / "logs")
    got = results["results"]["sdp_nocaps"]
    assert (got["n_scored,none"], got["n_failed,none"]) == (3, 0), got
    for mapping in ("text->text", "text->image", "image->image", "image->text"):
        assert got[f"mcd_{mapping},none"] is not None, (mapping, got)
    fetched = " ".join(str(r) for r in local_hub.requests[first:])
    for repo in SHOWO_IDS:
        assert f"/{repo}/resolve/" in fetched, repo


def test_check_asks_the_hub_for_each_of_showos_repositories(local_hub, tmp_path):
    """``lmms-genbench check`` knows the three repositories unified=showo reads: all served, it
    passes; an id the hub lacks (here the tokenizer's) is named by its argument."""
    import subprocess

    from tests.support.lmms_eval_runs import nonblank_lines, offline_env
    from tests.support.localhub.repos import add_models

    add_models(local_hub, ids=list(SHOWO_IDS))
    base = "unified=showo,unified.device=cpu,unified.dtype=float32,artifacts=./artifacts"
    for extra, ok in (("", True), (",unified.tokenizer=showlab/no-such-phi", False)):
        env = {**offline_env(tmp_path), **local_hub.env(hf_home=tmp_path / "hf")}
        proc = subprocess.run([str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", base + extra,
                               "--tasks", "sdp_nocaps", "--limit", "3", "--output_path", str(tmp_path / "logs")],
                              check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        last = nonblank_lines(proc.stderr)[-1]
        if ok:
            assert proc.returncode == 0 and last.endswith("nothing missing for --model cycle --tasks sdp_nocaps"), \
                proc.stderr[-3000:]
        else:
            assert proc.returncode == 1 and "unified.tokenizer=showlab/no-such-phi" in proc.stderr, proc.stderr[-3000:]
    assert not list((tmp_path / "hf").rglob("*.safetensors"))  # no weights fetched
