"""Random-weight networks of real size for ``cycle_throughput.py --size real`` (a GPU run).

Same tokenizers, chat templates and word lists as the smoke models (so nothing is
downloaded), but the layer sizes of the models the papers use:

* ``qwen2_vl``: Qwen2-VL-2B (LLM 1536 wide, 28 layers, 12 heads, 2 KV heads; vision
  tower 1280 wide, 32 layers), images up to 448x448;
* ``llava_hf``: LLaVA-1.5-7B (Llama 4096 wide, 32 layers; CLIP ViT-L/14 at 336 px);
* generator: Stable Diffusion 1.5's UNet and VAE (512 px) with a 768-wide, 12-layer
  CLIP text encoder, ``--gen-steps`` DDIM steps, guidance 7.5;
* similarity encoder: ViT-B/16 at 224 px (GenCeption's encoder's size).

Only the vocabulary (the smoke word list) is smaller than the real models'. Weights
are random and bfloat16 on CUDA (float32 on a CPU); checkpoints are written once to
``$LMMS_GENBENCH_CACHE/bench-real`` (about 4.5 GB and 14 GB for the two describers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from collections.abc import Callable
from typing import Any


def _root() -> Path:
    base = os.environ.get("LMMS_GENBENCH_CACHE") or "~/.cache/lmms_genbench"
    return Path(base).expanduser() / "bench-real"


def _dtype(device: str):
    import torch

    return torch.bfloat16 if device.startswith("cuda") else torch.float32


def _save(folder: Path, tiny: Path, model: Any, processor: Any = None) -> None:
    """``model`` with the smoke model's tokenizer files and generation settings (its
    suppressed tokens get zero logits, as in the smoke build)."""
    import torch

    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    generation = json.loads((tiny / "generation_config.json").read_text())
    banned = generation.get("suppress_tokens") or []
    with torch.no_grad():
        model.lm_head.weight[banned] = 0.0
    model.save_pretrained(tmp)
    for name in os.listdir(tiny):
        if name not in ("model.safetensors", "config.json", "genbench_smoke.json") and not (tmp / name).exists():
            shutil.copy(tiny / name, tmp / name)
    shutil.copy(tiny / "generation_config.json", tmp / "generation_config.json")
    if processor is not None:
        processor.save_pretrained(tmp)
    tmp.rename(folder)


def _real_dims(name: str, tiny_path: Callable[[], Path], model_class: Any, device: str,
               resize: Callable[[Any], None], processor: Callable[[Path], Any] | None = None) -> Path:
    """The folder ``name``: the tiny smoke checkpoint ``tiny_path()`` with ``resize`` applied to
    its config, random weights (and ``processor(tiny)``'s files); written once, then reused."""
    import torch
    from transformers import AutoConfig

    folder = _root() / name
    if folder.exists():
        return folder
    tiny = tiny_path()
    config = AutoConfig.from_pretrained(tiny)
    resize(config)
    with torch.device(device):
        model = model_class._from_config(config, dtype=_dtype(device))
    folder.parent.mkdir(parents=True, exist_ok=True)
    _save(folder, tiny, model, processor(tiny) if processor is not None else None)
    return folder


def qwen2_vl(device: str) -> Path:
    from transformers import Qwen2VLForConditionalGeneration

    from lmms_genbench.smoke.llava import tiny_qwen2_vl_path

    def qwen2_vl_2b(config: Any) -> None:
        text = config.text_config
        text.hidden_size, text.intermediate_size, text.num_hidden_layers = 1536, 8960, 28
        text.num_attention_heads, text.num_key_value_heads = 12, 2
        text.layer_types = ["full_attention"] * text.num_hidden_layers  # the tiny config lists one per tiny layer
        text.head_dim = 128  # the tiny config states its own
        text.rope_parameters = {**text.rope_parameters, "mrope_section": [16, 24, 24]}  # head_dim 128
        vision = config.vision_config
        vision.depth, vision.embed_dim, vision.num_heads, vision.mlp_ratio, vision.hidden_size = 32, 1280, 16, 4, 1536

    return _real_dims("qwen2-vl-2b-dims", tiny_qwen2_vl_path, Qwen2VLForConditionalGeneration, device, qwen2_vl_2b)


def llava(device: str) -> Path:
    from transformers import AutoProcessor, CLIPImageProcessor, LlavaForConditionalGeneration, LlavaProcessor

    from lmms_genbench.smoke.llava import tiny_llava_path

    def llava_7b(config: Any) -> None:
        v = config.vision_config
        v.hidden_size, v.intermediate_size, v.num_hidden_layers, v.num_attention_heads = 1024, 4096, 24, 16
        v.image_size, v.patch_size, v.projection_dim = 336, 14, 768
        t = config.text_config
        t.hidden_size, t.intermediate_size, t.num_hidden_layers = 4096, 11008, 32
        t.num_attention_heads = t.num_key_value_heads = 32
        t.head_dim = 128  # the tiny config states its own
        config.image_seq_length = (336 // 14) ** 2

    def processor(tiny: Path) -> Any:
        small = AutoProcessor.from_pretrained(tiny)
        return LlavaProcessor(
            image_processor=CLIPImageProcessor(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336}),
            tokenizer=small.tokenizer, patch_size=14, vision_feature_select_strategy="default",
            num_additional_image_tokens=1, chat_template=small.chat_template,
        )

    return _real_dims("llava-1.5-7b-dims", tiny_llava_path, LlavaForConditionalGeneration, device, llava_7b, processor)


def sd15_pipeline(device: str) -> Any:
    import diffusers
    import torch
    import transformers

    from lmms_genbench.smoke.diffusion import MAX_TOKENS, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    with torch.device(device):
        unet = diffusers.UNet2DConditionModel(sample_size=64, cross_attention_dim=768)  # SD 1.5's defaults
        vae = diffusers.AutoencoderKL(
            block_out_channels=[128, 256, 512, 512], down_block_types=["DownEncoderBlock2D"] * 4,
            up_block_types=["UpDecoderBlock2D"] * 4, layers_per_block=2, latent_channels=4, sample_size=512,
        )
        text_encoder = transformers.CLIPTextModel(transformers.CLIPTextConfig(
            vocab_size=len(tokenizer), hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
            num_attention_heads=12, max_position_embeddings=MAX_TOKENS, bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        ))
    scheduler = diffusers.DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                        clip_sample=False, set_alpha_to_one=False, steps_offset=1)
    pipeline = diffusers.StableDiffusionPipeline(
        vae=vae.eval(), text_encoder=text_encoder.eval(), tokenizer=tokenizer, unet=unet.eval(),
        scheduler=scheduler, safety_checker=None, feature_extractor=None, requires_safety_checker=False,
    )
    return pipeline.to(dtype=_dtype(device))


