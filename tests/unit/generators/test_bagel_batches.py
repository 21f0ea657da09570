"""unified=bagel in batches: every description and drawing of a batch equals the one it gets alone
(the tiny random BAGEL of tests/support/data/parity/bagel, float32 on the CPU).

A batch runs the same arithmetic in other shapes (packed rows, padded and masked attention), so
floats get allowances: latents within 1e-5, logits within 1e-5, pixels within one level; token ids
are exact.
"""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")

from lmms_genbench.core.failures import GenerationFailure
from lmms_genbench.generators.unified import build_unified
from lmms_genbench.generators.unified.bagel import BagelUnified
from lmms_genbench.generators.unified.bagel.network import Batch, Context, FlowSettings

PARITY = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "bagel"
LATENT_ATOL = 1e-5
LOGITS_ATOL = 1e-5
PIXEL_ATOL = 1

PROMPTS = ["a cat", "a red dog asleep on a long green sofa", "two birds", "a small house by the sea at night"]
SEEDS = [3, 1, 4, 1]  # a repeated seed: each prompt's noise is its own generator's
SIZES = [(64, 64), (96, 64), (32, 48), (64, 32)]
# the recorded variants' settings (expected.json): global renorm with guidance in an interval,
# channel and text_channel with image guidance over every step
FLOWS = {
    "global": FlowSettings(4.0, 1.0, (0.4, 1.0), 3.0, 4, 0.0, "global"),
    "channel": FlowSettings(3.0, 1.5, (0.0, 1.0), 2.0, 4, 0.0, "channel"),
    "text_channel": FlowSettings(4.0, 2.0, (0.0, 1.0), 3.0, 4, 0.0, "text_channel"),
}


@pytest.fixture(scope="module")
def bagel():
    return build_unified("bagel", pretrained=str(PARITY / "BAGEL-7B-MoT-tiny"), device="cpu", dtype="float32")


def _images():
    image = Image.open(PARITY / "input.png")
    return [image, image.resize((50, 90)), image.transpose(Image.FLIP_LEFT_RIGHT).resize((120, 70))]


@pytest.mark.parametrize("renorm", sorted(FLOWS))
def test_a_batch_of_prompts_of_different_lengths_and_sizes_draws_what_each_draws_alone(bagel, renorm):
    flow = FLOWS[renorm]
    batch = bagel.draw_many(PROMPTS, SEEDS, SIZES, flow)
    for (tokens, image), prompt, seed, (h, w) in zip(batch, PROMPTS, SEEDS, SIZES):
        alone_tokens, alone_image = bagel.draw_one(prompt, seed, h, w, flow)
        assert tokens.shape == alone_tokens.shape
        assert torch.allclose(tokens, alone_tokens, atol=LATENT_ATOL, rtol=0), (prompt, renorm)
        ours, theirs = np.asarray(image).astype(int), np.asarray(alone_image).astype(int)
        assert ours.shape == theirs.shape == (h, w, 3)
        assert np.abs(ours - theirs).max() <= PIXEL_ATOL


