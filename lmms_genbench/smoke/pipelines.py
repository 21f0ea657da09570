"""Tiny random-weight replicas of eight diffusers text-to-image families, saved as folders.

Each folder loads with ``diffusers.AutoPipelineForText2Image.from_pretrained``, so
``generator=diffusers,generator.pretrained=<folder>`` drives the family's real pipeline
class (prompt encoding, scheduler, latent packing, VAE decoding) with no download. The
components follow the shapes of diffusers' own ``get_dummy_components`` tests (written
here from their configs, shrunk further where a CPU needs it); tokenizers are word-level
ones built in code over the smoke word list. Pictures are noise: these folders verify
plumbing, never image quality.

Families: SD3, FLUX, SDXL, PixArt-Sigma, Sana, Lumina 2, Kandinsky 3 and a
Playground-style SDXL (SDXL with Playground v2.5's EDM scheduler and latent statistics).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from .diffusion import build_tiny_tokenizer
from . import diffusion, tokenizers
from .checkpoints import build_atomically, builder_key, cached
from .tokenizers import word_vocab
from .vision import seeded

__all__ = ["FAMILIES", "PIPELINE_CLASSES", "build_tiny_family", "pipelines_build_key", "tiny_family_path"]

#: family -> the diffusers pipeline class its folder loads as
PIPELINE_CLASSES = {
    "sd3": "StableDiffusion3Pipeline",
    "flux": "FluxPipeline",
    "sdxl": "StableDiffusionXLPipeline",
    "pixart_sigma": "PixArtSigmaPipeline",
    "sana": "SanaPipeline",
    "lumina2": "Lumina2Pipeline",
    "kandinsky3": "Kandinsky3Pipeline",
    "playground": "StableDiffusionXLPipeline",
}
FAMILIES = tuple(PIPELINE_CLASSES)

_HIDDEN = 32  # every text encoder's width
_T5_SPECIALS = ["<pad>", "</s>", "<unk>"]
_GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]


def _text_tokenizer(specials: list[str], *, bos: str | None, eos: str, max_length: int) -> Any:
    """A word-level fast tokenizer over the smoke words (T5- or Gemma-like specials)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = word_vocab(specials)
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    # T5 ends each text with </s>; Gemma starts it with <bos>
    single = f"{bos} $A" if bos else f"$A {eos}"
    marks = [(bos, vocab[bos])] if bos else [(eos, vocab[eos])]
    backend.post_processor = processors.TemplateProcessing(single=single, special_tokens=marks)
    backend.add_special_tokens(specials)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token=bos, eos_token=eos, unk_token="<unk>", pad_token="<pad>",
        model_max_length=max_length, padding_side="right",
    )


def _t5(seed: int):
    from transformers import T5Config, T5EncoderModel

    tokenizer = _text_tokenizer(_T5_SPECIALS, bos=None, eos="</s>", max_length=512)
    config = T5Config(vocab_size=len(tokenizer), d_model=_HIDDEN, d_kv=8, d_ff=37, num_layers=1, num_heads=4,
                      relative_attention_num_buckets=8, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    return tokenizer, seeded(seed, lambda: T5EncoderModel(config).eval())


def _gemma2(seed: int, max_length: int):
    from transformers import Gemma2Config, Gemma2Model

    tokenizer = _text_tokenizer(_GEMMA_SPECIALS, bos="<bos>", eos="<eos>", max_length=max_length)
    config = Gemma2Config(vocab_size=len(tokenizer), hidden_size=8, intermediate_size=16, head_dim=4,
                          num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=2, sliding_window=8,
                          max_position_embeddings=2048, pad_token_id=0, eos_token_id=1, bos_token_id=2)
    config._attn_implementation = "eager"
    return tokenizer, seeded(seed, lambda: Gemma2Model(config).eval())


def _clip(seed: int, projection: bool):
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    tokenizer = build_tiny_tokenizer()
    config = CLIPTextConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        hidden_size=_HIDDEN, intermediate_size=37, num_attention_heads=4, num_hidden_layers=1,
        max_position_embeddings=tokenizer.model_max_length, vocab_size=1000, projection_dim=_HIDDEN,
    )
    cls = CLIPTextModelWithProjection if projection else CLIPTextModel
    return tokenizer, seeded(seed, lambda: cls(config).eval())


