"""A DeepSeek-format Janus folder's prompts, pixels and understanding logits against what
DeepSeek's own code recorded on it (an ``expected.json`` under tests/support/data/parity/):
shared by the Janus 1.3B and Janus-Pro parity tests, which differ in their records only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image


def assert_prompts_and_pixels(model: Any, expected: dict[str, Any], image: Path) -> None:
    """The understanding and generation prompt ids, and the processor's pixels of ``image``."""
    chat = model._chat
    assert chat.understanding_ids(expected["question"]) == expected["understanding_input_ids"]
    assert chat.generation_ids(expected["generation_prompt"]) == expected["generation_input_ids"]
    pixels = chat.pixels(Image.open(image))
    assert pixels.astype(np.float64).sum() == pytest.approx(expected["pixel_values_sum"], abs=1e-5)
    np.testing.assert_allclose(pixels[:, 10, :8].reshape(-1), expected["pixel_values_slice"], atol=1e-6)


def assert_understanding_logits(model: Any, expected: dict[str, Any], image: Path, image_row: int,
                                atol: float) -> None:
    """The last position's logits and the first 16 of the first image token's (``image_row``)
    for the recorded understanding prompt and ``image``, within ``atol``."""
    import torch

    ids = torch.tensor([expected["understanding_input_ids"]])
    pixels = torch.from_numpy(model._chat.pixels(Image.open(image)))[None]
    with torch.inference_mode():
        logits = model.model(input_ids=ids, pixel_values=pixels, attention_mask=torch.ones_like(ids)).logits[0]
    np.testing.assert_allclose(logits[-1].numpy(), expected["understanding_logits_last"], atol=atol, rtol=0)
    np.testing.assert_allclose(logits[image_row, :16].numpy(), expected["understanding_logits_first_image_row_slice"],
                               atol=atol, rtol=0)
