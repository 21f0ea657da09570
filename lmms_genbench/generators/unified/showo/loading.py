"""Reading Show-o's three repositories as published, from the Hub or from local folders.

A hub id is fetched file by file through ``huggingface_hub`` (so ``HF_ENDPOINT``, ``HF_TOKEN`` and
the cache count as for any download); a folder is read in place. Weights are the authors'
``pytorch_model.safetensors`` (their ``ModelMixin.save_pretrained`` name) under their own keys:
``showo.<Phi-1.5 key>`` for the transformer, which transformers' ``PhiForCausalLM`` names the same.

Requires ``torch``, ``transformers`` and ``safetensors``; imported when a model is built.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from ..common import CheckpointError
from .magvit import WEIGHTS_FILE
from .omni import ShowoVocab


def fetch(repo: str, filename: str) -> Path:
    """``filename`` of folder or hub id ``repo``."""
    if os.path.isdir(repo):
        path = Path(repo) / filename
        if not path.is_file():
            raise CheckpointError(f"{repo} has no {filename}")
        return path
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(repo, filename))


def read_json(repo: str, filename: str) -> dict[str, Any]:
    path = fetch(repo, filename)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CheckpointError(f"{path} is not JSON: {exc}") from None


def read_state(repo: str, dtype: torch.dtype, prefix: str = "", device: str | torch.device = "cpu") -> dict:
    """The tensors of ``repo``'s weights file whose keys start with ``prefix`` (stripped),
    floating ones cast to ``dtype`` one at a time (a 1.3B float32 file is never held twice)."""
    from safetensors import safe_open

    state = {}
    path = fetch(repo, WEIGHTS_FILE)
    with safe_open(str(path), framework="pt", device="cpu") as f:
        for key in f.keys():
            if key.startswith(prefix):
                tensor = f.get_tensor(key)
                state[key[len(prefix):]] = (tensor.to(dtype) if tensor.is_floating_point() else tensor).to(device)
    if not state:
        raise CheckpointError(f"{path} has no {prefix or 'tensor'}* weights")
    return state


def load_vocab(tokenizer: str, llm_vocab_size: int, codebook_size: int, exact: bool = True) -> ShowoVocab:
    """Phi-1.5's tokenizer with Show-o's ten tokens added (left padding, as the authors')."""
    from transformers import AutoTokenizer

    return ShowoVocab(AutoTokenizer.from_pretrained(tokenizer, padding_side="left"), llm_vocab_size, codebook_size,
                      exact)


def build_language_model(tokenizer: str, pretrained: str, vocab_size: int, device: torch.device, dtype: str):
    """transformers' ``PhiForCausalLM`` at Phi-1.5's geometry (the ``config.json`` beside its
    tokenizer, as the authors' ``AutoConfig.from_pretrained(llm_model_path)``), its vocabulary
    resized to Show-o's, holding the ``showo.`` weights of ``pretrained``.

    Show-o's ``phi.py`` is transformers' Phi of 2024 with two changes: the 2D-to-4D mask step is
    removed, so the omni-attention mask reaches every layer as it is (transformers' Phi takes a
    4D mask as it is too), and ``PhiForCausalLM`` turns ``qk_layernorm`` on whatever the config
    says (a LayerNorm over each head's queries and keys, which transformers' Phi has as an option)."""
    from transformers import AutoConfig, PhiForCausalLM

    config = AutoConfig.from_pretrained(tokenizer)
    if config.model_type != "phi":
        raise ValueError(f"{tokenizer}'s config.json is a {config.model_type!r} model, not Phi")
    config.vocab_size = vocab_size
    config.qk_layernorm = True  # forced by Show-o's PhiForCausalLM.__init__
    with torch.device("meta"):
        model = PhiForCausalLM(config)
    state = read_state(pretrained, getattr(torch, dtype), prefix="showo.", device=device)
    wanted = model.state_dict()
    missing = sorted(set(wanted) - set(state))
    wrong = sorted(k for k in set(wanted) & set(state) if tuple(wanted[k].shape) != tuple(state[k].shape))
    if missing or wrong:
        key = (missing or wrong)[0]
        raise CheckpointError(
            f"{pretrained}/{WEIGHTS_FILE}: showo.{key} "
            + (f"is missing ({len(missing)} keys missing)" if missing else
               f"has shape {tuple(state[key].shape)}, the config's Phi {tuple(wanted[key].shape)}")
            + f" (Phi geometry from {tokenizer}/config.json)")
    model.load_state_dict(state, strict=True, assign=True)
    # the rotary tables are not in the state dict: built again on the device, in float32
    with torch.device(device):
        model.model.rotary_emb = type(model.model.rotary_emb)(config=model.config)
    return model.eval()


def image_tensor(image: Image.Image, resolution: int) -> torch.Tensor:
    """(3, resolution, resolution) in [-1, 1]: the authors' ``image_transform`` (torchvision's
    Resize of the shorter side, bicubic on the PIL image; CenterCrop; ToTensor; Normalize 0.5)."""
    image = image.convert("RGB")
    w, h = image.size
    size = (resolution, int(resolution * h / w)) if w <= h else (int(resolution * w / h), resolution)
    image = image.resize(size, Image.BICUBIC)
    w, h = image.size
    top, left = int(round((h - resolution) / 2.0)), int(round((w - resolution) / 2.0))
    image = image.crop((left, top, left + resolution, top + resolution))
    pixels = torch.from_numpy(np.asarray(image, dtype=np.uint8).copy()).permute(2, 0, 1).float() / 255.0
    return (pixels - 0.5) / 0.5
