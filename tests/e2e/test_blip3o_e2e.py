"""``unified=blip3o`` through the front door: lmms-eval's cycle model loads BLIP3o/BLIP3o-Model-4B
from the local test hub (the committed parity checkpoint, in the authors' layout) with
Qwen/Qwen2.5-VL-7B-Instruct's processor, and scores sdp_nocaps.

TEST SCAFFOLDING: tiny random weights; this checks loading, describing, drawing and scoring, not
the real model (tests/unit/generators/test_blip3o_parity.py compares it with the authors' code)."""

from tests.support.unified_runs import assert_batches_store_alike, run_unified, served


def test_the_unified_blip3o_command_on_a_cpu_and_batch_size_4_stores_the_same(local_hub, tmp_path):
    """The command (4 docs scored, all four mappings a cosine: run_unified's checks), then
    ``unified.batch_size=4``: four docs' images drawn in one chunk (one language-model forward, one
    DiT sampling, one decoder loop) and described in one batch store what batch 1 stores."""
    args = ("unified=blip3o,unified.pretrained=BLIP3o/BLIP3o-Model-4B,unified.device=cpu,unified.dtype=float32,"
            "unified.image_size=32,unified.dit_steps=8,unified.decoder_steps=8")
    for batch in (1, 4):
        (tmp_path / str(batch)).mkdir()
        # one thread: the tiny model's ops are too small to share, and threads contend on a busy CPU
        _, requests = run_unified(local_hub, tmp_path / str(batch), f"{args},unified.batch_size={batch}",
                                  ["BLIP3o/BLIP3o-Model-4B", "Qwen/Qwen2.5-VL-7B-Instruct"], limit=4,
                                  OMP_NUM_THREADS="1")
        if batch == 1:  # both repos came through the hub: the checkpoint (decoder included) and the processor
            paths = served(requests, statuses=(200, 302))
            for fetched in ("/BLIP3o/BLIP3o-Model-4B/resolve/", "/diffusion-decoder/unet/diffusion_pytorch_model.bf16",
                            "/Qwen/Qwen2.5-VL-7B-Instruct/resolve/"):
                assert any(fetched in p for p in paths), (fetched, paths[-20:])
    assert_batches_store_alike(tmp_path / "1", tmp_path / "4")
