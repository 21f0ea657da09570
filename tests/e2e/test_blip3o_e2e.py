"""``unified=blip3o`` through the front door: lmms-eval's cycle model loads BLIP3o/BLIP3o-Model-4B
from the local test hub (the committed parity checkpoint, in the authors' layout) with
Qwen/Qwen2.5-VL-7B-Instruct's processor, and scores sdp_nocaps.

TEST SCAFFOLDING: tiny random weights; this checks loading, describing, drawing and scoring, not
the real model (tests/unit/generators/test_blip3o_parity.py compares it with the authors' code)."""

from tests.support.unified_runs import run_unified, served


def test_the_unified_blip3o_command_on_a_cpu(local_hub, tmp_path):
    args = ("unified=blip3o,unified.pretrained=BLIP3o/BLIP3o-Model-4B,unified.device=cpu,unified.dtype=float32,"
            "unified.image_size=32")
    # one thread: the tiny model's ops are too small to share, and threads contend on a busy CPU;
    # 3 docs scored, all four mappings a cosine: run_unified's checks
    _, requests = run_unified(local_hub, tmp_path, args, ["BLIP3o/BLIP3o-Model-4B", "Qwen/Qwen2.5-VL-7B-Instruct"],
                              OMP_NUM_THREADS="1")
    # both repos came through the hub: the checkpoint (decoder included) and the processor
    paths = served(requests, statuses=(200, 302))
    for fetched in ("/BLIP3o/BLIP3o-Model-4B/resolve/", "/diffusion-decoder/unet/diffusion_pytorch_model.bf16",
                    "/Qwen/Qwen2.5-VL-7B-Instruct/resolve/"):
        assert any(fetched in p for p in paths), (fetched, paths[-20:])
