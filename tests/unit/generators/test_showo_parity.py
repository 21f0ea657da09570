"""unified=showo reproduces the authors' Show-o code output for output, on random weights.

tests/support/data/parity/showo/ holds tiny checkpoints the authors' own classes built and saved
(showlab/Show-o at 45a5a2de, see its README) in the layouts of show-o-512x512, magvitv2 and
phi-1_5, and what the authors' code output on them (expected.json, expected_t2i.png). Here they
load through our class as a user names them, and every number is compared.
"""

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from PIL import Image  # noqa: E402

from lmms_genbench.generators.unified import build_unified, plan_unified, unified_names  # noqa: E402
from tests.support.threads import single_thread  # noqa: E402

ROOT = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "showo"
EXPECTED = json.loads((ROOT / "expected.json").read_text())
#: float32 on the CPU: the authors' and our networks agree to about 5e-7 on these logits/pixels
LOGITS_TOL = 1e-5
PIXELS_TOL = 1e-4


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # tiny matrices: torch's worker threads only wait on each other (tens of times slower on a
    # busy machine); the numbers do not depend on the thread count here
    with single_thread():
        yield


@pytest.fixture(scope="module")
def showo(one_thread):
    return build_unified("showo", pretrained=str(ROOT / "show-o-512x512"), vq_model=str(ROOT / "magvitv2"),
                         tokenizer=str(ROOT / "phi-1_5"), device="cpu", dtype="float32")


def _close(actual, expected, tol):
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64).reshape(-1), expected, rtol=0, atol=tol)


def test_showo_is_registered_and_plans_without_loading():
    assert "showo" in unified_names()
    plan = plan_unified("showo", {"device": "cpu", "dtype": "float32"})
    assert plan.name.startswith("showo-showlab-show-o-512x512-") and plan.batch_size == 4
    with pytest.raises(ValueError, match="generation_timesteps"):
        plan_unified("showo", {"device": "cpu", "generation_timesteps": 0})


def test_the_geometry_comes_from_the_checkpoints(showo):
    assert (showo.image_size, showo.num_codes, showo.vq.codebook_size) == (EXPECTED["resolution"], 16, 8192)
    assert showo.vq.geometry.encoder_blocks == (1, 2, 1, 1, 1) and showo.vq.geometry.decoder_mult == (1, 1, 1, 2, 2)
    vocab = showo.vocab
    assert {"<|pad|>": vocab.pad, "<|soi|>": vocab.soi, "<|eoi|>": vocab.eoi, "<|t2i|>": vocab.t2i,
            "<|mmu|>": vocab.mmu, "<|sot|>": vocab.bos} == {k: EXPECTED["special_ids"][k] for k in
                                                           ("<|pad|>", "<|soi|>", "<|eoi|>", "<|t2i|>", "<|mmu|>", "<|sot|>")}


def test_understanding_matches_the_authors(showo):
    from lmms_genbench.generators.unified.showo.loading import image_tensor
    from lmms_genbench.generators.unified.showo.omni import mmu_mask

    mmu = EXPECTED["mmu"]
    pixels = image_tensor(Image.open(ROOT / EXPECTED["image"]), EXPECTED["resolution"])
    _close(pixels[:, 30, 28:36], mmu["pixels_slice"], 1e-6)
    codes = showo.vq.encode(pixels[None])[0].tolist()
    assert codes == mmu["image_codes"]
    ids = torch.tensor([showo.vocab.mmu_row(codes, mmu["question"])])
    assert ids[0].tolist() == mmu["input_ids"]
    mask = mmu_mask(ids, showo.vocab, torch.float32)
    with torch.no_grad():
        logits = showo.lm(input_ids=ids, attention_mask=mask).logits[0]
    offset = showo.vocab.image_offset
    _close(logits[-1, :64], mmu["logits_last_slice"], LOGITS_TOL)
    _close(logits[5, offset:offset + 32], mmu["logits_image_row_slice"], LOGITS_TOL)
    with torch.no_grad():
        greedy = showo.continue_text(ids, mask, mmu["max_new_tokens"])[0]
    assert greedy == mmu["greedy_ids"]
    assert showo.decode_text(greedy) == mmu["greedy_text"]
    # through the front door: the task's question and decoding settings
    text = showo.describe([Image.open(ROOT / EXPECTED["image"])], mmu["question"],
                          {"max_new_tokens": mmu["max_new_tokens"], "temperature": 0})
    assert text == [mmu["greedy_text"].strip()]
    # batched with another image, each description is the one it gets alone
    image = Image.open(ROOT / EXPECTED["image"])
    other = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    settings = {"max_new_tokens": mmu["max_new_tokens"], "temperature": 0}
    assert showo.describe([image, other], mmu["question"], settings) == \
        text + showo.describe([other], mmu["question"], settings)


