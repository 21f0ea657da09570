"""A tiny random-weight Stable Diffusion pipeline for smoke tests.

Built entirely from configs, like ``get_dummy_components`` in diffusers' own
tests: no download, about 160k parameters, a batch of 8 at 64x64 in a
fraction of a second on a CPU. The pictures are noise-like but deterministic,
which is all a pipeline test needs: same prompt and seed give the same image,
a different seed gives a different one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from ..core.deps import require
from ..core.args import ArgumentError, as_float, as_int, as_str
from .base import GenerationResult
from .common import check_device
from .diffusers_backend import DiffusersGenerator

# UNet and VAE widths: small enough for a CPU batch in a fraction of a second.
_CHANNELS = (8, 16)
_GROUPS = 4  # GroupNorm groups; must divide every width
# Width of the text encoder's embeddings, and so of the UNet's cross-attention.
_HIDDEN = 32
# The text encoder's position table; the tokenizer pads and truncates to it.
# Far above CLIP's 77: the tiny vocabulary is nearly byte-level, so 77 tokens
# would hold little more than GenCeption's fixed prompt prefix and every
# drawing would ignore its description.
_MAX_TOKENS = 512
_VOCAB_SIZE = 1000  # room for the 514 base tokens plus the merges below
_BOS, _EOS = "<|startoftext|>", "<|endoftext|>"

# A handful of BPE merges so common words become single tokens, as in CLIP.
# Each merge only uses tokens that exist by the time it applies.
_MERGES = (
    ("t", "h"),
    ("th", "e</w>"),
    ("a", "n"),
    ("an", "d</w>"),
    ("o", "f</w>"),
    ("i", "n"),
    ("in", "g</w>"),
    ("e", "r</w>"),
    ("o", "n</w>"),
    ("r", "e"),
    ("e", "d</w>"),
    ("p", "h"),
    ("ph", "o"),
    ("pho", "t"),
    ("phot", "o</w>"),
    ("c", "a"),
    ("ca", "t</w>"),
    ("d", "o"),
    ("do", "g</w>"),
    ("re", "d</w>"),
    ("b", "l"),
    ("bl", "u"),
    ("blu", "e</w>"),
    ("o", "n"),
    ("a", "r"),
)


class SmokeGenerator:
    """A deterministic tiny Stable Diffusion pipeline with random weights.

    Args:
        seed: Seeds the weights; the same seed always builds the same network.
        size: Width and height of the images in pixels (multiple of 8).
        steps: Denoising steps.
        guidance: Classifier-free guidance scale; 1.0 or less skips the
            unconditional pass, halving the work.
        batch_size: Prompts per pipeline call.
        device: torch device; ``cpu`` by default since the network is tiny.
    """

    def __init__(
        self,
        seed: int = 0,
        size: int = 64,
        steps: int = 2,
        guidance: float = 1.0,
        batch_size: int = 8,
        device: str = "cpu",
    ) -> None:
        self.seed = int(as_int("seed", seed, minimum=0))  # type: ignore[arg-type]
        self.size = int(as_int("size", size, minimum=8))  # type: ignore[arg-type]
        if self.size % 8:
            raise ArgumentError(f"size: expected a multiple of 8; got {size!r}")
        self.steps = int(as_int("steps", steps, minimum=1))  # type: ignore[arg-type]
        self.guidance = float(as_float("guidance", guidance, minimum=0.0))  # type: ignore[arg-type]
        self.batch_size = int(as_int("batch_size", batch_size, minimum=1))  # type: ignore[arg-type]
        self.device = str(as_str("device", device))

        # Fail on a missing accelerator before building anything.
        check_device(require("torch", "the smoke generator"), self.device)
        pipeline = build_tiny_pipeline(self.seed).to(self.device)
        # DiffusersGenerator owns the batching, seeding and failure handling.
        self._inner = DiffusersGenerator(
            pretrained=f"smoke-seed{self.seed}",
            pipeline=pipeline,
            dtype="float32",
            device=self.device,
            steps=self.steps,
            guidance=self.guidance,
            width=self.size,
            height=self.size,
            batch_size=self.batch_size,
        )
        device_type = self.device.split(":")[0]
        self.name = (
            f"smoke-s{self.seed}-{self.size}px-{self.steps}st-"
            f"g{self.guidance:g}-t{_MAX_TOKENS}-{device_type}"
        )

    def __repr__(self) -> str:
        return f"SmokeGenerator(name={self.name!r})"

    def generate(
        self, prompts: Sequence[str], seeds: Sequence[int]
    ) -> list[GenerationResult]:
        """One image per prompt; see :meth:`DiffusersGenerator.generate`."""
        return self._inner.generate(prompts, seeds)


def build_tiny_pipeline(seed: int = 0) -> Any:
    """A CPU ``StableDiffusionPipeline`` with tiny random weights from ``seed``.

    The global torch RNG is seeded before each component, as diffusers' tests
    do, so a component's weights do not depend on the others' sizes; the
    caller's RNG state is restored afterwards.
    """
    torch = require("torch", "the smoke generator")
    diffusers = require("diffusers", "the smoke generator")
    transformers = require("transformers", "the smoke generator")

    tokenizer = build_tiny_tokenizer()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        unet = diffusers.UNet2DConditionModel(
            block_out_channels=_CHANNELS,
            layers_per_block=1,
            sample_size=32,
            in_channels=4,
            out_channels=4,
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
            cross_attention_dim=_HIDDEN,
            norm_num_groups=_GROUPS,
        )
        torch.manual_seed(seed)
        vae = diffusers.AutoencoderKL(
            block_out_channels=list(_CHANNELS),
            in_channels=3,
            out_channels=3,
            down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
            up_block_types=["UpDecoderBlock2D", "UpDecoderBlock2D"],
            latent_channels=4,
            norm_num_groups=_GROUPS,
        )
        torch.manual_seed(seed)
        text_encoder = transformers.CLIPTextModel(
            transformers.CLIPTextConfig(
                bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
                hidden_size=_HIDDEN,
                intermediate_size=37,
                layer_norm_eps=1e-05,
                num_attention_heads=4,
                num_hidden_layers=2,
                max_position_embeddings=_MAX_TOKENS,
                vocab_size=_VOCAB_SIZE,
            )
        )
    scheduler = diffusers.DDIMScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,  # the value the pipeline expects; 0 triggers a warning
    )
    pipeline = diffusers.StableDiffusionPipeline(
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        unet=unet.eval(),
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    return pipeline


def build_tiny_tokenizer() -> Any:
    """A byte-level BPE ``CLIPTokenizer`` built from in-code vocab and merges.

    No tokenizer can be downloaded, so its files are written to a temporary
    folder and loaded from there (a path, so no hub lookup), then deleted.
    """
    transformers = require("transformers", "the smoke generator")
    vocab = _tiny_vocab()
    with tempfile.TemporaryDirectory(prefix="lmms_genbench_tok_") as folder:
        with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as fh:
            json.dump(vocab, fh, ensure_ascii=False)
        with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as fh:
            fh.write("#version: 0.2\n")
            fh.writelines(f"{a} {b}\n" for a, b in _MERGES)
        return transformers.CLIPTokenizer.from_pretrained(
            folder, model_max_length=_MAX_TOKENS, local_files_only=True
        )


def _tiny_vocab() -> dict[str, int]:
    """CLIP's layout: byte symbols, the same with ``</w>``, merges, specials."""
    symbols = _bytes_to_unicode()
    tokens = symbols + [s + "</w>" for s in symbols]
    tokens += [a + b for a, b in _MERGES]
    tokens += [_BOS, _EOS]
    assert len(tokens) <= _VOCAB_SIZE and len(set(tokens)) == len(tokens)
    return {token: index for index, token in enumerate(tokens)}


def _bytes_to_unicode() -> list[str]:
    """GPT-2/CLIP's printable stand-in for each of the 256 byte values."""
    printable = (
        list(range(0x21, 0x7E + 1))  # "!" .. "~"
        + list(range(0xA1, 0xAC + 1))  # inverted "!" .. "not" sign
        + list(range(0xAE, 0xFF + 1))  # registered sign .. y with diaeresis
    )
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    # Order by byte value so token ids follow the byte they stand for.
    return [chr(code) for _, code in sorted(zip(printable, codes))]