def _flat_vae(seed: int, latent_channels: int = 4):
    """One-block KL autoencoder: no downsampling, as in diffusers' DiT tests."""
    from diffusers import AutoencoderKL

    return seeded(seed, lambda: AutoencoderKL(
        sample_size=32, in_channels=3, out_channels=3, block_out_channels=(4,), layers_per_block=1,
        latent_channels=latent_channels, norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False,
        shift_factor=0.0609, scaling_factor=1.5035,
    ).eval())


def _deep_vae(seed: int):
    """Four-level KL autoencoder: scale 8, as the real ones (Lumina 2's pipeline assumes it)."""
    from diffusers import AutoencoderKL

    return seeded(seed, lambda: AutoencoderKL(
        block_out_channels=[4, 4, 4, 4], in_channels=3, out_channels=3, latent_channels=4, norm_num_groups=2,
        down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4, layers_per_block=1,
        shift_factor=0.0609, scaling_factor=1.5035,
    ).eval())


def _sd3(seed: int):
    import diffusers

    tokenizer, text_encoder = _clip(seed, True)
    tokenizer_2, text_encoder_2 = _clip(seed + 1, True)
    tokenizer_3, text_encoder_3 = _t5(seed)
    transformer = seeded(seed, lambda: diffusers.SD3Transformer2DModel(
        sample_size=32, patch_size=1, in_channels=4, num_layers=1, attention_head_dim=8, num_attention_heads=4,
        caption_projection_dim=32, joint_attention_dim=_HIDDEN, pooled_projection_dim=2 * _HIDDEN, out_channels=4,
    ).eval())
    return diffusers.StableDiffusion3Pipeline(
        transformer=transformer, scheduler=diffusers.FlowMatchEulerDiscreteScheduler(), vae=_flat_vae(seed),
        text_encoder=text_encoder, tokenizer=tokenizer, text_encoder_2=text_encoder_2, tokenizer_2=tokenizer_2,
        text_encoder_3=text_encoder_3, tokenizer_3=tokenizer_3,
    )


def _flux(seed: int):
    import diffusers

    tokenizer, text_encoder = _clip(seed, False)
    tokenizer_2, text_encoder_2 = _t5(seed)
    transformer = seeded(seed, lambda: diffusers.FluxTransformer2DModel(
        patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=_HIDDEN, pooled_projection_dim=_HIDDEN, axes_dims_rope=(4, 4, 8),
    ).eval())
    return diffusers.FluxPipeline(
        transformer=transformer, scheduler=diffusers.FlowMatchEulerDiscreteScheduler(),
        vae=_flat_vae(seed, latent_channels=1), text_encoder=text_encoder, tokenizer=tokenizer,
        text_encoder_2=text_encoder_2, tokenizer_2=tokenizer_2,
    )


