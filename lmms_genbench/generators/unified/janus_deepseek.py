"""Janus checkpoints in DeepSeek's own layout (``deepseek-ai/Janus-1.3B``), read onto transformers' Janus classes.

DeepSeek publishes Janus 1.3B for its ``janus`` package (github.com/deepseek-ai/Janus): a
``config.json`` with ``language_config`` / ``vision_config`` / ``aligner_config`` /
``gen_vision_config`` / ``gen_aligner_config`` / ``gen_head_config``, ``processor_config.json``
and ``preprocessor_config.json`` for its ``VLChatProcessor``, a Llama-style ``tokenizer.json``,
and the state dict of its ``MultiModalityCausalLM`` in ``model.safetensors``. This module reads
those files as published and builds transformers' ``JanusForConditionalGeneration`` from them
at load time: sizes come from the config and, where DeepSeek's config only names a part (the
SigLIP tower, the VQ model) and its code holds the sizes, from the weights' shapes; state-dict
keys are renamed and the SigLIP tower's fused ``qkv`` projections split. Prompts, image
preprocessing and the tokenizer follow DeepSeek's processor (see :class:`DeepSeekChat`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ...core.failures import GeneratorConfigError
from .common import CheckpointError, authors_text, need, repo_file

__all__ = ["DEEPSEEK_FILES", "DeepSeekChat", "is_deepseek_layout", "load_deepseek", "map_state_dict", "read_json",
           "real_config", "weight_paths"]

#: what DeepSeek's Janus-1.3B repository holds besides README/.gitattributes (its weights: one safetensors file)
DEEPSEEK_FILES = ("config.json", "model.safetensors", "preprocessor_config.json", "processor_config.json",
                  "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json")
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")

#: heads of the SigLIP towers DeepSeek's config names (janus/models/siglip_vit.py, SigLIP_MODEL_CONFIG):
#: the one size the weights do not carry
SIGLIP_HEADS = {"siglip_so400m_patch14_384": 16, "siglip_so400m_patch14_224": 16, "siglip_large_patch16_384": 16}

#: VLChatProcessor.system_prompt (janus/models/processing_vlm.py), put before every understanding turn
SYSTEM_PROMPT = ("You are a helpful language and vision assistant. You are able to understand the visual content "
                 "that the user provides, and assist the user with a variety of tasks using natural language.")
#: the roles of DeepSeek's Janus-1.3B examples (README "Janus" section, inference.py, generation_inference.py)
USER, ASSISTANT = "User", "Assistant"
#: sft_format "deepseek"'s roles (janus/utils/conversation.py; separators "\n\n", ": "), as the README prompts Janus-Pro
PRO_USER, PRO_ASSISTANT = "<|User|>", "<|Assistant|>"


def chat_roles(pretrained: str) -> tuple[str, str]:
    """The roles DeepSeek's examples give this checkpoint (the processor takes them from the caller)."""
    name = pretrained.rstrip("/").rsplit("/", 1)[-1].lower()
    return (USER, ASSISTANT) if name.startswith("janus-1.3b") else (PRO_USER, PRO_ASSISTANT)


def is_deepseek_layout(config: dict[str, Any]) -> bool:
    """Whether a ``config.json`` is DeepSeek's ``multi_modality`` one rather than transformers' ``janus``."""
    return config.get("model_type") == "multi_modality" or "language_config" in config


def read_json(pretrained: str, filename: str, required: bool = True) -> dict[str, Any]:
    path = repo_file(pretrained, filename)
    if path is None:
        if required:
            raise CheckpointError(f"{pretrained} has no {filename}")
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CheckpointError(f"{path} is not JSON: {exc}") from None


def weight_paths(pretrained: str) -> list[Path]:
    """The weight files of ``pretrained``: the first of ``_WEIGHT_FILES`` it holds, or every shard
    its index names (also read by ``lmms-genbench check``: unified/folders.py)."""
    for name in _WEIGHT_FILES:
        path = repo_file(pretrained, name)
        if path is None:
            continue
        if not name.endswith(".index.json"):
            return [path]
        shards = sorted(set(json.loads(path.read_text(encoding="utf-8"))["weight_map"].values()))
        paths = [repo_file(pretrained, shard) for shard in shards]
        if any(part is None for part in paths):
            raise CheckpointError(f"{pretrained}: a shard named in {name} is missing")
        return paths  # type: ignore[return-value]
    raise CheckpointError(f"{pretrained} has none of {', '.join(_WEIGHT_FILES)}")


