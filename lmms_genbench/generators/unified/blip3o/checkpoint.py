"""Reading a BLIP3-o checkpoint as its authors published it (``BLIP3o/BLIP3o-Model-4B``).

The repository holds one transformers checkpoint and a diffusers folder:

* ``config.json``: a Qwen2.5-VL config in the flat pre-v5 layout, plus BLIP3-o's keys
  (``n_query``, ``gen_vision_tower``, ...); its ``model_type`` is the authors' own, so it is read
  as a dict and built as :class:`transformers.Qwen2_5_VLConfig`.
* ``model*.safetensors``: the Qwen2.5-VL weights under their pre-v5 names (``visual.*``,
  ``model.*``, ``lm_head.*``: transformers maps them on load), the DiT (``model.dit.*``) and the
  64 learnt queries (``model.latent_queries``).
* the tokenizer: Qwen2.5's plus ``[IMG]``, ``[/IMG]`` and ``<image>`` (train.py); ``[IMG]`` opens
  image mode.
* ``diffusion-decoder/``: the EMU2-style decoder (``pipeline_llava_gen.py``): an SDXL-shaped
  ``UNet2DConditionModel`` conditioned on CLIP features, an ``AutoencoderKL`` and its scheduler,
  weights in the ``bf16`` variant (``diffusion_pytorch_model.bf16.safetensors``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..common import CheckpointError, check_source, need, repo_file

#: the authors' weights' file variant (inference.py loads the decoder with ``variant="bf16"``)
DECODER_VARIANT = "bf16"
DECODER = "diffusion-decoder"
#: the generation half's state-dict entries (and the training-only towers'): not Qwen2.5-VL's
GENERATION_KEYS = r"(^|\.)(dit|latent_queries|down_projector|gen_vision_tower)(\.|$)"
#: what a checkpoint folder must hold, beyond its weights (``lmms-genbench check`` lists the same)
REQUIRED_FILES = ("config.json", "tokenizer_config.json", f"{DECODER}/model_index.json",
                  f"{DECODER}/scheduler/scheduler_config.json", f"{DECODER}/unet/config.json",
                  f"{DECODER}/vae/config.json")


def local_folder(pretrained: str) -> Path:
    """``pretrained`` itself if it is a folder, else its hub snapshot (``HF_ENDPOINT`` honoured)."""
    if os.path.isdir(pretrained):
        return Path(pretrained)
    check_source("unified.pretrained", pretrained)
    from huggingface_hub import HfApi, snapshot_download

    try:
        files = HfApi().list_repo_files(pretrained)
    except Exception:  # noqa: BLE001 - offline (HF_HUB_OFFLINE) or no listing: the snapshot says why, or serves the cache
        files = []
    # the decoder loads its bf16 variant where there is one: its full-precision twins stay behind
    skip = [f for f in files if f.startswith(f"{DECODER}/") and _is_weight(f) and f".{DECODER_VARIANT}." not in f
            and any(g.startswith(f.rsplit("/", 1)[0] + "/") and f".{DECODER_VARIANT}." in g for g in files)]
    return Path(snapshot_download(pretrained, ignore_patterns=skip or None))


def _is_weight(name: str) -> bool:
    return name.endswith((".safetensors", ".bin", ".safetensors.index.json", ".bin.index.json"))


def read_config(folder: Path) -> dict[str, Any]:
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise CheckpointError(f"{folder} is not a BLIP3-o checkpoint: it lacks {', '.join(missing)}")
    try:
        raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CheckpointError(f"{folder / 'config.json'} is not JSON: {exc}") from None
    # Qwen2_5_VLConfig fills a missing part with Qwen's defaults, which then mismatch the weights
    for key in QWEN_KEYS:
        need(raw, key, str(folder / "config.json"))
    return raw


#: what the config.json of the Qwen2.5-VL half must state (its flat pre-v5 layout)
QWEN_KEYS = ("vision_config", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
             "num_attention_heads")


def qwen_config(raw: dict[str, Any]):
    """The Qwen2.5-VL half of the checkpoint's config, as transformers' own config class."""
    from transformers import Qwen2_5_VLConfig

    fields = {k: v for k, v in raw.items() if k not in ("architectures", "model_type", "auto_map", "transformers_version")}
    return Qwen2_5_VLConfig(**fields)


def load_qwen(folder: Path, raw: dict[str, Any], dtype):
    """The Qwen2.5-VL half, through transformers' own loader (which maps the pre-v5 key names);
    the generation half's entries are left for :func:`read_generation_weights`."""
    from transformers import Qwen2_5_VLForConditionalGeneration as Qwen

    # said expected for this load only (a subclass would lose transformers' key mapping, which
    # it applies to its own classes alone)
    before = Qwen._keys_to_ignore_on_load_unexpected
    Qwen._keys_to_ignore_on_load_unexpected = [*(before or []), GENERATION_KEYS]
    try:
        return Qwen.from_pretrained(folder, config=qwen_config(raw), dtype=dtype)
    finally:
        Qwen._keys_to_ignore_on_load_unexpected = before


