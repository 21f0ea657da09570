"""Tiny random-weight SD3 and FLUX pipelines, built the way diffusers' own tests build
theirs (``get_dummy_components``): from configs, nothing downloaded.

Their VAEs have four levels (scale factor 8) and SD3's transformer a patch size of 2, as the
real checkpoints do, so their size rule is the real one: multiples of 16. The CLIP slots
read 77 tokens; the T5 slot uses the smoke byte-level tokenizer (its encoder is a real,
tiny ``T5EncoderModel``), which cuts at ``max_sequence_length`` like T5's.
"""

from __future__ import annotations

import copy

import torch

CLIP_TOKENS = 77
_HIDDEN = 32
_VOCAB = 1000


def _seeded(seed, build):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def _tokenizer(max_tokens: int):
    from lmms_genbench.smoke.diffusion import build_tiny_tokenizer

    tok = copy.deepcopy(build_tiny_tokenizer())
    tok.model_max_length = max_tokens
    return tok


def _clip(seed, tok, projection: bool):
    import transformers

    config = transformers.CLIPTextConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        hidden_size=_HIDDEN, intermediate_size=37, num_attention_heads=4, num_hidden_layers=2,
        max_position_embeddings=CLIP_TOKENS, vocab_size=_VOCAB, projection_dim=_HIDDEN,
    )
    cls = transformers.CLIPTextModelWithProjection if projection else transformers.CLIPTextModel
    return _seeded(seed, lambda: cls(config).eval())


def _t5(seed):
    import transformers

    config = transformers.T5Config(vocab_size=_VOCAB, d_model=_HIDDEN, d_ff=37, d_kv=8, num_layers=2,
                                   num_heads=4, relative_attention_num_buckets=8)
    return _seeded(seed, lambda: transformers.T5EncoderModel(config).eval())


def _vae(seed, latent_channels, **extra):
    import diffusers

    return _seeded(seed, lambda: diffusers.AutoencoderKL(
        block_out_channels=[4, 4, 4, 4], in_channels=3, out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4,
        latent_channels=latent_channels, norm_num_groups=2, sample_size=32, **extra).eval())


def tiny_sd3(seed: int = 0):
    import diffusers

    transformer = _seeded(seed, lambda: diffusers.SD3Transformer2DModel(
        sample_size=4, patch_size=2, in_channels=4, num_layers=1, attention_head_dim=8, num_attention_heads=4,
        caption_projection_dim=_HIDDEN, joint_attention_dim=_HIDDEN, pooled_projection_dim=2 * _HIDDEN,
        out_channels=4).eval())
    return diffusers.StableDiffusion3Pipeline(
        transformer=transformer, scheduler=diffusers.FlowMatchEulerDiscreteScheduler(),
        vae=_vae(seed, 4, shift_factor=0.0609, scaling_factor=1.5035),
        text_encoder=_clip(seed, _tokenizer(CLIP_TOKENS), True), tokenizer=_tokenizer(CLIP_TOKENS),
        text_encoder_2=_clip(seed + 1, _tokenizer(CLIP_TOKENS), True), tokenizer_2=_tokenizer(CLIP_TOKENS),
        text_encoder_3=_t5(seed), tokenizer_3=_tokenizer(512),
    )


def tiny_flux(seed: int = 0):
    import diffusers

    transformer = _seeded(seed, lambda: diffusers.FluxTransformer2DModel(
        patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=_HIDDEN, pooled_projection_dim=_HIDDEN,
        axes_dims_rope=[4, 4, 8]).eval())
    return diffusers.FluxPipeline(
        transformer=transformer, scheduler=diffusers.FlowMatchEulerDiscreteScheduler(),
        vae=_vae(seed, 4, shift_factor=0.0609, scaling_factor=1.5035),
        text_encoder=_clip(seed, _tokenizer(CLIP_TOKENS), False), tokenizer=_tokenizer(CLIP_TOKENS),
        text_encoder_2=_t5(seed), tokenizer_2=_tokenizer(512),
    )


class PipelineRecorder:
    """A pipeline that records the keyword arguments of each call, and is otherwise the pipeline."""

    def __init__(self, pipe):
        self.pipe, self.calls = pipe, []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        return self.pipe(**kwargs)

    def __getattr__(self, name):
        return getattr(self.pipe, name)