def vit_b() -> Path:
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    folder = _root() / "vit-b16-dims"
    if not folder.exists():
        tmp = folder.with_name(folder.name + ".tmp")
        ViTModel(ViTConfig()).save_pretrained(tmp)  # ViTConfig's defaults are ViT-B/16 at 224
        ViTImageProcessor(size={"height": 224, "width": 224}).save_pretrained(tmp)
        tmp.rename(folder)
    return folder


def networks(describer: str, args: argparse.Namespace, work: Path) -> tuple[dict, str]:
    """The cycle model's arguments for ``describer`` and the encoder spec."""
    device = args.device
    if describer == "qwen2_vl":
        d_args = {"pretrained": str(qwen2_vl(device)), "device": device, "device_map": device,
                  "batch_size": args.describer_batch, "min_pixels": 224 * 224, "max_pixels": 448 * 448}
    else:
        d_args = {"pretrained": str(llava(device)), "device": device, "device_map": device}
    pipeline = sd15_pipeline(device)
    model_args = {
        "describer": describer, **{f"describer.{k}": v for k, v in d_args.items()},
        "generator": "diffusers", "generator.pipeline": pipeline, "generator.pretrained": "random-sd15-dims",
        "generator.device": device, "generator.dtype": str(pipeline.dtype).removeprefix("torch."),
        "generator.steps": args.gen_steps, "generator.guidance": 7.5, "generator.width": args.gen_size,
        "generator.height": args.gen_size, "generator.batch_size": args.generator_batch,
        "describer_batch": args.describer_batch,
    }
    return model_args, str(vit_b())