def test_the_network_draws_a_batch_against_an_image_guidance_context_of_its_own(bagel):
    """image guidance against a context other than the prompt's (the network's API; text-to-image
    uses the prompt's own), guided only inside the interval"""
    net, special = bagel.network, bagel.special
    flow = FlowSettings(3.0, 2.0, (0.3, 0.9), 3.0, 5, 0.2, "global")
    ids = [bagel.tokenizer.encode(p) for p in PROMPTS[:3]]
    sizes = [(32, 32), (64, 48), (48, 32)]
    noises = [torch.randn(h * w // 256, 64, generator=torch.Generator().manual_seed(i)) for i, (h, w) in enumerate(sizes)]
    with torch.inference_mode():
        cond = net.add_texts(Batch.empty(3), ids, special)
        image = net.add_texts(Batch.empty(3), [i[:1] for i in ids], special)
        together = net.draw_many({"cond": cond, "text": Batch.empty(3), "image": image}, sizes, noises, flow, special)
        for r, (h, w) in enumerate(sizes):
            contexts = {"cond": net.add_text(Context(), ids[r], special), "text": Context(),
                        "image": net.add_text(Context(), ids[r][:1], special)}
            alone = net.draw(contexts, h, w, noises[r], flow, special)
            assert torch.allclose(together[r], alone, atol=LATENT_ATOL, rtol=0)


def test_the_unified_interface_draws_in_batches_as_one_by_one(bagel):
    four = BagelUnified.from_parts(bagel.network, bagel.vae, bagel.tokenizer, device="cpu", dtype="float32",
                                   image_size=32, num_timesteps=3, batch_size=4)
    one = BagelUnified.from_parts(bagel.network, bagel.vae, bagel.tokenizer, device="cpu", dtype="float32",
                                  image_size=32, num_timesteps=3, batch_size=1)
    together, alone = four.generate(PROMPTS, SEEDS), one.generate(PROMPTS, SEEDS)
    for a, b in zip(together, alone):
        assert np.abs(np.asarray(a).astype(int) - np.asarray(b).astype(int)).max() <= PIXEL_ATOL


def test_a_batch_of_images_of_different_sizes_is_described_as_each_alone(bagel):
    images = _images()
    seen: dict[int, list] = {}
    texts = bagel.describe_many(images, "Describe this image.", 12,
                                on_logits=lambda i, logits: seen.setdefault(i, []).append(logits.clone()))
    for i, image in enumerate(images):
        alone: list = []
        assert bagel.describe_one(image, "Describe this image.", 12, on_logits=alone.append) == texts[i]
        batch_logits = seen[i]
        assert len(batch_logits) == len(alone)  # the same steps: a row leaves the batch where it stops alone
        assert torch.allclose(batch_logits[0], alone[0], atol=LOGITS_ATOL, rtol=0)
        assert [int(x.argmax()) for x in batch_logits] == [int(x.argmax()) for x in alone]


def test_rows_with_different_lengths_stop_on_their_own(bagel):
    net, special = bagel.network, bagel.special
    ids = [bagel.tokenizer.encode(p) for p in PROMPTS[:3]]
    greedy = lambda logits: logits.argmax(dim=-1).tolist()
    with torch.inference_mode():
        batch = net.add_texts(Batch.empty(3), ids, special)
        together = net.generate_texts(batch, special, [1, 6, 3], greedy)
        for r, n in enumerate([1, 6, 3]):
            alone = net.generate_text(net.add_text(Context(), ids[r], special), special, n, lambda x: int(x.argmax()))
            assert together[r] == alone and len(alone) <= n - 1


def test_the_unified_interface_describes_in_batches_as_one_by_one_with_its_stop_strings(bagel):
    four = BagelUnified.from_parts(bagel.network, bagel.vae, bagel.tokenizer, device="cpu", dtype="float32",
                                   batch_size=3)
    one = BagelUnified.from_parts(bagel.network, bagel.vae, bagel.tokenizer, device="cpu", dtype="float32")
    kwargs = {"max_new_tokens": 10, "until": ["\n\n"]}
    assert four.describe(_images(), "What is it?", kwargs) == one.describe(_images(), "What is it?", kwargs)


def test_one_bad_item_in_a_batch_fails_alone(bagel):
    four = BagelUnified.from_parts(bagel.network, bagel.vae, bagel.tokenizer, device="cpu", dtype="float32",
                                   image_size=32, num_timesteps=3, batch_size=3)
    images = _images()
    images[1] = Image.new("RGB", (0, 0))  # nothing to resize
    out = four.describe(images, "Describe this image.", {"max_new_tokens": 5})
    assert isinstance(out[1], GenerationFailure) and "bagel describe raised" in out[1].reason
    assert out[0] == four.describe(images[:1], "Describe this image.", {"max_new_tokens": 5})[0]
    assert isinstance(out[2], str)
    drawn = four.generate(["a cat", None, "a dog"], [1, 2, 3])  # type: ignore[list-item]
    assert isinstance(drawn[1], GenerationFailure) and not isinstance(drawn[0], GenerationFailure)
    assert np.array_equal(np.asarray(drawn[2]), np.asarray(four.generate(["a dog"], [3])[0]))
