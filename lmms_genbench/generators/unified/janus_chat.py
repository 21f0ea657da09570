"""DeepSeek's ``VLChatProcessor`` for a Janus checkpoint in DeepSeek's own layout: its tokenizer,
prompt format (the turn roles included) and image preprocessing (read by :mod:`.janus_deepseek`).

DeepSeek's processor takes the turn roles from its caller; DeepSeek's README prompts Janus-1.3B
with ``User``/``Assistant`` and Janus-Pro with ``<|User|>``/``<|Assistant|>``. The published
folders tell them apart by content: Janus-Pro's ``special_tokens_map.json`` (deepseek-ai/Janus-Pro-1B
and -7B) lists ``<|User|>`` and ``<|Assistant|>`` among its ``additional_special_tokens``;
Janus-1.3B's lists no additional tokens (bos, eos and pad only). :func:`chat_roles` reads that,
or ``unified.chat_format`` where it is set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from .common import CheckpointError, authors_text, need, repo_file

__all__ = ["CHAT_FORMATS", "CHAT_FORMAT_CHOICES", "DeepSeekChat", "SYSTEM_PROMPT", "chat_roles", "read_json"]

#: VLChatProcessor.system_prompt (janus/models/processing_vlm.py), put before every understanding turn
SYSTEM_PROMPT = ("You are a helpful language and vision assistant. You are able to understand the visual content "
                 "that the user provides, and assist the user with a variety of tasks using natural language.")
#: ``unified.chat_format``'s values -> the turn roles: Janus-1.3B's (README "Janus" section, inference.py,
#: generation_inference.py) and Janus-Pro's (README "Janus-Pro" section; the ``deepseek`` template's roles
#: in janus/utils/conversation.py, separators "\n\n" and ": ")
CHAT_FORMATS = {"janus": ("User", "Assistant"), "janus_pro": ("<|User|>", "<|Assistant|>")}
#: ``auto``: the roles read from the folder (:func:`chat_roles`)
CHAT_FORMAT_CHOICES = ("auto", *CHAT_FORMATS)


def read_json(pretrained: str, filename: str, required: bool = True, missing: Any = ...) -> Any:
    """``filename`` of checkpoint ``pretrained`` as JSON; a missing file is a :class:`CheckpointError`
    where ``required``, else ``missing`` (default: ``{}``)."""
    path = repo_file(pretrained, filename)
    if path is None:
        if required:
            raise CheckpointError(f"{pretrained} has no {filename}")
        return {} if missing is ... else missing
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CheckpointError(f"{path} is not JSON: {exc}") from None


def _token(value: Any) -> str | None:
    return value.get("content") if isinstance(value, dict) else value


def chat_roles(pretrained: str, specials: dict[str, Any] | None, chat_format: str = "auto") -> tuple[str, str]:
    """The turn roles of checkpoint ``pretrained``: ``chat_format``'s, or (``auto``) Janus-Pro's where
    its ``special_tokens_map.json`` (``specials``; None: the folder has none) lists both Pro roles,
    Janus-1.3B's where it lists neither. Raises :class:`CheckpointError` where the folder cannot say."""
    if chat_format != "auto":
        return CHAT_FORMATS[chat_format]
    fix = "set unified.chat_format=janus (roles User/Assistant) or janus_pro (<|User|>/<|Assistant|>)"
    if specials is None:
        raise CheckpointError(f"{pretrained} has no special_tokens_map.json, which tells Janus-1.3B from Janus-Pro; {fix}")
    listed = {_token(t) for t in specials.get("additional_special_tokens") or []}
    pro = [role in listed for role in CHAT_FORMATS["janus_pro"]]
    if all(pro):
        return CHAT_FORMATS["janus_pro"]
    if not any(pro):
        return CHAT_FORMATS["janus"]
    raise CheckpointError(f"{pretrained}/special_tokens_map.json lists only one of <|User|>, <|Assistant|>; {fix}")


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
    roles: tuple[str, str] = CHAT_FORMATS["janus"]  # the turn roles (chat_roles)

    @classmethod
    def read(cls, pretrained: str, chat_format: str = "auto") -> DeepSeekChat:
        """The chat of checkpoint ``pretrained``; ``chat_format`` as :func:`chat_roles`."""
        from tokenizers import AddedToken, Tokenizer

        processor = read_json(pretrained, "processor_config.json")
        images = read_json(pretrained, "preprocessor_config.json")
        tokenizer_config = read_json(pretrained, "tokenizer_config.json", required=False)
        specials = read_json(pretrained, "special_tokens_map.json", required=False, missing=None)
        roles = chat_roles(pretrained, specials, chat_format)
        specials = specials or {}
        if processor.get("sft_format", "deepseek") != "deepseek" or processor.get("add_special_token", False):
            raise ValueError("processor_config.json: only sft_format 'deepseek' without add_special_token is supported")
        tokenizer_file = repo_file(pretrained, "tokenizer.json")
        if tokenizer_file is None:
            raise CheckpointError(f"{pretrained} has no tokenizer.json (DeepSeek's Janus tokenizer)")
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        # as LlamaTokenizerFast.from_pretrained: special_tokens_map.json's additional tokens that
        # tokenizer.json lacks are added, in the map's order (then VLChatProcessor adds its image tag)
        image_tag = processor.get("image_tag", "<image_placeholder>")
        for name in [_token(t) for t in specials.get("additional_special_tokens") or []] + [image_tag]:
            if name and tokenizer.token_to_id(name) is None:
                tokenizer.add_special_tokens([AddedToken(name, special=True, normalized=False)])
        token = _token

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
            roles=roles,
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
