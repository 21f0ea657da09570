"""Reading a VILA-U checkpoint as the authors publish it (``mit-han-lab/vila-u-7b-256``).

The layout their ``VILAUMetaModel.save_pretrained`` writes and ``vila_u.load`` reads
(``vila_u/model/vila_u_arch.py``, ``vila_u/model/utils.py``, ``vila_u/entry.py``):

* ``config.json`` (``model_type`` ``vila_u_llama``): ``llm_cfg``, ``vision_tower_cfg`` and
  ``mm_projector_cfg`` (each a dict: the part lives in ``llm/``, ``vision_tower/``, ``mm_projector/``),
  ``image_aspect_ratio``, ``mm_hidden_size``, ``hidden_size``; a folder holding ``model/`` is read there;
* ``llm/``: a LLaMA ``LlamaForCausalLM`` (config, safetensors, ``generation_config.json``) and
  its slow SentencePiece tokenizer files;
* ``vision_tower/``: ``config.json`` (``rqvaesigliptransformer_model``: ``rqvaesiglip``,
  ``rqtransformer``, ``hidden_size``) and the weights of both (``rqvaesiglip.*``, ``rqtransformer.*``);
  ``rqvaesiglip.pretrained_model`` names the SigLIP checkpoint whose config sets the encoder's shape;
* ``mm_projector/``: ``config.json`` (``mm_projector_type``) and ``layers.*`` weights.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..common import CheckpointError, check_source, need
from .depth import DepthTransformer
from .tower import KNOWN_SIGLIP, RQVAESiglip

PARTS = ("llm", "vision_tower", "mm_projector")


def resolve_folder(pretrained: str) -> Path:
    """The checkpoint folder: ``pretrained`` itself if it is a folder, else a snapshot of that hub
    repository (``huggingface_hub``, so ``HF_ENDPOINT`` and the cache apply)."""
    if os.path.isdir(pretrained):
        folder = Path(pretrained)
    else:
        check_source("unified.pretrained", pretrained)
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(pretrained))
    return folder / "model" if (folder / "model" / "config.json").is_file() else folder


def read_config(folder: Path) -> dict[str, Any]:
    """The checkpoint's ``config.json``; a part's folder (``llm/`` etc.) is named as such."""
    config = read_json(folder / "config.json")
    if "llm_cfg" not in config and config.get("model_type") != "vila_u_llama":
        parent = folder.resolve().parent
        if folder.name in PARTS and (parent / "config.json").is_file():
            raise CheckpointError(f"{folder} is the {folder.name}/ part of a VILA-U checkpoint; give its folder "
                                  f"{parent}")
        raise CheckpointError(f"{folder / 'config.json'} is not a VILA-U config (no 'llm_cfg'; model_type "
                              f"{config.get('model_type')!r}, not 'vila_u_llama')")
    return config


def read_json(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path.parent} has no {path.name}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CheckpointError(f"{path} is not JSON: {exc}") from None


def part_folder(folder: Path, config: dict[str, Any], part: str) -> Path:
    """Where ``llm``/``vision_tower``/``mm_projector`` lives: its subfolder when the config holds
    its dict, else the path the config names (relative to the checkpoint when relative)."""
    value = config.get(f"{part}_cfg")
    if isinstance(value, str) and value:
        path = Path(value)
        return path if path.is_absolute() else folder / path
    return folder / part


def load_weights(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a part folder (one safetensors file, a sharded index, or a ``.bin``)."""
    from safetensors.torch import load_file

    index = folder / "model.safetensors.index.json"
    if index.is_file():
        state: dict[str, torch.Tensor] = {}
        for shard in sorted(set(read_json(index)["weight_map"].values())):
            state.update(load_file(str(folder / shard)))
        return state
    if (folder / "model.safetensors").is_file():
        return load_file(str(folder / "model.safetensors"))
    if (folder / "pytorch_model.bin").is_file():
        return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise CheckpointError(f"no weights (model.safetensors, its index or pytorch_model.bin) in {folder}")