def _state_dict(pretrained: str) -> dict[str, Any]:
    from transformers.modeling_utils import load_state_dict  # reads safetensors or a torch pickle

    return {key: value for part in weight_paths(pretrained) for key, value in load_state_dict(str(part)).items()}


# -- state dict ------------------------------------------------------------------------

_VISION = "vision_model.vision_tower."
_RENAMES = [  # DeepSeek prefix -> transformers prefix, first match wins
    ("language_model.model.", "model.language_model."),
    ("language_model.lm_head.", "lm_head."),
    (_VISION + "patch_embed.proj.", "model.vision_model.embeddings.patch_embedding."),
    (_VISION + "norm.", "model.vision_model.post_layernorm."),
    ("gen_head.output_mlp_projector.", "model.generation_head.proj_out."),
    ("gen_head.vision_head.", "model.generation_head.vision_head."),
    ("gen_embed.", "model.generation_embeddings."),
    ("gen_vision_model.", "model.vqmodel."),
]
_BLOCK = {"norm1": "layer_norm1", "norm2": "layer_norm2", "attn.proj": "self_attn.projection_layer",
          "mlp.fc1": "mlp.fc1", "mlp.fc2": "mlp.fc2"}
_VQ = [(re.compile(r"(encoder)\.conv_blocks\.(\d+)\.res\."), r"\1.down.\2.block."),
       (re.compile(r"(encoder)\.conv_blocks\.(\d+)\."), r"\1.down.\2."),
       (re.compile(r"(decoder)\.conv_blocks\.(\d+)\.res\."), r"\1.up.\2.block."),
       (re.compile(r"(decoder)\.conv_blocks\.(\d+)\."), r"\1.up.\2."),
       (re.compile(r"\.mid\.0\."), ".mid.block_1."), (re.compile(r"\.mid\.1\."), ".mid.attn_1."),
       (re.compile(r"\.mid\.2\."), ".mid.block_2.")]


def map_state_dict(state: dict[str, Any]) -> dict[str, Any]:
    """DeepSeek's ``MultiModalityCausalLM`` state dict as transformers' ``JanusForConditionalGeneration`` one.

    Dropped: the SigLIP tower's attention-pooling head (built, never run: DeepSeek's tower
    returns its patch features), the VQ quantizer's training-time ``codebook_used`` counter,
    and rotary ``inv_freq`` buffers older LLaMA code saved (recomputed at load).
    """
    out: dict[str, Any] = {}
    for key, value in state.items():
        if key.startswith(_VISION + "attn_pool.") or key.endswith(("quantize.codebook_used", "rotary_emb.inv_freq")):
            continue
        if key == _VISION + "pos_embed":
            out["model.vision_model.embeddings.position_embedding.weight"] = value[0]
            continue
        block = re.match(re.escape(_VISION) + r"blocks\.(\d+)\.(.+)\.(weight|bias)$", key)
        if block:
            layer, part, kind = block.groups()
            prefix = f"model.vision_model.encoder.layers.{layer}."
            if part == "attn.qkv":  # one fused projection -> q, k, v
                for name, chunk in zip(("q_proj", "k_proj", "v_proj"), value.chunk(3, dim=0)):
                    out[f"{prefix}self_attn.{name}.{kind}"] = chunk.contiguous()
            elif part in _BLOCK:
                out[f"{prefix}{_BLOCK[part]}.{kind}"] = value
            else:
                raise KeyError(f"unexpected SigLIP key {key}")
            continue
        mlp = re.match(r"(aligner|gen_aligner)\.layers\.(\d+)\.(weight|bias)$", key)
        if mlp:  # Sequential(Linear, GELU, Linear, ...): Linear 0 -> fc1, Linear 2k -> hidden_layers[k-1]
            name, index, kind = mlp.group(1), int(mlp.group(2)), mlp.group(3)
            target = "model.aligner" if name == "aligner" else "model.generation_aligner"
            part = "fc1" if index == 0 else f"hidden_layers.{index // 2 - 1}"
            out[f"{target}.{part}.{kind}"] = value
            continue
        for old, new in _RENAMES:
            if key.startswith(old):
                renamed = new + key[len(old):]
                if old == "gen_vision_model.":
                    for pattern, repl in _VQ:
                        renamed = pattern.sub(repl, renamed)
                out[renamed] = value
                break
        else:
            raise KeyError(f"unexpected key {key}")
    return out


