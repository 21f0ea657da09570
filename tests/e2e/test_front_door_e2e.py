"""The headline command as a user types it, through the local test hub (tests/support/localhub).

``lmms-eval --model cycle --model_args describer=qwen2_5_vl,describer.pretrained=Qwen/...``
with the real task YAMLs (``mmeception``, ``sdp_nocaps``), their real dataset ids (gated MME,
nd400 joined with DOCCI's and NoCaps' Parquet exports) and the real scorer networks' ids: every
``from_pretrained`` and ``load_dataset`` goes through huggingface_hub to ``HF_ENDPOINT``.

TEST SCAFFOLDING: what the hub serves under those ids is tiny random weights and synthetic
rows, so these runs check the plumbing (ids, revisions, tokens, joins, loading, scoring),
never the real models' behaviour or scores. What a user adds for a CPU: ``*.device=cpu``,
small ``generator.width/height``, and ``LMMS_GENBENCH_FID_FEATURES=fid-helper`` (clean-fid's
Inception downloads from GitHub, not from the hub).

Also here: docs/running.md's llava + SD3.5 command (generator pinned to a commit sha),
docs/models.md's unified Janus command, the hub dying mid-run and coming back, and a ChEF recipe
on its hub dataset (the image reaches the inner model although lmms-eval renders contexts
from docs without their Image columns).
"""

import json

from tests.support.lmms_eval_runs import BIN, response, results_file, run, samples


HEADLINE_ARGS = (
    "describer=qwen2_5_vl,describer.pretrained=Qwen/Qwen2.5-VL-7B-Instruct,describer.device=cpu,describer.device_map=cpu,"
    "generator=diffusers,generator.pretrained=black-forest-labs/FLUX.1-schnell,generator.device=cpu,"
    "generator.steps=4,generator.guidance=0.0,generator.width=32,generator.height=32,artifacts=./artifacts"
)
#: what the run must have fetched from the hub, by path prefix (the front door, no fixture override)
FETCHED = (
    "/Qwen/Qwen2.5-VL-7B-Instruct/resolve/",
    "/black-forest-labs/FLUX.1-schnell/resolve/",
    "/datasets/lmms-lab-encoder/MME/resolve/",
    "/datasets/mollahsabbir/nd400/resolve/",
    "/datasets/google/docci/resolve/",
    "/datasets/HuggingFaceM4/NoCaps/resolve/",
    "/google/vit-base-patch16-224-in21k/resolve/",
    "/openai/clip-vit-base-patch32/resolve/",
    "/sentence-transformers/all-mpnet-base-v2/resolve/",
    "/facebook/dino-vitb16/resolve/",
)
# sdp_nocaps lists a pair's two directions side by side (utils.both_directions), so --limit 3 draws
# both text-first and image-first chains, and image->image needs facebook/dino-vitb16


