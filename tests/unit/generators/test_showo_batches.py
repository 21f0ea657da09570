"""``unified=showo`` drawing in batches on the tiny parity checkpoint (tests/support/data/parity/showo/):
each prompt's codes are the ones it gets alone, and the MaskGIT steps, which run the image part
over the text part's keys and values computed once, see the logits of a whole-row forward (the
authors' ``t2i_generate``)."""

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from lmms_genbench.generators.unified import build_unified
from tests.support.threads import single_thread

ROOT = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "showo"
PROMPTS = ["a red bus", "two green apples on a wooden table by an open window at dawn", "sky", "a cat on a mat"]
SEEDS = [11, 3, 42, 7]
#: float32: the image part's forward over cached keys and values against the whole row's
LOGITS_ATOL = 1e-5


@pytest.fixture(scope="module")
def showo():
    with single_thread():
        yield build_unified("showo", pretrained=str(ROOT / "show-o-512x512"), vq_model=str(ROOT / "magvitv2"),
                            tokenizer=str(ROOT / "phi-1_5"), device="cpu", dtype="float32", generation_timesteps=4)


def test_a_batch_of_prompts_draws_each_prompts_codes_as_alone(showo):
    with single_thread():
        together = showo.draw_codes(PROMPTS, SEEDS)
        alone = torch.cat([showo.draw_codes([p], [s]) for p, s in zip(PROMPTS, SEEDS, strict=True)])
        images = showo.generate(PROMPTS, SEEDS)
    assert torch.equal(together, alone)
    expected = showo.to_images(showo.decode_pixels(alone))
    for a, b in zip(images, expected, strict=True):
        assert np.abs(np.asarray(a, dtype=int) - np.asarray(b, dtype=int)).max() <= 1


def test_each_step_sees_the_logits_of_the_whole_row(showo, monkeypatch):
    from lmms_genbench.generators.unified.showo.omni import t2i_mask

    calls = []
    forward = showo.lm.forward

    def spy(*args, **kwargs):
        out = forward(*args, **kwargs)
        calls.append((kwargs["input_ids"].clone(), out.logits.clone()))
        return out

    monkeypatch.setattr(showo.lm, "forward", spy)
    with single_thread():
        showo.draw_codes(PROMPTS[:2], SEEDS[:2])
    monkeypatch.undo()
    (text, _), (image, step_logits) = calls[:2]  # the text part once, then the first step
    assert len(calls) == 1 + showo.steps and image.shape[1] == showo.num_codes + 2  # <|soi|> codes <|eoi|>
    rows = torch.cat([text, image], dim=1)
    with single_thread(), torch.inference_mode():
        whole = showo.lm(input_ids=rows, attention_mask=t2i_mask(rows, showo.vocab, torch.float32),
                         logits_to_keep=showo.num_codes + 1).logits
    np.testing.assert_allclose(step_logits.numpy(), whole.numpy(), atol=LOGITS_ATOL, rtol=0)