def _sdxl(seed: int, playground: bool = False):
    import diffusers

    tokenizer, text_encoder = _clip(seed, False)
    tokenizer_2, text_encoder_2 = _clip(seed + 1, True)
    unet = seeded(seed, lambda: diffusers.UNet2DConditionModel(
        block_out_channels=(8, 16), layers_per_block=1, sample_size=16, in_channels=4, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        attention_head_dim=(2, 4), use_linear_projection=True, addition_embed_type="text_time",
        addition_time_embed_dim=8, transformer_layers_per_block=(1, 1),
        # 6 time ids of 8 each, plus the second encoder's pooled projection
        projection_class_embeddings_input_dim=6 * 8 + _HIDDEN, cross_attention_dim=2 * _HIDDEN, norm_num_groups=4,
    ).eval())
    extra = {}
    if playground:  # Playground v2.5: EDM latents with per-channel statistics
        extra = {"latents_mean": [0.0, 0.1, -0.1, 0.05], "latents_std": [1.0, 0.9, 1.1, 1.0], "scaling_factor": 0.5}
    vae = seeded(seed, lambda: diffusers.AutoencoderKL(
        block_out_channels=[8, 16], in_channels=3, out_channels=3, latent_channels=4, norm_num_groups=4,
        down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
        up_block_types=["UpDecoderBlock2D", "UpDecoderBlock2D"], sample_size=32, **extra,
    ).eval())
    if playground:
        scheduler = diffusers.EDMDPMSolverMultistepScheduler()
    else:
        scheduler = diffusers.EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, steps_offset=1,
                                                     beta_schedule="scaled_linear", timestep_spacing="leading")
    return diffusers.StableDiffusionXLPipeline(
        vae=vae, text_encoder=text_encoder, text_encoder_2=text_encoder_2, tokenizer=tokenizer,
        tokenizer_2=tokenizer_2, unet=unet, scheduler=scheduler, force_zeros_for_empty_prompt=True,
    )


def _pixart_sigma(seed: int):
    import diffusers

    tokenizer, text_encoder = _t5(seed)
    # sample_size 32 is the smallest the pipeline's resolution binning knows (256 px bins),
    # so a four-level VAE keeps the drawn latent at 32x32
    transformer = seeded(seed, lambda: diffusers.PixArtTransformer2DModel(
        sample_size=32, num_layers=1, patch_size=2, attention_head_dim=8, num_attention_heads=2,
        caption_channels=_HIDDEN, in_channels=4, cross_attention_dim=16, out_channels=8,
    ).eval())
    return diffusers.PixArtSigmaPipeline(tokenizer=tokenizer, text_encoder=text_encoder, vae=_deep_vae(seed),
                                         transformer=transformer, scheduler=diffusers.DDIMScheduler())


def _sana(seed: int):
    import diffusers

    tokenizer, text_encoder = _gemma2(seed, max_length=300)
    # sample_size 16: the smallest resolution bin (512 px); a six-level DC autoencoder
    # (scale 32, as the real one) keeps its latent at 16x16
    transformer = seeded(seed, lambda: diffusers.SanaTransformer2DModel(
        patch_size=1, in_channels=4, out_channels=4, num_layers=1, num_attention_heads=2, attention_head_dim=4,
        num_cross_attention_heads=2, cross_attention_head_dim=4, cross_attention_dim=8, caption_channels=8,
        sample_size=16,
    ).eval())
    levels = 6
    vae = seeded(seed, lambda: diffusers.AutoencoderDC(
        in_channels=3, latent_channels=4, attention_head_dim=2,
        encoder_block_types="ResBlock", decoder_block_types="ResBlock",
        encoder_block_out_channels=(4,) * levels, decoder_block_out_channels=(4,) * levels,
        encoder_layers_per_block=(1,) * levels, decoder_layers_per_block=(1,) * levels,
        encoder_qkv_multiscales=((),) * levels, decoder_qkv_multiscales=((),) * levels,
        downsample_block_type="conv", upsample_block_type="interpolate", scaling_factor=0.41407,
    ).eval())
    return diffusers.SanaPipeline(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                                  scheduler=diffusers.FlowMatchEulerDiscreteScheduler(shift=7.0))


def _lumina2(seed: int):
    import diffusers

    tokenizer, text_encoder = _gemma2(seed, max_length=256)
    transformer = seeded(seed, lambda: diffusers.Lumina2Transformer2DModel(
        sample_size=4, patch_size=2, in_channels=4, hidden_size=8, num_layers=1, num_refiner_layers=1,
        num_attention_heads=1, num_kv_heads=1, multiple_of=16, axes_dim_rope=(4, 2, 2), cap_feat_dim=8,
    ).eval())
    return diffusers.Lumina2Pipeline(transformer=transformer, vae=_deep_vae(seed), text_encoder=text_encoder,
                                     tokenizer=tokenizer, scheduler=diffusers.FlowMatchEulerDiscreteScheduler())