def test_generation_matches_the_authors_and_each_image_is_its_own(showo):
    from lmms_genbench.generators.unified.showo.omni import t2i_mask

    t2i = EXPECTED["t2i"]
    row = showo.vocab.t2i_row(t2i["prompt"], showo.num_codes)
    assert row == t2i["input_ids"]
    ids = torch.tensor([row, showo.vocab.t2i_row("", showo.num_codes)])
    with torch.no_grad():
        logits = showo.lm(input_ids=ids[:1], attention_mask=t2i_mask(ids, showo.vocab, torch.float32)[:1]).logits
    offset = showo.vocab.image_offset
    _close(logits[0, -2, offset:offset + 32], t2i["first_logits_slice"], LOGITS_TOL)

    cfg = t2i["cfg"]
    assert (showo.guidance_scale, showo.steps, showo.image_temperature) == (
        cfg["guidance_scale"], cfg["timesteps"], cfg["temperature"])
    # a neighbour in the batch changes nothing: each prompt draws from its own generator
    codes = showo.draw_codes([t2i["prompt"], "two birds over a lake"], [cfg["seed"], 99])
    assert codes[0].tolist() == cfg["codes"]
    pixels = showo.decode_pixels(codes[:1])
    _close(pixels[0, :, 20, 16:24], t2i["decoded_slice"], PIXELS_TOL)
    assert abs(float(pixels.mean()) - t2i["decoded_mean"]) < PIXELS_TOL
    # the image generate() returns; the authors truncate to uint8, so float noise of 1e-6 may
    # cross a level
    image = np.asarray(showo.to_images(pixels)[0], dtype=int)
    assert np.abs(image - np.asarray(Image.open(ROOT / t2i["decoded_png"]), dtype=int)).max() <= 1


def test_the_unguided_path_matches_the_authors():
    nocfg = EXPECTED["t2i"]["nocfg"]
    model = build_unified("showo", pretrained=str(ROOT / "show-o-512x512"), vq_model=str(ROOT / "magvitv2"),
                          tokenizer=str(ROOT / "phi-1_5"), device="cpu", dtype="float32",
                          guidance_scale=nocfg["guidance_scale"], generation_timesteps=nocfg["timesteps"])
    assert model.draw_codes([EXPECTED["t2i"]["prompt"]], [nocfg["seed"]])[0].tolist() == nocfg["codes"]
    image = model.generate([EXPECTED["t2i"]["prompt"]], [nocfg["seed"]])[0]
    assert isinstance(image, Image.Image) and image.size == (EXPECTED["resolution"],) * 2


def test_the_resize_is_torchvisions():
    transforms = pytest.importorskip("torchvision.transforms")
    from lmms_genbench.generators.unified.showo.loading import image_tensor

    image = Image.open(ROOT / EXPECTED["image"]).convert("RGB")
    for size in (64, 40):
        ours = image_tensor(image, size)
        theirs = transforms.Compose([transforms.Resize(size, interpolation=transforms.InterpolationMode.BICUBIC),
                                     transforms.CenterCrop((size, size)), transforms.ToTensor(),
                                     transforms.Normalize([0.5] * 3, [0.5] * 3)])(image)
        assert torch.allclose(ours, theirs, atol=1e-6)


def test_a_long_prompt_is_cut_and_a_short_one_padded_as_the_authors_do(showo):
    from lmms_genbench.generators.unified.showo.omni import MAX_TEXT_LEN, t2i_mask

    vocab = showo.vocab
    long_row = vocab.t2i_row("a dog in the park " * 60, 4)
    short_row = vocab.t2i_row("a dog", 4)
    for row in (long_row, short_row):  # 129 text tokens, <|soi|>, the codes, <|eoi|>
        assert len(row) == MAX_TEXT_LEN + 1 + 1 + 4 + 1 and row[MAX_TEXT_LEN + 1] == vocab.soi
        assert row[MAX_TEXT_LEN] == vocab.eos and row[-1] == vocab.eoi and row[-5:-1] == [vocab.mask] * 4
    assert long_row[:2] == [vocab.t2i, vocab.bos] and vocab.pad not in long_row
    assert short_row[0] == vocab.pad and short_row.count(vocab.t2i) == 1
    allowed = t2i_mask(torch.tensor([long_row, short_row]), vocab, torch.float32)[:, 0] == 0
    pads = torch.tensor(short_row) == vocab.pad
    # nothing after the padding and no image token sees it; image tokens see every other token
    assert not allowed[1][~pads][:, pads].any() and allowed[1][-3][~pads].all() and allowed[0][-3].all()
    assert not allowed[0][5, 6:].any()  # text is causal


def test_a_wrong_folder_or_the_clip_variant_is_one_clear_error(tmp_path):
    import shutil

    from lmms_genbench.core.failures import GeneratorConfigError

    folders = {"pretrained": str(ROOT / "show-o-512x512"), "vq_model": str(ROOT / "magvitv2"),
               "tokenizer": str(ROOT / "phi-1_5"), "device": "cpu"}
    with pytest.raises(GeneratorConfigError, match="phi-1_5 has no pytorch_model.safetensors"):
        build_unified("showo", **{**folders, "vq_model": str(ROOT / "phi-1_5")})
    clip = tmp_path / "show-o-w-clip"
    shutil.copytree(ROOT / "show-o-512x512", clip)
    config = json.loads((clip / "config.json").read_text())
    (clip / "config.json").write_text(json.dumps({**config, "w_clip_vit": True}))
    with pytest.raises(GeneratorConfigError, match="CLIP-ViT variant"):
        build_unified("showo", **{**folders, "pretrained": str(clip)})
    (clip / "config.json").write_text(json.dumps({**config, "llm_vocab_size": config["llm_vocab_size"] - 1}))
    with pytest.raises(GeneratorConfigError, match="not the tokenizer it was trained with"):
        build_unified("showo", **{**folders, "pretrained": str(clip)})