# -- configuration ---------------------------------------------------------------------

def _count(state: dict[str, Any], pattern: str) -> int:
    found = {int(m.group(1)) for k in state if (m := re.match(pattern, k))}
    return max(found) + 1 if found else 0


LANGUAGE_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")


class _Weights(dict):
    """A state dict whose missing key names the weights file and the key."""

    def __missing__(self, key: str) -> Any:
        raise CheckpointError(f"the weights (model.safetensors) have no {key!r}")


def janus_config(config: dict[str, Any], processor: dict[str, Any], state: dict[str, Any], ids: dict[str, int]):
    """transformers' ``JanusConfig`` for DeepSeek's ``config.json`` and the shapes of its weights."""
    from transformers import JanusConfig

    source = "config.json"
    language = dict(need(config, "language_config", source))
    vision, aligner, gen_aligner, gen_head, gen_vision = (
        dict(need(config, part, source)).get("params", {}) for part in
        ("vision_config", "aligner_config", "gen_aligner_config", "gen_head_config", "gen_vision_config"))
    for part, keys, where in ((language, LANGUAGE_KEYS, "language_config"), (aligner, ("n_embed",), "aligner_config"),
                              (gen_aligner, ("n_embed",), "gen_aligner_config"),
                              (gen_head, ("n_embed", "image_token_embed"), "gen_head_config")):
        for key in keys:
            need(part, key, f"config.json {where}")
    for part, params in (("aligner_config", aligner), ("gen_aligner_config", gen_aligner)):
        if params.get("projector_type") != "mlp_gelu":
            raise ValueError(f"{part}.params.projector_type {params.get('projector_type')!r} is not supported "
                             "(Janus-1.3B's is 'mlp_gelu')")
    tower = vision.get("model_name", "")
    if tower not in SIGLIP_HEADS:
        raise ValueError(f"vision_config.params.model_name {tower!r} is not a SigLIP tower DeepSeek's code knows "
                         f"({', '.join(SIGLIP_HEADS)})")
    if vision.get("select_feature", "same") != "same":
        raise ValueError("vision_config.params.select_feature must be 'same' (DeepSeek's SigLIP towers use it)")
    # the tower's sizes as built (DeepSeek keeps only the layers up to select_layer)
    state = _Weights(state)
    width = state[_VISION + "pos_embed"].shape[-1]
    patch = state[_VISION + "patch_embed.proj.weight"].shape[-1]
    layers = _count(state, re.escape(_VISION) + r"blocks\.(\d+)\.")
    mlp_hidden = state[_VISION + "blocks.0.mlp.fc1.weight"].shape[0]
    image_size = int(vision.get("image_size", 384))
    grid = image_size // patch
    tokens = int(processor.get("num_image_tokens", grid * grid))
    if tokens != grid * grid:
        raise ValueError(f"processor_config.json's num_image_tokens {tokens} is not the tower's {grid}x{grid} patches")
    # the VQ model (gen_vision_config names it: "VQ-16"; DeepSeek's vq_model.py holds its sizes)
    vq = "gen_vision_model."
    base = state[vq + "encoder.conv_in.weight"].shape[0]
    levels = _count(state, re.escape(vq) + r"decoder\.conv_blocks\.(\d+)\.")
    multiplier = [state[f"{vq}decoder.conv_blocks.{levels - 1 - level}.res.0.conv2.weight"].shape[0] // base
                  for level in range(levels)]
    res_blocks = _count(state, re.escape(vq) + r"decoder\.conv_blocks\.0\.res\.(\d+)\.") - 1
    codes, code_dim = state[vq + "quantize.embedding.weight"].shape
    if codes != int(gen_vision.get("image_token_size", codes)) or code_dim != int(gen_vision.get("n_embed", code_dim)):
        raise ValueError("gen_vision_config.params disagrees with the VQ codebook in the weights")
    hidden = int(language["hidden_size"])
    if int(gen_aligner["n_embed"]) != hidden or int(gen_head["image_token_embed"]) != int(gen_aligner["n_embed"]):
        raise ValueError("gen_aligner n_embed and gen_head image_token_embed must equal the language model's width")
    text = {
        "model_type": "llama",
        "vocab_size": int(language["vocab_size"]),
        "hidden_size": hidden,
        "intermediate_size": int(language["intermediate_size"]),
        "num_hidden_layers": int(language["num_hidden_layers"]),
        "num_attention_heads": int(language["num_attention_heads"]),
        "num_key_value_heads": int(language.get("num_key_value_heads", language["num_attention_heads"])),
        "max_position_embeddings": int(language.get("max_position_embeddings", 2048)),
        # LlamaConfig's defaults where DeepSeek's language_config says nothing (as its LlamaConfig(**...))
        "rms_norm_eps": float(language.get("rms_norm_eps", 1e-6)),
        "rope_theta": float(language.get("rope_theta", 10000.0)),
        "hidden_act": language.get("hidden_act", "silu"),
        "tie_word_embeddings": False,
        **ids,
    }
    return JanusConfig(
        text_config=text,
        vision_config={
            "hidden_size": int(width), "num_hidden_layers": layers, "num_attention_heads": SIGLIP_HEADS[tower],
            "image_size": image_size, "patch_size": int(patch), "mlp_ratio": mlp_hidden / width,
            "layer_norm_eps": 1e-6, "attention_bias": True, "hidden_act": "gelu",
            "projection_dim": int(aligner["n_embed"]), "depth": int(aligner.get("depth", 1)),
            "num_image_tokens": tokens,
        },
        vq_config={
            "embed_dim": int(code_dim), "num_embeddings": int(codes), "latent_channels": int(
                state[vq + "decoder.conv_in.weight"].shape[1]),
            "base_channels": int(base), "channel_multiplier": multiplier, "num_res_blocks": res_blocks,
            "projection_dim": int(gen_head["image_token_embed"]), "num_hidden_layers": int(gen_aligner.get("depth", 1)),
            "image_token_embed_dim": int(gen_head["n_embed"]), "hidden_act": "gelu",
        },
        image_token_id=ids["image_token_id"],
        tie_word_embeddings=False,
    )


