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


def test_unified_batch_size_4_stores_the_texts_and_images_of_batch_1(local_hub, tmp_path):
    """``unified.batch_size=4``: four docs' images drawn in one chunk (one language-model forward,
    one DiT sampling, one decoder loop) and their images described in one batch store what
    ``unified.batch_size=1`` stores: the same files, texts equal, pixels within one level."""
    import numpy as np
    from PIL import Image

    stores = {}
    for batch in (1, 4):
        run_dir = tmp_path / f"batch{batch}"
        run_dir.mkdir()
        args = ("unified=blip3o,unified.pretrained=BLIP3o/BLIP3o-Model-4B,unified.device=cpu,unified.dtype=float32,"
                f"unified.image_size=32,unified.dit_steps=8,unified.decoder_steps=8,unified.batch_size={batch}")
        run_unified(local_hub, run_dir, args, ["BLIP3o/BLIP3o-Model-4B", "Qwen/Qwen2.5-VL-7B-Instruct"], limit=4,
                    OMP_NUM_THREADS="1")
        root = run_dir / "artifacts"
        stores[batch] = {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.suffix in (".txt", ".png")}
    one, four = stores[1], stores[4]
    assert sorted(one) == sorted(four)  # the same namespaces (batch_size names none), chains and hops
    texts = [name for name in one if name.endswith(".txt")]
    images = [name for name in one if name.endswith(".png")]
    assert len(images) >= 8 and len(texts) >= 4, sorted(one)
    for name in texts:
        assert four[name].read_text() == one[name].read_text(), name
    for name in images:
        a, b = (np.asarray(Image.open(s[name])).astype(int) for s in (one, four))
        assert a.shape == b.shape and np.abs(a - b).max() <= 1, name