def test_the_headline_command_through_the_local_hub(local_hub, tmp_path):
    first = len(local_hub.requests)
    cmd = [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", HEADLINE_ARGS,
           "--tasks", "mmeception,sdp_nocaps", "--limit", "3", "--output_path", "./logs"]
    proc = run(cmd, tmp_path, timeout=1500, LMMS_GENBENCH_FID_FEATURES="fid-helper",
               **local_hub.env(hf_home=tmp_path / "hf"))
    log = (tmp_path / "lmms_eval.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    _, results = results_file(tmp_path / "logs")
    for task in ("mmeception", "sdp_nocaps"):
        got = results["results"].get(task)
        assert got is not None, f"{task} has no results: {log[-3000:]}"
        assert (got["n_scored,none"], got["n_failed,none"]) == (3, 0), (task, got)
    assert results["results"]["mmeception"]["gc@3,none"] is not None
    mcd = results["results"]["sdp_nocaps"]
    assert mcd["mcd_avg,none"] is not None and mcd["mcd_text->text,none"] is not None
    # both directions within --limit 3 (see above): every mapping is scored
    assert all(mcd[f"mcd_{m},none"] is not None for m in ("text->text", "image->image", "text->image", "image->text"))
    served = [(path, status) for _, path, status in local_hub.requests[first:] if status in (200, 206, 302)]
    missing = [prefix for prefix in FETCHED if not any(p.startswith(prefix) for p, _ in served)]
    assert not missing, f"never fetched from the hub: {missing}"
    assert not local_hub.unrouted, f"requests the local hub has no endpoint for: {local_hub.unrouted}"
    # the gated MME was read with the token that accepted its terms, and nothing was refused
    assert not [r for r in local_hub.requests[first:] if r[2] in (401, 403)]


def test_the_running_guides_command_on_a_cpu(local_hub, tmp_path):
    """docs/running.md's first command (llava-hf/llava-1.5-7b-hf + stabilityai/stable-diffusion-3.5-medium),
    with the CPU in place of ``cuda``, fewer steps and sizes, and the generator pinned to a commit sha."""
    from tests.support.localhub.repos import add_models

    add_models(local_hub, ids=["llava-hf/llava-1.5-7b-hf", "stabilityai/stable-diffusion-3.5-medium"])
    sha = local_hub.sha("stabilityai/stable-diffusion-3.5-medium")
    args = ("describer=llava_hf,describer.pretrained=llava-hf/llava-1.5-7b-hf,describer.device_map=cpu,describer.device=cpu,"
            "generator=diffusers,generator.pretrained=stabilityai/stable-diffusion-3.5-medium,"
            f"generator.revision={sha},generator.device=cpu,generator.steps=2,generator.guidance=4.5,"
            "generator.batch_size=8,generator.width=32,generator.height=32,artifacts=./artifacts")
    first = len(local_hub.requests)
    cmd = [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args, "--tasks", "mmeception",
           "--limit", "2", "--output_path", "./logs", "--log_samples"]
    proc = run(cmd, tmp_path, timeout=1500, LMMS_GENBENCH_FID_FEATURES="fid-helper",
               **local_hub.env(hf_home=tmp_path / "hf"))
    log = (tmp_path / "lmms_eval.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    _, results = results_file(tmp_path / "logs")
    got = results["results"]["mmeception"]
    assert (got["n_scored,none"], got["n_failed,none"]) == (2, 0), got
    paths = [p for _, p, status in local_hub.requests[first:] if status in (200, 302)]
    assert any(p.startswith("/llava-hf/llava-1.5-7b-hf/resolve/") for p in paths)
    # the pinned revision is what the generator asked the hub for
    assert any(p.startswith(f"/api/models/stabilityai/stable-diffusion-3.5-medium/revision/{sha}")
               or p.startswith(f"/stabilityai/stable-diffusion-3.5-medium/resolve/{sha}/") for p in paths), paths[-20:]


def test_the_unified_janus_command_on_a_cpu(local_hub, tmp_path):
    """docs/models.md's unified command (deepseek-community/Janus-Pro-7B) on the CPU, sdp_nocaps
    (both directions of one pair: 2 docs scored, all four mappings a cosine)."""
    from tests.support.unified_runs import run_unified

    args = "unified=janus,unified.pretrained=deepseek-community/Janus-Pro-7B,unified.device=cpu,unified.dtype=float32"
    run_unified(local_hub, tmp_path, args, ["deepseek-community/Janus-Pro-7B"], limit=2)


def test_the_hub_going_away_mid_run_then_coming_back(local_hub, tmp_path):
    """The hub dies when the scorer asks for its network (every chain drawn by then): the run ends
    in one line naming the endpoint, exit 1, no results file; with the hub back, the same command
    reuses every stored hop and scores. Its own servers: the session's must stay up."""
    from tests.support.localhub.repos import add_all
    from tests.support.localhub.server import LocalHubServer

    cmd = [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", HEADLINE_ARGS, "--tasks", "mmeception",
           "--limit", "2", "--output_path", "./logs"]
    runs = []
    for attempt in ("gone", "back"):
        hub = add_all(LocalHubServer(), local_hub.build_root)
        if attempt == "gone":
            hub.go_away_at = "/api/models/google/vit-base-patch16-224-in21k"
        with hub:
            runs.append(run(cmd, tmp_path, log=f"{attempt}.log", timeout=1500, LMMS_GENBENCH_FID_FEATURES="fid-helper",
                            **hub.env(hf_home=tmp_path / "hf")))
        if attempt == "gone":
            gone_log = (tmp_path / "gone.log").read_text()
            assert runs[0].returncode == 1, gone_log[-3000:]
            errors = [line for line in gone_log.splitlines() if line.startswith("lmms-genbench: error:")]
            assert len(errors) == 1 and hub.url in errors[0], errors or gone_log[-3000:]
            assert not list((tmp_path / "logs").rglob("*_results.json"))
    back_log = (tmp_path / "back.log").read_text()
    assert runs[1].returncode == 0, back_log[-3000:]
    assert "0 computed" in back_log and "0 failed" in back_log, back_log[-3000:]
    _, results = results_file(tmp_path / "logs")
    got = results["results"]["mmeception"]
    assert (got["n_scored,none"], got["n_failed,none"]) == (2, 0), got


def test_a_chef_recipe_on_its_hub_dataset(local_hub, tmp_path):
    """chef_calibration_mmbench (Multi-Turn) and chef_hallucination_random (PPL over Yes/No) as
    typed (smoke inner model), MMBench and POPE read from the local hub.

    lmms-eval 0.7.3 renders the payload from docs without their Image columns; the chef model
    takes each doc's image through the request's doc_to_visual on the full row: every variant
    of every doc showed the inner model one image (the response's ``n_images``), none failed."""
    first = len(local_hub.requests)
    tasks = ("chef_calibration_mmbench", "chef_hallucination_random")
    cmd = [str(BIN / "lmms-eval"), "--model", "chef", "--model_args", "preset=smoke,judge=inner",
           "--tasks", ",".join(tasks), "--limit", "2", "--output_path", "./logs", "--log_samples"]
    proc = run(cmd, tmp_path, timeout=900, **local_hub.env(hf_home=tmp_path / "hf"))
    log = (tmp_path / "lmms_eval.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    _, results = results_file(tmp_path / "logs")
    answers = {}
    for task, headline in zip(tasks, ("ece", "pope_accuracy")):
        got = results["results"].get(task)
        assert got is not None, (task, log[-3000:])
        assert (got["n_docs,none"], got["n_failed,none"]) == (2, 0), (task, got)
        assert got[f"{headline},none"] is not None, (task, got)
        answers[task] = [json.loads(response(s))["variants"][0] for s in samples(tmp_path / "logs", task)]
        assert [v["n_images"] for v in answers[task]] == [1, 1], answers[task]
        assert all(len(v["scores"]) == v["n_options"] for v in answers[task])  # every option scored
    assert all("cot" in v for v in answers[tasks[0]])  # Multi-Turn reasoned first
    served = [p for _, p, _ in local_hub.requests[first:]]
    assert all(any(p.startswith(f"/datasets/lmms-lab-encoder/{name}/") for p in served) for name in ("MMBench", "POPE"))
