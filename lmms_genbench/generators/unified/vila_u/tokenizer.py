"""VILA-U's text tokenizer: LLaMA's slow SentencePiece tokenizer with ``legacy=False``.

The authors load ``llm/`` with ``AutoTokenizer.from_pretrained(..., use_fast=False, legacy=False)``
(``vila_u/model/language_model/builder.py``), i.e. transformers' slow ``LlamaTokenizer``. Its
rules, reproduced here on the ``sentencepiece`` library alone:

* the SentencePiece model is loaded with its dummy prefix switched off, and every call
  prepends the ``▁`` itself (so a chunk tokenised on its own keeps its leading space);
* text is split on the added tokens (``<s>``, ``</s>``, ``<im_start>``...) first; a piece that
  starts with a space is encoded behind ``<unk>`` whose pieces are then dropped;
* ``decode`` drops the special ids, strips the prefix ``▁`` and lets SentencePiece join the rest.

Transformers 5 would convert ``tokenizer.model`` to a fast tokenizer through protobuf, which
the pinned protobuf/sentencepiece pair cannot read; this class needs no protobuf.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ....core.deps import require
from ..common import authors_text

SPIECE_UNDERLINE = "\u2581"


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _fields(data: bytes) -> list[tuple[int, int, bytes]]:
    """Protobuf wire fields ``(number, wire type, raw bytes including the key)`` of one message."""
    out, pos = [], 0
    while pos < len(data):
        start = pos
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            pos += size
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"tokenizer.model: unsupported protobuf wire type {wire}")
        out.append((number, wire, data[start:pos]))
    return out


def without_dummy_prefix(model: bytes) -> bytes:
    """The serialized SentencePiece ``ModelProto`` with ``normalizer_spec.add_dummy_prefix`` false
    (field 3 of field 3), as transformers' slow LlamaTokenizer sets it for ``legacy=False``."""
    out = bytearray()
    for number, wire, raw in _fields(model):
        if number == 3 and wire == 2:  # normalizer_spec
            key_end = _varint(raw, 0)[1]
            size, body_start = _varint(raw, key_end)
            body = raw[body_start:]
            kept = b"".join(r for n, _, r in _fields(body) if n != 3)
            body = kept + bytes([3 << 3 | 0, 0])  # add_dummy_prefix = false
            raw = raw[:key_end] + _encode_varint(len(body)) + body
        out += raw
    return bytes(out)


class LlamaSlowTokenizer:
    """The tokenizer files of ``llm/`` (``tokenizer.model``, ``tokenizer_config.json``,
    ``added_tokens.json``, ``special_tokens_map.json``) read as the authors' slow tokenizer."""

    def __init__(self, folder: str | Path) -> None:
        spm = require("sentencepiece", "the vila_u unified model's tokenizer")
        folder = Path(folder)
        self.sp = spm.SentencePieceProcessor()
        if not (folder / "tokenizer.model").is_file():
            from ..common import CheckpointError

            raise CheckpointError(f"{folder} has no tokenizer.model (the LLaMA SentencePiece model)")
        self.sp.LoadFromSerializedProto(without_dummy_prefix((folder / "tokenizer.model").read_bytes()))
        config = _read_json(folder / "tokenizer_config.json")
        specials = _read_json(folder / "special_tokens_map.json")

        def token(name: str, default: str) -> str:
            value = config.get(name) or specials.get(name) or default
            return value["content"] if isinstance(value, dict) else str(value)

        self.unk_token, self.bos_token, self.eos_token = token("unk_token", "<unk>"), token("bos_token", "<s>"), \
            token("eos_token", "</s>")
        self.add_bos = bool(config.get("add_bos_token", True))
        #: LlamaTokenizer's (4.36.2) default: off
        self.cleanup = bool(config.get("clean_up_tokenization_spaces", False))
        added: dict[str, int] = {}
        for ident, entry in (config.get("added_tokens_decoder") or {}).items():
            added[entry["content"]] = int(ident)
        added.update({k: int(v) for k, v in _read_json(folder / "added_tokens.json").items()})
        self.added = {k: v for k, v in added.items() if v >= self.sp.GetPieceSize()}
        self.special_ids = {self.piece_id(t) for t in (self.unk_token, self.bos_token, self.eos_token)}
        self.special_ids |= set(self.added.values())  # the authors add them with special_tokens=True
        self._specials = sorted({self.unk_token, self.bos_token, self.eos_token, *self.added}, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(re.escape(t) for t in self._specials) + ")")
        self._unk_length = len(self.sp.EncodeAsPieces(self.unk_token))
        self._by_id = {v: k for k, v in self.added.items()}

    def __len__(self) -> int:
        return self.sp.GetPieceSize() + len(self.added)

    @property
    def bos_token_id(self) -> int:
        return self.piece_id(self.bos_token)

    @property
    def eos_token_id(self) -> int:
        return self.piece_id(self.eos_token)

    def piece_id(self, token: str) -> int:
        """The id of ``token`` (an added token or a SentencePiece piece)."""
        if token in self.added:
            return self.added[token]
        ident = self.sp.PieceToId(token)
        if self.sp.IdToPiece(ident) != token:
            raise KeyError(f"token {token!r} is not in the vocabulary")
        return ident

    def tokenize(self, text: str) -> list[str]:
        """The pieces of ``text`` (no BOS), as ``LlamaTokenizer(legacy=False).tokenize``."""
        if not text:
            return []
        text = SPIECE_UNDERLINE + text.replace(SPIECE_UNDERLINE, " ")
        pieces: list[str] = []
        for chunk in self._split.split(text):
            if not chunk:
                continue
            if chunk in self._specials:
                pieces.append(chunk)
            elif chunk.startswith((SPIECE_UNDERLINE, " ")):
                pieces.extend(self.sp.EncodeAsPieces(self.unk_token + chunk)[self._unk_length:])
            else:
                pieces.extend(self.sp.EncodeAsPieces(chunk))
        if len(pieces) > 1 and pieces[0] == SPIECE_UNDERLINE and pieces[1] in self._specials:
            pieces = pieces[1:]
        return pieces

    def encode(self, text: str) -> list[int]:
        """``tokenizer(text).input_ids``: BOS, then the pieces' ids."""
        ids = [self.added[p] if p in self.added else self.sp.PieceToId(p) for p in self.tokenize(text)]
        return ([self.bos_token_id] if self.add_bos else []) + ids

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """``tokenizer.decode(ids, skip_special_tokens=True)`` of the slow tokenizer."""
        # ids past the vocabulary (an embedding table padded beyond it) have no text: skipped
        pieces = [self._by_id[i] if i in self._by_id else self.sp.IdToPiece(i) for i in map(int, ids)
                  if 0 <= i < len(self) and not (skip_special_tokens and i in self.special_ids)]
        if not pieces:
            return ""
        if pieces[0].startswith(SPIECE_UNDERLINE):
            pieces[0] = pieces[0][1:]
        out, run = "", []
        for piece in pieces:
            if piece in self._specials:
                out += self.sp.DecodePieces(run) + piece
                run = []
            else:
                run.append(piece)
        text = out + self.sp.DecodePieces(run)
        return authors_text(text, {"clean_up_tokenization_spaces": self.cleanup}, default=False)


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
