"""Parameter counts and bf16 weight sizes of real-size describers and diffusers pipelines,
built on PyTorch's meta device (no memory, no download): the configs below are the published
ones, written out here. Prints the markdown table docs/generators.md quotes.

    python scripts/weights_memory.py

Weights only: activations, the KV cache, CUDA context and allocator slack come on top and
were not measured (no GPU was lent where this ran).
"""

from __future__ import annotations

import torch


def _count(build) -> int:
    with torch.device("meta"):
        model = build()
    return sum(p.numel() for p in model.parameters())


def components() -> dict[str, dict[str, int]]:
    import diffusers
    import transformers as tf

    from lmms_genbench.generators.unified.janus_deepseek import (
        real_config as janus13_config,
    )
    from lmms_genbench.generators.unified.showo import real as showo

    clip_l = lambda: tf.CLIPTextModel(tf.CLIPTextConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                                         num_attention_heads=12, projection_dim=768))
    clip_l_proj = lambda: tf.CLIPTextModelWithProjection(tf.CLIPTextConfig(
        hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12, projection_dim=768))
    clip_g = lambda: tf.CLIPTextModelWithProjection(tf.CLIPTextConfig(
        hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=20, projection_dim=1280,
        hidden_act="gelu"))
    t5_xxl = lambda: tf.T5EncoderModel(tf.T5Config(vocab_size=32128, d_model=4096, d_ff=10240, d_kv=64, num_layers=24,
                                                   num_heads=64, feed_forward_proj="gated-gelu"))
    vae16 = lambda: diffusers.AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=16, block_out_channels=[128, 256, 512, 512],
        down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4, layers_per_block=2,
        use_quant_conv=False, use_post_quant_conv=False)
    vae4 = lambda: diffusers.AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4, block_out_channels=[128, 256, 512, 512],
        down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4, layers_per_block=2)
    sd35_medium = lambda: diffusers.SD3Transformer2DModel(
        sample_size=128, patch_size=2, in_channels=16, num_layers=24, attention_head_dim=64, num_attention_heads=24,
        joint_attention_dim=4096, caption_projection_dim=1536, pooled_projection_dim=2048, out_channels=16,
        pos_embed_max_size=384, dual_attention_layers=tuple(range(13)), qk_norm="rms_norm")
    flux = lambda: diffusers.FluxTransformer2DModel(
        patch_size=1, in_channels=64, num_layers=19, num_single_layers=38, attention_head_dim=128,
        num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=768, guidance_embeds=True,
        axes_dims_rope=(16, 56, 56))
    sdxl_unet = lambda: diffusers.UNet2DConditionModel(
        sample_size=128, in_channels=4, out_channels=4, layers_per_block=2, block_out_channels=(320, 640, 1280),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        transformer_layers_per_block=(1, 2, 10), attention_head_dim=(5, 10, 20), cross_attention_dim=2048,
        use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=256,
        projection_class_embeddings_input_dim=2816)
    qwen25_vl_7b = lambda: tf.Qwen2_5_VLForConditionalGeneration(tf.Qwen2_5_VLConfig(
        text_config=dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                         num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False),
        vision_config=dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584)))
    # VILA-U 7B (256 px): lmms_genbench/generators/unified/vila_u/real.py cites each size (two are estimates)
    from lmms_genbench.generators.unified.vila_u.real import parts as vila_u_parts
    # the paper's BLIP3-o 4B (lmms_genbench/generators/unified/blip3o/real.py names each config's source)
    from lmms_genbench.generators.unified.blip3o.real import real_parts

    vila_u = {name: sum(p.numel() for p in net.parameters()) for name, net in vila_u_parts("meta").items()}
    with torch.device("meta"):
        blip3o = real_parts()
    return {
        "Qwen2.5-VL-7B (describer)": {"model": _count(qwen25_vl_7b)},
        "VILA-U 7B 256 px (unified)": vila_u,
        "BLIP3-o 4B (unified)": {name: sum(p.numel() for p in blip3o[name].parameters())
                                 for name in ("lm", "dit", "unet", "vae")},
        "BAGEL-7B-MoT (unified)": _bagel(),
        "SD3.5-medium": {"transformer": _count(sd35_medium), "T5-XXL encoder": _count(t5_xxl),
                         "CLIP-L": _count(clip_l_proj), "CLIP-G": _count(clip_g), "VAE": _count(vae16)},
        "FLUX.1-dev / schnell": {"transformer": _count(flux), "T5-XXL encoder": _count(t5_xxl),
                                 "CLIP-L": _count(clip_l), "VAE": _count(vae16)},
        "SDXL": {"UNet": _count(sdxl_unet), "CLIP-L": _count(clip_l), "CLIP-G": _count(clip_g), "VAE": _count(vae4)},
        # deepseek-ai/Janus-1.3B's config.json with the tower and VQ sizes DeepSeek's code holds (real_config)
        "Janus 1.3B (unified)": {"model": _count(lambda: tf.JanusForConditionalGeneration(janus13_config()))},
        # showlab/show-o-512x512 + showlab/magvitv2 (both halves of unified=showo; the tokenizer runs
        # in float32: 0.4 GB): lmms_genbench/generators/unified/showo/real.py
        "Show-o 512x512 (unified)": {"Phi-1.5 transformer": _count(showo.language_model),
                                     "MAGVIT-v2": _count(showo.image_tokenizer)},
    }


def _bagel() -> dict[str, int]:
    """BAGEL at its published sizes (llm_config.json: Qwen2.5-7B's; vit_config.json: SigLIP so400m at
    980 px, one layer dropped; FLUX.1's autoencoder), as unified=bagel builds it."""
    from lmms_genbench.generators.unified.bagel.checkpoint import real_configs
    from lmms_genbench.generators.unified.bagel.loading import build_empty

    network, vae = build_empty(*real_configs())
    lm = sum(p.numel() for p in network.language_model.parameters())
    rest = sum(p.numel() for p in network.parameters()) - lm
    return {"MoT LM (two experts)": lm, "SigLIP ViT + connectors": rest, "VAE": sum(p.numel() for p in vae.parameters())}


def main() -> None:
    gib = 2 / 1024**3  # bf16: 2 bytes a parameter
    print("| model | component: parameters (bf16 GiB) | all weights, bf16 GiB | largest component, GiB |")
    print("|---|---|---|---|")
    for model, parts in components().items():
        cells = ", ".join(f"{name} {n / 1e9:.2f} B ({n * gib:.1f})" for name, n in parts.items())
        total, largest = sum(parts.values()), max(parts.values())
        print(f"| {model} | {cells} | {total * gib:.1f} | {largest * gib:.1f} |")


if __name__ == "__main__":
    main()
