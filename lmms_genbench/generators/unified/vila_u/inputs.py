"""VILA-U's prompts and image preprocessing, as the authors' inference code builds them.

* Conversation: ``vicuna_v1`` (``vila_u/conversation.py``; ``auto_set_conversation_mode`` picks it
  for ``vila-u-7b-256`` and ``-384``): ``"{system} USER: {text} ASSISTANT:"``, an empty user turn
  written ``"USER:"``; image generation appends ``" <im_start>"`` (``utils/tokenizer.py``).
* Describing puts ``<image>\\n`` before the question (``utils/media.py``) and tokenises the
  pieces around ``<image>`` one by one, BOS first, the image as one marker (``mm_utils.py``,
  ``tokenizer_image_token``).
* Guidance for drawing uses the prompt ``" "`` (stripped to an empty turn) as the
  unconditional one (``generate_image_content``).
* Pixels: ``image_aspect_ratio`` ``resize`` (PIL's default filter) or ``pad`` (square on the
  mean colour), then CLIP's processor at the tower's size (bicubic, mean = std = 0.5).
"""

from __future__ import annotations

import re

import numpy as np
from PIL import Image

SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. "
          "The assistant gives helpful, detailed, and polite answers to the user's questions.")
IMAGE_TOKEN = "<image>"
IMAGE_MARKER = -200  # the authors' IMAGE_TOKEN_INDEX
IMAGE_START = "<im_start>"
MEAN = STD = (0.5, 0.5, 0.5)


def conversation(text: str, image_generation: bool = False) -> str:
    """One user turn and the assistant's cue, in ``vicuna_v1``."""
    text = text.strip()
    prompt = f"{SYSTEM} USER: {text} ASSISTANT:" if text else f"{SYSTEM} USER:ASSISTANT:"
    return prompt + f" {IMAGE_START}" if image_generation else prompt


def describe_prompt(question: str) -> str:
    return conversation(f"{IMAGE_TOKEN}\n{question}")


def token_ids(prompt: str, tokenizer) -> list[int]:
    """``tokenizer_image_token``: BOS, each text piece without its own BOS, ``<image>`` as -200."""
    ids = [tokenizer.bos_token_id]
    for chunk in re.split(f"({IMAGE_TOKEN})", prompt):
        ids.extend([IMAGE_MARKER] if chunk == IMAGE_TOKEN else tokenizer.encode(chunk)[1:])
    return ids


def pixel_array(image: Image.Image, size: int, aspect: str) -> np.ndarray:
    """Normalised pixels (3, size, size), float32, as ``process_image`` with CLIP's processor."""
    image = image.convert("RGB")
    if aspect == "resize":
        image = image.resize((size, size))
    elif aspect == "pad":
        background = tuple(int(m * 255) for m in MEAN)
        side = max(image.size)
        square = Image.new("RGB", (side, side), background)
        square.paste(image, ((side - image.width) // 2, (side - image.height) // 2))
        image = square
    else:
        raise ValueError(f"image_aspect_ratio {aspect!r}: VILA-U knows 'resize' and 'pad'")
    if image.size != (size, size):
        image = image.resize((size, size), Image.Resampling.BICUBIC)
    scaled = (np.asarray(image) * (1 / 255)).astype(np.float32)
    normalised = (scaled - np.array(MEAN, dtype=np.float32)) / np.array(STD, dtype=np.float32)
    return normalised.transpose(2, 0, 1)
