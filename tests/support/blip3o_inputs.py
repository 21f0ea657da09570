"""The tiny BLIP3-o parity checkpoint's understanding inputs (tests/support/data/parity/blip3o/):
its input.png and prompt through a loaded model's processor, as gradio/app.py prepares them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "parity" / "blip3o"
PROMPT = "Describe this image in one sentence."  # the recorded describe prompt (expected.json)


def describe_inputs(model: Any) -> Any:
    """The processor's tensors for input.png and :data:`PROMPT`, pixel values in the language model's dtype."""
    from PIL import Image

    from lmms_genbench.generators.unified.blip3o.model import qwen_resize

    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": PROMPT}]}]
    text = model.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = model.processor(text=[text], images=[qwen_resize(Image.open(DATA / "input.png"))], return_tensors="pt")
    inputs["pixel_values"] = inputs["pixel_values"].to(model.lm.dtype)
    return inputs