def _kandinsky3(seed: int):
    import diffusers

    tokenizer, text_encoder = _t5(seed)
    unet = seeded(seed, lambda: diffusers.Kandinsky3UNet(
        # one layer per block breaks its resnet wiring; two is the least that runs
        in_channels=4, time_embedding_dim=4, groups=2, attention_head_dim=4, layers_per_block=2,
        block_out_channels=(8, 16), cross_attention_dim=4, encoder_hid_dim=_HIDDEN,
    ).eval())
    # the pipeline sizes latents for a scale-8 MoVQ (as the real one), so four levels; its
    # spatial norms have 32 groups, so 32 channels is the least
    movq = seeded(seed, lambda: diffusers.VQModel(
        block_out_channels=[32] * 4, down_block_types=["DownEncoderBlock2D"] * 3 + ["AttnDownEncoderBlock2D"],
        in_channels=3, latent_channels=4, layers_per_block=1, norm_num_groups=8, norm_type="spatial",
        num_vq_embeddings=12, out_channels=3, up_block_types=["AttnUpDecoderBlock2D"] + ["UpDecoderBlock2D"] * 3,
        vq_embed_dim=4,
    ).eval())
    scheduler = diffusers.DDPMScheduler(beta_start=0.00085, beta_end=0.012, steps_offset=1,
                                        beta_schedule="squaredcos_cap_v2", clip_sample=True, thresholding=False)
    return diffusers.Kandinsky3Pipeline(tokenizer=tokenizer, text_encoder=text_encoder, unet=unet,
                                        scheduler=scheduler, movq=movq)


_BUILDERS: dict[str, Callable[[int], Any]] = {
    "sd3": _sd3,
    "flux": _flux,
    "sdxl": _sdxl,
    "pixart_sigma": _pixart_sigma,
    "sana": _sana,
    "lumina2": _lumina2,
    "kandinsky3": _kandinsky3,
    "playground": lambda seed: _sdxl(seed, playground=True),
}


def _check_family(family: str) -> str:
    if family not in _BUILDERS:
        raise ValueError(f"family: expected one of {', '.join(FAMILIES)}; got {family!r}")
    return family


def pipelines_build_key() -> str:
    """The builder key (:func:`.checkpoints.builder_key`) over the word tokenizer's sources, the
    byte-level one's (:mod:`.diffusion`) and this module."""
    return builder_key(*tokenizers.SOURCES, Path(diffusion.__file__), Path(__file__))


def build_tiny_family(family: str, path: str | os.PathLike, seed: int = 0) -> Path:
    """Build ``family``'s tiny pipeline and save it into ``path`` atomically; return ``path``."""
    import torch

    _check_family(family)

    def write(folder: Path, seed: int) -> None:
        with torch.random.fork_rng(devices=[]):
            pipeline = _BUILDERS[family](seed)
        pipeline.save_pretrained(folder)

    return build_atomically(Path(path).expanduser().absolute(), seed, f"pipeline_{family}", write,
                            pipelines_build_key())


def tiny_family_path(family: str, cache_dir: str | os.PathLike | None = None, seed: int = 0) -> Path:
    """A cached tiny ``family`` pipeline folder, built on first use.

    It lives in ``<root>/smoke/tiny-<family>-s{seed}-<build key>`` (root:
    :func:`.checkpoints.cache_root`); a folder of another builder
    version is rebuilt. Safe to call from several processes at once.
    """
    _check_family(family)
    key = pipelines_build_key()
    return cached(cache_dir, f"tiny-{family.replace('_', '-')}-s{seed}-{key[:8]}", seed, f"pipeline_{family}", key,
                  lambda dest: build_tiny_family(family, dest, seed))
