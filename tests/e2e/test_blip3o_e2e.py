"""``unified=blip3o`` through the front door: lmms-eval's cycle model loads BLIP3o/BLIP3o-Model-4B
from the local test hub (the committed parity checkpoint, in the authors' layout) with
Qwen/Qwen2.5-VL-7B-Instruct's processor, and scores sdp_nocaps.

TEST SCAFFOLDING: tiny random weights; this checks loading, describing, drawing and scoring, not
the real model (tests/unit/generators/test_blip3o_parity.py compares it with the authors' code)."""

from tests.support.lmms_eval_runs import BIN, results_file, run


def test_the_unified_blip3o_command_on_a_cpu(local_hub, tmp_path):
    from tests.support.localhub.repos import add_models

    add_models(local_hub, ids=["BLIP3o/BLIP3o-Model-4B", "Qwen/Qwen2.5-VL-7B-Instruct"])
    first = len(local_hub.requests)
    args = ("unified=blip3o,unified.pretrained=BLIP3o/BLIP3o-Model-4B,unified.device=cpu,unified.dtype=float32,"
            "unified.image_size=32,artifacts=./artifacts")
    cmd = [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args, "--tasks", "sdp_nocaps",
           "--limit", "3", "--output_path", "./logs"]
    # one thread: the tiny model's ops are too small to share, and threads contend on a busy CPU
    proc = run(cmd, tmp_path, timeout=1500, OMP_NUM_THREADS="1", **local_hub.env(hf_home=tmp_path / "hf"))
    log = (tmp_path / "lmms_eval.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    _, results = results_file(tmp_path / "logs")
    got = results["results"]["sdp_nocaps"]
    assert (got["n_scored,none"], got["n_failed,none"]) == (3, 0), got
    for mapping in ("text->text", "text->image", "image->image", "image->text"):
        assert -1.0 <= got[f"mcd_{mapping},none"] <= 1.0, got
    # both repos came through the hub: the checkpoint (decoder included) and the processor
    paths = [p for _, p, status in local_hub.requests[first:] if status in (200, 302)]
    for fetched in ("/BLIP3o/BLIP3o-Model-4B/resolve/", "/diffusion-decoder/unet/diffusion_pytorch_model.bf16",
                    "/Qwen/Qwen2.5-VL-7B-Instruct/resolve/"):
        assert any(fetched in p for p in paths), (fetched, paths[-20:])
