"""``unified=blip3o`` in batches (``batch_size`` > 1): every text and image equals the one its item
gets alone, on the tiny parity checkpoint (tests/support/data/parity/blip3o/). The language
model's conditioning, the DiT's flow sampler and the diffusion decoder each run once per chunk."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lmms_genbench.core.failures import GenerationFailure
from lmms_genbench.generators.unified import build_unified
from tests.support.threads import single_thread

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

DATA = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "blip3o"
#: four prompts of different token lengths (the language model's rows are padded to the longest)
PROMPTS = ["a red bus", "two green apples on a wooden table by an open window at dawn", "sky", "a cat on a mat"]
SEEDS = [11, 3, 42, 7]
#: float32 throughout, but a batch's matrix products have more rows, which the CPU's BLAS sums in
#: another order (a 2-row and an 8-row product of the same rows differ in the last bits: the DiT's
#: timestep embedding first): features (magnitudes ~40) agree within 1e-5 of their largest magnitude
FEATURE_RTOL = 1e-5


def _close(actual, expected):
    scale = float(expected.abs().max())
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), atol=FEATURE_RTOL * scale, rtol=0)


@pytest.fixture(scope="module")
def blip3o():
    with single_thread():
        # 3 steps each at 32 px: the batch logic is the same at the authors' 30 and 50
        yield build_unified("blip3o", pretrained=str(DATA / "BLIP3o-Model-4B"),
                            processor=str(DATA / "Qwen2.5-VL-7B-Instruct"), device="cpu", dtype="float32",
                            image_size=32, dit_steps=3, decoder_steps=3, batch_size=4, max_new_tokens=12)


def _draw(model, monkeypatch, batch_size, prompts=PROMPTS, seeds=SEEDS):
    """Images and the features the decoder saw (cond, null), one row per prompt, at ``batch_size``."""
    seen = []
    decode = model.decode_features

    def spy(cond, null, generator):
        seen.append((cond.clone(), None if null is None else null.clone()))
        return decode(cond, null, generator)

    monkeypatch.setattr(model, "decode_features", spy)
    monkeypatch.setattr(model, "batch_size", batch_size)
    with single_thread():
        images = model.generate(prompts, seeds)
    monkeypatch.undo()
    cond = torch.cat([c for c, _ in seen])
    null = None if seen[0][1] is None else torch.cat([n for _, n in seen])
    return images, cond, null, len(seen)


@pytest.mark.parametrize("guidance", [3.0, 1.0])
def test_a_batch_of_prompts_draws_each_image_as_drawn_alone(blip3o, monkeypatch, guidance):
    monkeypatch.setattr(blip3o, "decoder_guidance", guidance)
    alone, cond_alone, null_alone, calls_alone = _draw(blip3o, monkeypatch, 1)
    monkeypatch.setattr(blip3o, "decoder_guidance", guidance)
    together, cond, null, calls = _draw(blip3o, monkeypatch, 4)
    assert (calls_alone, calls) == (4, 1)  # one decoder loop for the whole batch
    _close(cond, cond_alone)
    if guidance > 1:  # " " encoded for each prompt, its DiT noise from that prompt's generator
        _close(null, null_alone)
        assert not torch.allclose(null[0], null[1])
    else:  # at or below 1 there is no unconditional branch, batched or not
        assert null is None and null_alone is None
    for a, b in zip(alone, together, strict=True):
        assert a.size == b.size == (32, 32)
        assert np.abs(np.asarray(a).astype(int) - np.asarray(b).astype(int)).max() <= 1


def test_the_language_models_rows_equal_their_single_rows(blip3o):
    from lmms_genbench.generators.unified.blip3o.model import (
        DRAW_INSTRUCTION,
        NEGATIVE_PROMPT,
        QWEN_CONVERSATION,
    )

    texts = [QWEN_CONVERSATION.format(DRAW_INSTRUCTION.format(p)) for p in PROMPTS] + [NEGATIVE_PROMPT]
    with single_thread(), torch.inference_mode():
        together = blip3o.query_states(texts)
        alone = torch.cat([blip3o.query_states([t]) for t in texts])
    assert together.shape == (5, blip3o.n_query, blip3o.queries.shape[-1])
    _close(together, alone)


def test_a_batch_of_images_of_different_sizes_is_described_as_each_alone(blip3o, monkeypatch):
    image = Image.open(DATA / "input.png")
    images = [image, image.resize((140, 60)), image.convert("L").resize((40, 90))]
    rows = []
    decode = blip3o.decode_texts

    def spy(new):
        rows.extend(new.tolist())
        return decode(new)

    monkeypatch.setattr(blip3o, "decode_texts", spy)
    kwargs = {"max_new_tokens": 12, "temperature": 0}
    with single_thread():
        together = blip3o.describe(images, "Describe this image.", kwargs)
        batch_rows, rows[:] = list(rows), []
        alone = [blip3o.describe([i], "Describe this image.", kwargs)[0] for i in images]
    assert together == alone and all(isinstance(t, str) for t in together)
    pad = blip3o.tokenizer.pad_token_id
    # greedy ids token for token; a row that ends early in the batch is padded after its end
    for a, b in zip(rows, batch_rows, strict=True):
        assert b[:len(a)] == a and all(t == pad for t in b[len(a):])


def test_a_failing_prompt_fails_alone_and_its_neighbours_keep_their_images(blip3o, monkeypatch):
    alone, _, _, _ = _draw(blip3o, monkeypatch, 1, PROMPTS[:2], SEEDS[:2])
    query_states = blip3o.query_states

    def fails_on_bad(texts):
        if any("BAD" in t for t in texts):
            raise RuntimeError("bad prompt")
        return query_states(texts)

    monkeypatch.setattr(blip3o, "query_states", fails_on_bad)
    with single_thread():
        out = blip3o.generate([PROMPTS[0], "BAD", PROMPTS[1]], [SEEDS[0], 5, SEEDS[1]])
    assert isinstance(out[1], GenerationFailure) and "bad prompt" in out[1].reason
    for a, b in zip(alone, [out[0], out[2]], strict=True):
        assert np.abs(np.asarray(a).astype(int) - np.asarray(b).astype(int)).max() <= 1
