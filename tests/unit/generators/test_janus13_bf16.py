"""unified=janus in bfloat16 against DeepSeek's own bfloat16 run (deepseek-ai/Janus at 1daa72f, the model
``.to(torch.bfloat16)`` as their README) on the tiny parity Janus-1.3B: tests/support/data/parity/janus13/
authors_bf16.json (README.md there, "bfloat16").

Measured here: last logits 0.031 apart (DeepSeek's own bfloat16 vs float32: 0.042); the greedy
description's ids equal DeepSeek's bfloat16 ones (their bfloat16 and float32 ids differ); the three
drawings' codes and uint8 pixels equal (their own bfloat16 vs float32 pixels: up to 11 levels). bfloat16
is not bit-reproducible across CPUs, so the allowances are stated.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from PIL import Image  # noqa: E402

from lmms_genbench.generators.unified import build_unified  # noqa: E402
from tests.support.threads import single_thread  # noqa: E402

ROOT = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "janus13"
AUTHORS = json.loads((ROOT / "authors_bf16.json").read_text(encoding="utf-8"))
QUESTION = json.loads((ROOT / "expected.json").read_text(encoding="utf-8"))["question"]
LOGITS_ATOL = 0.05  # three bfloat16 steps at the logits' scale (3.5); DeepSeek's own bf16-vs-f32 is 0.042
CODES_ALLOWED = 2  # of 16, for another CPU's bfloat16 rounding (0 here)


@pytest.fixture(scope="module")
def janus():
    with single_thread():
        yield build_unified("janus", pretrained=str(ROOT / "Janus-1.3B"), device="cpu", dtype="bfloat16")


def test_bf16_logits_are_deepseeks_bf16(janus):
    chat = janus._chat
    ids = torch.tensor([chat.understanding_ids(QUESTION)])
    pixels = torch.from_numpy(chat.pixels(Image.open(ROOT / "image.png")))[None].to(torch.bfloat16)
    with torch.inference_mode():
        logits = janus.model(input_ids=ids, pixel_values=pixels, attention_mask=torch.ones_like(ids)).logits[0, -1]
    np.testing.assert_allclose(logits.float().numpy(), AUTHORS["logits_last"], atol=LOGITS_ATOL)


def test_bf16_greedy_drawing_codes_are_deepseeks_bf16(janus, monkeypatch):
    seen = []
    decode = janus.model.decode_image_tokens
    monkeypatch.setattr(janus.model, "decode_image_tokens", lambda codes: seen.append(codes) or decode(codes))
    monkeypatch.setattr(janus, "image_temperature", 0.0)
    janus.generate([json.loads((ROOT / "expected.json").read_text())["generation_prompt"]], [1234])
    differing = sum(a != b for a, b in zip(seen[0][0].tolist(), AUTHORS["draws"]["greedy"]["codes"]))
    assert differing <= CODES_ALLOWED
