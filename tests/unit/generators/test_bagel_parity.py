"""unified=bagel against the authors' own classes (oscarqjh/Bagel 751db47), output for output, on
the tiny random BAGEL committed in their published layout (tests/support/data/parity/bagel: the
README says how expected.json and the draw_*.png were recorded).

The recording ran the authors' code in float32 (their bfloat16 casts, made for flash-attn, aliased
to float32; flash-attn's varlen call replaced by exact attention), so the tolerances are float32 ones.
"""

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")

from lmms_genbench.generators.unified import build_unified
from lmms_genbench.generators.unified.bagel import BagelUnified
from lmms_genbench.generators.unified.bagel.network import FlowSettings
from tests.support.allowances import BAGEL_LATENT_ATOL, BAGEL_LOGITS_ATOL, BAGEL_PIXEL_ATOL

PARITY = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "bagel"
CHECKPOINT = PARITY / "BAGEL-7B-MoT-tiny"
EXPECTED = json.loads((PARITY / "expected.json").read_text())

LOGITS_ATOL, LATENT_ATOL, PIXEL_ATOL = BAGEL_LOGITS_ATOL, BAGEL_LATENT_ATOL, BAGEL_PIXEL_ATOL


@pytest.fixture(scope="module")
def bagel():
    # what unified=bagel,unified.pretrained=<folder>,unified.device=cpu,unified.dtype=float32 builds
    return build_unified("bagel", pretrained=str(CHECKPOINT), device="cpu", dtype="float32")


def test_the_tokenizer_reads_the_published_files_as_the_authors_qwen2_tokenizer(bagel):
    assert bagel.tokenizer.encode(EXPECTED["understanding"]["prompt"]) == EXPECTED["understanding"]["prompt_ids"]
    assert bagel.tokenizer.encode(EXPECTED["drawing"]["prompt"]) == EXPECTED["drawing"]["prompt_ids"]
    special = EXPECTED["special_ids"]
    assert (bagel.special.bos, bagel.special.eos, bagel.special.start_of_image, bagel.special.end_of_image) == (
        special["bos_token_id"], special["eos_token_id"], special["start_of_image"], special["end_of_image"])


def test_understanding_matches_the_authors_logits_token_ids_and_text(bagel):
    und = EXPECTED["understanding"]
    logits = []
    text = bagel.describe_one(Image.open(PARITY / "input.png"), und["prompt"], und["max_length"],
                              on_logits=logits.append)
    reference = torch.tensor(und["first_logits"])
    assert torch.allclose(logits[0].float(), reference, atol=LOGITS_ATOL, rtol=0)
    assert [bagel.special.bos] + [int(torch.argmax(step)) for step in logits[:-1]] == und["token_ids"]
    assert text == und["text"] == und["interleave_text"]


@pytest.mark.parametrize("variant", sorted(EXPECTED["drawing"]["variants"]))
def test_drawing_matches_the_authors_latents_and_pixels(bagel, variant):
    spec = EXPECTED["drawing"]["variants"][variant]
    s = spec["settings"]
    flow = FlowSettings(s["cfg_text_scale"], s["cfg_img_scale"], tuple(s["cfg_interval"]), s["timestep_shift"],
                        s["num_timesteps"], s["cfg_renorm_min"], s["cfg_renorm_type"])
    height, width = spec["image_shape"]
    tokens, image = bagel.draw_one(EXPECTED["drawing"]["prompt"], spec["seed"], height, width, flow)
    reference = torch.tensor(spec["latent"]).reshape(spec["latent_shape"])
    assert torch.allclose(tokens, reference, atol=LATENT_ATOL, rtol=0)
    ours = np.asarray(image).astype(int)
    theirs = np.asarray(Image.open(PARITY / spec["pixels"])).astype(int)
    assert ours.shape == theirs.shape == tuple(spec["pixels_shape"])
    assert np.abs(ours - theirs).max() <= PIXEL_ATOL


def test_the_unified_interface_draws_at_the_set_size_and_describes(bagel):
    tiny = BagelUnified.from_parts(bagel.network, bagel.vae, bagel.tokenizer, device="cpu", dtype="float32",
                                   image_size=32, num_timesteps=3)
    images = tiny.generate(["a cat", "a dog"], [1, 2])
    assert [im.size for im in images] == [(32, 32), (32, 32)]
    again = tiny.generate(["a dog"], [2])[0]  # a drawing depends on its prompt and seed only
    assert np.array_equal(np.asarray(again), np.asarray(images[1]))
    texts = tiny.describe([Image.open(PARITY / "input.png")], "Describe this image.", {"max_new_tokens": 4})
    assert len(texts) == 1 and isinstance(texts[0], str)


@pytest.mark.parametrize("case", EXPECTED["resize_sizes"], ids=lambda c: "x".join(map(str, c["input"])))
def test_images_are_resized_as_the_authors_transforms_resize_them(case):
    from lmms_genbench.generators.unified.bagel.checkpoint import AUTHORS
    from lmms_genbench.generators.unified.bagel.vision import resize_for

    vae = resize_for(Image.new("RGB", tuple(case["input"])), *AUTHORS["vae_transform"])
    assert list(vae.size) == case["vae_resized"]
    assert list(resize_for(vae, *AUTHORS["vit_transform"]).size) == case["vit_resized"]