def fill(module: nn.Module, state: dict[str, torch.Tensor], prefix: str, where: str) -> None:
    """Load ``module`` from the entries of ``state`` under ``prefix``; every parameter must be there
    (entries the module does not use, such as SigLIP's text tower, are left out)."""
    wanted = module.state_dict()
    picked = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix) and k[len(prefix):] in wanted}
    missing = sorted(set(wanted) - set(picked))
    if missing:
        raise KeyError(f"{where}: the checkpoint lacks {len(missing)} tensors, e.g. {prefix}{missing[0]}")
    module.load_state_dict(picked, strict=True)


def siglip_vision_config(tower_folder: Path, name: str):
    """The SigLIP vision config ``pretrained_model`` names: a known hub id's geometry, a folder
    (absolute or relative to ``vision_tower/``), or that hub repository's ``config.json``."""
    from transformers import SiglipVisionConfig

    if name in KNOWN_SIGLIP:
        data: dict[str, Any] = dict(KNOWN_SIGLIP[name])
    else:
        local = Path(name) if Path(name).is_absolute() else tower_folder / name
        if (local / "config.json").is_file():
            data = read_json(local / "config.json")
        else:
            from huggingface_hub import hf_hub_download

            data = read_json(Path(hf_hub_download(name, "config.json")))
        data = data.get("vision_config", data)
    config = SiglipVisionConfig(**{k: v for k, v in data.items() if k != "model_type"})
    # eager: softmax in float32, as the authors' transformers 4.36 SigLIP; in bfloat16 sdpa's rounding
    # flips near-tie codes of the residual quantiser (11 of 64 on the parity checkpoint, 0 with eager)
    config._attn_implementation = "eager"
    return config


class Projector(nn.Module):
    """``mm_projector``: ``identity``, ``linear`` or ``mlp<N>x_gelu`` (``base_projector.py``)."""

    def __init__(self, kind: str, width_in: int, width: int) -> None:
        super().__init__()
        if kind == "identity":
            self.layers = nn.Identity()
        elif kind == "linear":
            self.layers = nn.Linear(width_in, width)
        elif kind.startswith("mlp") and kind.endswith("x_gelu") and kind[3:-6].isdigit():
            mods: list[nn.Module] = [nn.Linear(width_in, width)]
            for _ in range(1, int(kind[3:-6])):
                mods += [nn.GELU(), nn.Linear(width, width)]
            self.layers = nn.Sequential(*mods)
        else:
            raise ValueError(f"mm_projector: unknown mm_projector_type {kind!r}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def load_vision(folder: Path, config: dict[str, Any]) -> tuple[RQVAESiglip, DepthTransformer, Any]:
    """The RQ-VAE tower, the depth transformer and the SigLIP vision config, float32 on the CPU."""
    tower_folder = part_folder(folder, config, "vision_tower")
    tower_config = read_json(tower_folder / "config.json")
    where = str(tower_folder / "config.json")
    rq = need(tower_config, "rqvaesiglip", where)
    need(tower_config, "rqtransformer", where)
    vision_config = siglip_vision_config(tower_folder, rq.get("pretrained_model", "google/siglip-large-patch16-256"))
    state = load_weights(tower_folder)
    tower = RQVAESiglip(rq, vision_config)
    fill(tower, state, "rqvaesiglip.", "vision_tower")
    depth = DepthTransformer(tower_config["rqtransformer"])  # checked above
    fill(depth, state, "rqtransformer.", "vision_tower")
    return tower, depth, vision_config


def load_projector(folder: Path, config: dict[str, Any]) -> Projector:
    proj_folder = part_folder(folder, config, "mm_projector")
    kind = read_json(proj_folder / "config.json").get("mm_projector_type", "mlp2x_gelu")
    projector = Projector(kind, int(config["mm_hidden_size"]), int(config["hidden_size"]))
    fill(projector, load_weights(proj_folder), "", "mm_projector")
    return projector
