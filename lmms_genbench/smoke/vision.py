"""Tiny random-weight vision networks (ViT, CLIP, OWLv2) for tests and the offline "smoke" preset.

Built from configs, nothing is downloaded. Weights are seeded without touching the
global torch RNG. Their similarities carry no meaning; they only exercise the code paths.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, NamedTuple

from .vocab import byte_level_vocab
from ..core.args import is_whole

__all__ = ["TINY_TOWER", "TinyCLIP", "TinyViT", "seeded", "tiny_clip", "tiny_owlv2", "tiny_vit"]

_TINY_IMAGE_SIZE = 32
#: the vision tower every tiny network here shares (the tiny LLaVA's too): 2 layers of
#: width 32 with 2 heads, over 32 x 32 images in 8 x 8 patches
TINY_TOWER = MappingProxyType({"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                               "image_size": _TINY_IMAGE_SIZE, "patch_size": 8})
_TINY_TEXT_LENGTH = 16


class TinyViT(NamedTuple):
    model: Any  # transformers.ViTModel
    processor: Any  # ViT image processor (PIL backend)


class TinyCLIP(NamedTuple):
    model: Any  # transformers.CLIPModel
    image_processor: Any  # CLIP image processor (PIL backend)
    tokenizer: Any  # CLIPTokenizer over a byte-level vocabulary without merges


def _check_seed(seed: Any) -> int:
    if not is_whole(seed):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    return seed


def seeded(seed: int, build: Any) -> Any:
    """``build()`` with torch's CPU RNG seeded to ``seed``: the same weights for the same seed."""
    import torch

    # fork_rng restores the global CPU RNG afterwards, so callers' randomness is untouched
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def _pil_processor_class(name: str) -> Any:
    """``<name>Pil`` on transformers >= 5, ``<name>`` (already PIL-based) before."""
    import transformers

    return getattr(transformers, name + "Pil", None) or getattr(transformers, name)


def tiny_vit(seed: int = 0) -> TinyViT:
    """A 2-layer, 32-wide ViT over 32 x 32 images (patch 8) and its image processor."""
    from transformers import ViTConfig, ViTModel

    seed = _check_seed(seed)
    config = ViTConfig(**TINY_TOWER, intermediate_size=37)
    model = seeded(seed, lambda: ViTModel(config)).eval()
    processor = _pil_processor_class("ViTImageProcessor")(
        size={"height": _TINY_IMAGE_SIZE, "width": _TINY_IMAGE_SIZE}
    )
    return TinyViT(model, processor)


def _byte_tokenizer(name: str) -> Any:
    """A CLIPTokenizer with one token per byte (no merges) and 16 positions."""
    from transformers import CLIPTokenizer

    try:
        return CLIPTokenizer(vocab=byte_level_vocab(), merges=[], model_max_length=_TINY_TEXT_LENGTH)
    except TypeError as exc:  # transformers < 5 only builds CLIP tokenizers from files
        raise RuntimeError(f"{name} needs transformers >= 5 (in-memory CLIP tokenizer)") from exc


def tiny_clip(seed: int = 0) -> TinyCLIP:
    """A 2-layer CLIP (text width 32, 16 positions; vision 32 x 32 images, patch 8; projection 16).

    The tokenizer has one token per byte (no merges), so a text of k characters
    takes about k tokens; texts over 14 characters exceed the 16-token context.
    """
    from transformers import CLIPConfig, CLIPModel

    seed = _check_seed(seed)
    tokenizer = _byte_tokenizer("tiny_clip")
    config = CLIPConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "max_position_embeddings": _TINY_TEXT_LENGTH,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id,
            "projection_dim": 16,
        },
        vision_config={**TINY_TOWER, "intermediate_size": 37, "projection_dim": 16},
        projection_dim=16,
    )
    model = seeded(seed, lambda: CLIPModel(config)).eval()
    image_processor = _pil_processor_class("CLIPImageProcessor")(
        size={"shortest_edge": _TINY_IMAGE_SIZE},
        crop_size={"height": _TINY_IMAGE_SIZE, "width": _TINY_IMAGE_SIZE},
    )
    return TinyCLIP(model, image_processor, tokenizer)


def tiny_owlv2(seed: int = 0) -> tuple[Any, Any]:
    """A 2-layer random-weight OWLv2 (32 x 32 images, patch 8: 16 boxes) and its processor.

    Its boxes mean nothing; it exercises GenEval's detector code paths.
    """
    from transformers import Owlv2Config, Owlv2ForObjectDetection, Owlv2Processor

    seed = _check_seed(seed)
    tokenizer = _byte_tokenizer("tiny_owlv2")
    layers = {"intermediate_size": 37, "num_hidden_layers": 2, "num_attention_heads": 2}
    config = Owlv2Config(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "max_position_embeddings": _TINY_TEXT_LENGTH,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id,
            **layers,
        },
        vision_config={**TINY_TOWER, **layers},
        projection_dim=32,  # OWLv2's class head needs projection_dim == text hidden size
    )
    model = seeded(seed, lambda: Owlv2ForObjectDetection(config)).eval()
    image_processor = _pil_processor_class("Owlv2ImageProcessor")(
        size={"height": _TINY_IMAGE_SIZE, "width": _TINY_IMAGE_SIZE}
    )
    return model, Owlv2Processor(image_processor=image_processor, tokenizer=tokenizer)