# -- tokenizer, prompts, images --------------------------------------------------------

@dataclass
class DeepSeekChat:
    """DeepSeek's ``VLChatProcessor`` for one checkpoint: sft format, tokens and image preprocessing.

    Prompts are DeepSeek's ``sft_format="deepseek"`` conversation: understanding is
    ``"{system}\\n\\n{user}: <image_placeholder>\\n{question}\\n\\n{assistant}:"`` (roles: :func:`chat_roles`), the tag
    expanded to ``<begin_of_image>`` + ``num_image_tokens`` tags + ``<end_of_image>``; drawing is
    ``"{user}: {prompt}\\n\\n{assistant}:<begin_of_image>"`` (no system prompt), as generation_inference.py.
    """

    tokenizer: Any  # tokenizers.Tokenizer of tokenizer.json
    bos_id: int | None
    eos_id: int
    pad_id: int
    image_id: int
    boi_id: int
    eoi_id: int
    image_tag: str
    boi_tag: str
    num_image_tokens: int
    image_size: int
    min_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    rescale: float
    normalize: bool
    #: tokenizer_config.json's clean_up_tokenization_spaces (LlamaTokenizerFast's default: off)
    cleanup: bool = False
    roles: tuple[str, str] = (USER, ASSISTANT)  # the turn roles (chat_roles)

    @classmethod
    def read(cls, pretrained: str) -> DeepSeekChat:
        from tokenizers import Tokenizer

        processor = read_json(pretrained, "processor_config.json")
        images = read_json(pretrained, "preprocessor_config.json")
        tokenizer_config = read_json(pretrained, "tokenizer_config.json", required=False)
        specials = read_json(pretrained, "special_tokens_map.json", required=False)
        if processor.get("sft_format", "deepseek") != "deepseek" or processor.get("add_special_token", False):
            raise ValueError("processor_config.json: only sft_format 'deepseek' without add_special_token is supported")
        tokenizer_file = repo_file(pretrained, "tokenizer.json")
        if tokenizer_file is None:
            raise CheckpointError(f"{pretrained} has no tokenizer.json (DeepSeek's Janus tokenizer)")
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        image_tag = processor.get("image_tag", "<image_placeholder>")
        if tokenizer.token_to_id(image_tag) is None:  # VLChatProcessor adds it as a special token when missing
            from tokenizers import AddedToken

            tokenizer.add_special_tokens([AddedToken(image_tag, special=True, normalized=False)])

        def token(value: Any) -> str | None:
            return value.get("content") if isinstance(value, dict) else value

        def id_of(text: str | None, what: str) -> int:
            found = tokenizer.token_to_id(text) if text else None
            if found is None:
                raise ValueError(f"the tokenizer has no {what} token {text!r}")
            return int(found)

        bos = token(tokenizer_config.get("bos_token", specials.get("bos_token")))
        eos = token(tokenizer_config.get("eos_token", specials.get("eos_token")))
        boi, eoi = processor.get("image_start_tag", "<begin_of_image>"), processor.get("image_end_tag", "<end_of_image>")
        mean = tuple(images.get("image_mean", (0.48145466, 0.4578275, 0.40821073)))
        return cls(
            tokenizer=tokenizer,
            # LlamaTokenizerFast prepends BOS unless add_bos_token says otherwise
            bos_id=id_of(bos, "bos") if tokenizer_config.get("add_bos_token", True) else None,
            eos_id=id_of(eos, "eos"),
            pad_id=id_of(processor.get("pad_tag", "<｜▁pad▁｜>"), "pad"),  # VLChatProcessor.pad_id: the CFG rows' pad
            image_id=id_of(image_tag, "image"),
            boi_id=id_of(boi, "begin-of-image"),
            eoi_id=id_of(eoi, "end-of-image"),
            image_tag=image_tag,
            boi_tag=boi,
            num_image_tokens=int(processor.get("num_image_tokens", 576)),
            image_size=int(need(images, "image_size", "preprocessor_config.json")),
            min_size=int(images.get("min_size", 14)),
            mean=mean,  # type: ignore[arg-type]
            std=tuple(images.get("image_std", (0.26862954, 0.26130258, 0.27577711))),  # type: ignore[arg-type]
            rescale=float(images.get("rescale_factor", 1 / 255)),
            normalize=bool(images.get("do_normalize", True)),
            cleanup=bool(tokenizer_config.get("clean_up_tokenization_spaces", False)),
            roles=chat_roles(pretrained),
        )

    def ids(self) -> dict[str, int]:
        """The token ids transformers' config needs."""
        return {"bos_token_id": self.bos_id if self.bos_id is not None else self.eos_id, "eos_token_id": self.eos_id,
                "pad_token_id": self.pad_id, "image_token_id": self.image_id}

    def _encode(self, text: str) -> list[int]:
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return ([self.bos_id] if self.bos_id is not None else []) + list(ids)

    def understanding_ids(self, question: str) -> list[int]:
        content = f"{self.image_tag}\n{question}".strip()
        user, assistant = self.roles
        sft = f"{SYSTEM_PROMPT}\n\n{user}: {content}\n\n{assistant}:".strip()
        out: list[int] = []
        for token in self._encode(sft):
            if token == self.image_id:
                out += [self.boi_id] + [self.image_id] * self.num_image_tokens + [self.eoi_id]
            else:
                out.append(token)
        return out

    def generation_ids(self, prompt: str) -> list[int]:
        user, assistant = self.roles
        sft = f"{user}: {prompt.strip()}\n\n{assistant}:".strip()
        return self._encode(sft + self.boi_tag)

    def decode(self, ids: list[int]) -> str:
        # as LlamaTokenizerFast.decode under DeepSeek's transformers 4.x
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return authors_text(text, {"clean_up_tokenization_spaces": self.cleanup}, default=False)

    def pixels(self, image: Image.Image) -> np.ndarray:
        """(3, S, S) float32 as DeepSeek's VLMImageProcessor: longest side to S (bicubic), padded
        to a square of the mean colour, rescaled and normalised."""
        image = image.convert("RGB")
        width, height = image.size
        longest = max(width, height)
        size = (max(int(width / longest * self.image_size), self.min_size),
                max(int(height / longest * self.image_size), self.min_size))
        image = image.resize(size, Image.BICUBIC)
        side = max(size)
        if size[0] != size[1]:
            square = Image.new("RGB", (side, side), tuple(int(x * 255) for x in self.mean))
            square.paste(image, ((side - size[0]) // 2, (side - size[1]) // 2))
            image = square
        array = (np.asarray(image).transpose(2, 0, 1).astype(np.float64) * self.rescale).astype(np.float32)
        if self.normalize:
            mean = np.asarray(self.mean, dtype=np.float32)[:, None, None]
            std = np.asarray(self.std, dtype=np.float32)[:, None, None]
            array = (array - mean) / std
        return array


def load_deepseek(pretrained: str, torch: Any, dtype: Any, device: Any) -> tuple[Any, DeepSeekChat]:
    """transformers' Janus model (on ``device``, in ``dtype``, eval mode) and the chat of a DeepSeek-layout checkpoint."""
    from transformers import GenerationConfig, JanusForConditionalGeneration
    from transformers.initialization import no_init_weights

    try:
        config = read_json(pretrained, "config.json")
        chat = DeepSeekChat.read(pretrained)
        state = _state_dict(pretrained)
        janus = janus_config(config, read_json(pretrained, "processor_config.json"), state, chat.ids())
    except (OSError, ValueError, KeyError) as exc:
        # CheckpointError names the file and key; a bare KeyError would print only the key
        what = str(exc) if isinstance(exc, CheckpointError) else f"{type(exc).__name__}: {exc}"
        raise GeneratorConfigError(f"unified.pretrained: {pretrained!r} is not a readable DeepSeek-format Janus "
                                   f"checkpoint: {what}") from exc
    with no_init_weights(), torch.device(device):  # every weight is loaded next
        model = JanusForConditionalGeneration._from_config(janus, dtype=dtype)
    model.load_state_dict(map_state_dict(state), strict=True)
    model.generation_config = GenerationConfig(
        bos_token_id=janus.text_config.bos_token_id, eos_token_id=chat.eos_id, pad_token_id=chat.pad_id,
        generation_kwargs={"boi_token_id": chat.boi_id},  # image mode reads it from here
    )
    return model.eval(), chat


def real_config():
    """transformers' ``JanusConfig`` at deepseek-ai/Janus-1.3B's sizes, for memory tables and GPU checks
    without its download: its config.json (LLaMA 2048 wide, 24 layers, 16 heads, 5632 MLP, 102400
    tokens; mlp_gelu aligners of depth 2; 16384 codes of 8), the tower it names
    (``siglip_large_patch16_384``: 1024 wide, 24 layers, 16 heads, patch 16, MLP ratio 4, 384 px)
    and ``VQ-16`` (vq_model.py: base 128, ``ch_mult`` [1, 1, 2, 2, 4], 2 blocks, ``z_channels`` 256)."""
    from transformers import JanusConfig

    return JanusConfig(
        text_config={"model_type": "llama", "vocab_size": 102400, "hidden_size": 2048, "intermediate_size": 5632,
                     "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
                     "max_position_embeddings": 16384, "rms_norm_eps": 1e-6, "tie_word_embeddings": False},
        vision_config={"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "image_size": 384,
                       "patch_size": 16, "mlp_ratio": 4.0, "projection_dim": 2048, "depth": 2, "num_image_tokens": 576},
        vq_config={"embed_dim": 8, "num_embeddings": 16384, "latent_channels": 256, "base_channels": 128,
                   "channel_multiplier": [1, 1, 2, 2, 4], "num_res_blocks": 2, "projection_dim": 2048,
                   "num_hidden_layers": 2, "image_token_embed_dim": 2048},
        tie_word_embeddings=False,
    )