def weight_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        return [folder / s for s in shards]
    return [folder / "model.safetensors"]


def read_generation_weights(folder: Path, dtype) -> dict[str, Any]:
    """Only the generation half's tensors (DiT, queries), read from the safetensors files."""
    out = {}
    files = weight_files(folder)
    for path in files:
        if not path.is_file():
            raise CheckpointError(f"{folder} has no {path.name} (its weights)")
        out.update(_read_safetensors(path, ("model.dit.", "model.latent_queries"), dtype))
    names = ", ".join(p.name for p in files)
    if "model.latent_queries" not in out:
        raise CheckpointError(f"{names} has no 'model.latent_queries' (BLIP3-o's generation queries)")
    if not any(k.startswith("model.dit.") for k in out):
        raise CheckpointError(f"{names} has no 'model.dit.*' weights (BLIP3-o's DiT): not a BLIP3-o checkpoint")
    return out


def _read_safetensors(path: Path, prefixes: tuple[str, ...], dtype) -> dict[str, Any]:
    """The tensors of ``path`` whose names start with ``prefixes``, and no others: a safetensors
    file is an 8-byte little-endian header size, a JSON header (dtype, shape, byte offsets) and
    the raw tensors; only the wanted byte ranges are read."""
    import struct

    import torch

    dtypes = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64}
    out = {}
    with open(path, "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
        for name, entry in header.items():
            if name == "__metadata__" or not name.startswith(prefixes):
                continue
            begin, stop = entry["data_offsets"]
            fh.seek(8 + size + begin)
            data = bytearray(fh.read(stop - begin))
            tensor = torch.frombuffer(data, dtype=dtypes[entry["dtype"]]) if data else torch.empty(0)
            out[name] = tensor.reshape(entry["shape"]).to(dtype)
    return out


def load_decoder(folder: Path, dtype):
    """The diffusion decoder's UNet, VAE and scheduler, each with the class its folder names."""
    import diffusers
    from diffusers import AutoencoderKL, UNet2DConditionModel

    root = folder / DECODER

    def variant(sub: str) -> str | None:  # bf16 as the authors load it, else whatever the folder has
        return DECODER_VARIANT if any(f".{DECODER_VARIANT}." in p.name for p in (root / sub).iterdir()) else None

    unet = UNet2DConditionModel.from_pretrained(root, subfolder="unet", variant=variant("unet"), torch_dtype=dtype)
    vae = AutoencoderKL.from_pretrained(root, subfolder="vae", variant=variant("vae"), torch_dtype=dtype)
    scheduler_config = json.loads((root / "scheduler" / "scheduler_config.json").read_text(encoding="utf-8"))
    scheduler_class = getattr(diffusers, need(scheduler_config, "_class_name", f"{root}/scheduler/scheduler_config.json"))
    return unet, vae, scheduler_class.from_config(scheduler_config)


def chat_template(processor: str) -> str:
    """The chat template of processor repo or folder ``processor`` (its .jinja, .json or tokenizer config)."""
    for name, read in (("chat_template.jinja", lambda text: text),
                       ("chat_template.json", lambda text: json.loads(text)["chat_template"]),
                       ("tokenizer_config.json", lambda text: json.loads(text)["chat_template"])):
        path = repo_file(processor, name)
        if path is not None:
            try:
                return read(path.read_text(encoding="utf-8"))
            except (KeyError, ValueError):
                continue
    raise CheckpointError(f"{processor!r} has no chat template (chat_template.jinja or .json, tokenizer_config.json)")
