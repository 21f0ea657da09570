"""BLIP3-o 4B at its real size with random weights, for memory and speed checks on a GPU (no
download): :func:`real_parts` builds each part at the published configuration,
:func:`random_blip3o` assembles them into a working :class:`~.model.Blip3oUnified`.

Sources: the language half is Qwen2.5-VL-3B-Instruct's published config.json (the paper's 4B
is built on the 3B); the DiT is ``NextDiTCrossAttnConfig``'s defaults (blip3o/model/
nextdit_crossattn.py, which the authors' ``build_dit`` uses as they are) over the 3B's width;
64 queries (``--n_query 64`` in slurm.sh and run.sh). The decoder is EMU2's SDXL-shaped UNet
with 1792-d CLIP features in place of text (cross-attention 1792; added embedding 1792 + 6 x 256)
and SDXL's VAE: inferred from ``pipeline_emu2_gen.py``, not read from the Hub's config.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Qwen2.5-VL-3B-Instruct's config.json (flat pre-v5 keys, as BLIP3o-Model-4B's config.json)
QWEN25_VL_3B = {
    "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
    "num_attention_heads": 16, "num_key_value_heads": 2, "max_position_embeddings": 128000, "rope_theta": 1e6,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "bos_token_id": 151643, "eos_token_id": 151645, "image_token_id": 151655, "video_token_id": 151656,
    "vision_start_token_id": 151652, "vision_end_token_id": 151653,
    "vision_config": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                      "out_hidden_size": 2048, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                      "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2,
                      "in_chans": 3, "hidden_act": "silu"},
    "n_query": 64,
}
#: NextDiTCrossAttnConfig's defaults; SwiGLU width 4864 = 256 * ceil(8 * 1792 / 3 / 256)
DIT = {"in_channels": 1792, "dim": 1792, "n_layers": 24, "n_heads": 28, "n_kv_heads": 28, "ffn_inner": 4864}
#: SDXL base's UNet with EMU2's 1792-d conditioning
DECODER_UNET = {
    "sample_size": 128, "in_channels": 4, "out_channels": 4, "layers_per_block": 2,
    "block_out_channels": (320, 640, 1280),
    "down_block_types": ("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
    "up_block_types": ("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
    "transformer_layers_per_block": (1, 2, 10), "attention_head_dim": (5, 10, 20), "cross_attention_dim": 1792,
    "use_linear_projection": True, "addition_embed_type": "text_time", "addition_time_embed_dim": 256,
    "projection_class_embeddings_input_dim": 1792 + 6 * 256,
}
DECODER_VAE = {
    "in_channels": 3, "out_channels": 3, "latent_channels": 4, "block_out_channels": (128, 256, 512, 512),
    "down_block_types": ("DownEncoderBlock2D",) * 4, "up_block_types": ("UpDecoderBlock2D",) * 4,
    "layers_per_block": 2, "scaling_factor": 0.13025,
}
#: SDXL's scheduler config, the decoder's sampler
DECODER_SCHEDULER = {"beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear", "steps_offset": 1,
                     "timestep_spacing": "leading", "prediction_type": "epsilon", "interpolation_type": "linear"}


def real_parts() -> dict[str, Any]:
    """Every part at the real configuration, on the current default device (``meta`` counts them)."""
    import diffusers
    import torch
    import transformers

    from .checkpoint import qwen_config
    from .dit import NextDiTCrossAttn

    return {
        "lm": transformers.Qwen2_5_VLForConditionalGeneration(qwen_config(QWEN25_VL_3B)),
        "dit": NextDiTCrossAttn(cross_dim=QWEN25_VL_3B["hidden_size"], **DIT),
        "queries": torch.randn(1, QWEN25_VL_3B["n_query"], QWEN25_VL_3B["hidden_size"]),
        "unet": diffusers.UNet2DConditionModel(**DECODER_UNET),
        "vae": diffusers.AutoencoderKL(**DECODER_VAE),
    }


def random_blip3o(device: str = "cuda", dtype: str = "bfloat16", tokenizer: str | Path | None = None, **settings):
    """A :class:`~.model.Blip3oUnified` at the real size with random weights, e.g. for a GPU check:

        from lmms_genbench.generators.unified.blip3o.real import random_blip3o
        model = random_blip3o("cuda", "bfloat16")             # 1024 px, the authors' steps
        model.describe([image], "Describe this image.", {"max_new_tokens": 64})
        model.generate(["a red bus"], [0])

    ``tokenizer``: a folder with a Qwen2.5 tokenizer that has ``[IMG]`` (default: the parity
    checkpoint's, tests/support/data/parity/blip3o/BLIP3o-Model-4B, same special ids); the image
    processor is Qwen2.5-VL's default (4 to 16384 tokens). ``settings``: the class's other arguments.
    """
    import diffusers
    import torch
    import transformers

    from .checkpoint import chat_template
    from .model import Blip3oUnified

    parity = Path(__file__).resolve().parents[4] / "tests" / "support" / "data" / "parity" / "blip3o"
    model = Blip3oUnified.__new__(Blip3oUnified)
    # the table's defaults for the settings not given; an unknown setting is an ArgumentError
    model._check(pretrained="random-real-size", processor=str(parity / "Qwen2.5-VL-7B-Instruct"), device=device,
                 dtype=dtype, **settings)
    lm_dtype, dit_dtype, decoder_dtype = (getattr(torch, model.dtypes[part]) for part in ("lm", "dit", "decoder"))
    with torch.device(model._device):
        parts = real_parts()
    model.lm, model.dit = parts["lm"].to(lm_dtype), parts["dit"].to(dit_dtype)
    model.unet, model.vae = parts["unet"].to(decoder_dtype), parts["vae"].to(decoder_dtype)
    model.queries = parts["queries"].to(lm_dtype)
    model.decoder_scheduler = diffusers.EulerDiscreteScheduler(**DECODER_SCHEDULER)
    model.tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer or parity / "BLIP3o-Model-4B")
    model.processor = transformers.Qwen2_5_VLProcessor(
        image_processor=transformers.Qwen2VLImageProcessor(min_pixels=4 * 28 * 28, max_pixels=16384 * 28 * 28),
        tokenizer=model.tokenizer, video_processor=transformers.Qwen2VLVideoProcessor(),
        chat_template=chat_template(str(parity / "Qwen2.5-VL-7B-Instruct")))
    model._assemble(QWEN25_VL_3B["n_query"])
    return model
