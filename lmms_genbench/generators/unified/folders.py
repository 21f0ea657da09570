"""The local checkpoint folders a native unified model reads, checked as its loader reads them.

:func:`read_unified_folders` runs before the model is built (:func:`.registry.build_unified`)
and in ``lmms-genbench check``, so both stop on the same folder with the same line. Each
reader uses its model's own loading functions where they read files without weights
(BAGEL's ``locate``, BLIP3-o's ``read_config``, ``weight_files`` and ``chat_template``,
VILA-U's ``resolve_folder`` and ``part_folder``, Janus's layout test) and
:mod:`lmms_genbench.core.checkpoint_folders` for the transformers parts. Only arguments that name a
local path are read; Hub ids are the Hub's (the preflight asks it).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

from ...core.failures import GeneratorConfigError
from ...core.checkpoint_folders import (PROCESSOR_FILES, TOKENIZER_FILES, checkpoint_folder, is_path, read_config,
                                 read_transformers_folder, require_any, weight_files)

__all__ = ["read_unified_folders"]


def _module(name: str):
    """A model's module, imported by name as the registry imports it: only for that model."""
    return importlib.import_module(name, __package__)


def _janus(pretrained: Any = None, chat_format: Any = "auto", **_: Any) -> None:
    if not is_path(pretrained):
        return
    deepseek, chat, janus = _module(".janus_deepseek"), _module(".janus_chat"), _module(".janus")
    folder = str(checkpoint_folder(pretrained))
    layout = janus.read_layout(folder)  # the loader's own layout test and its messages
    janus.check_chat_format(folder, chat_format, layout)
    if layout:
        for name in ("processor_config.json", "preprocessor_config.json"):  # what DeepSeekChat.read requires
            deepseek.read_json(folder, name)
        if chat_format in chat.CHAT_FORMAT_CHOICES:  # the turn roles, as DeepSeekChat.read finds them
            chat.chat_roles(folder, deepseek.read_json(folder, "special_tokens_map.json", False, None), chat_format)
        deepseek.weight_paths(folder)
    else:  # transformers' JanusForConditionalGeneration and AutoProcessor
        read_transformers_folder(folder, tokenizer=True, processor=True)


def _showo(pretrained: Any = None, vq_model: Any = None, tokenizer: Any = None, **_: Any) -> None:
    loading = _module(".showo.loading")  # fetch: a folder's file, or "<folder> has no <file>"
    weights_file = _module(".showo.magvit").WEIGHTS_FILE
    if is_path(pretrained):  # config.json and the one weights file (loading.read_json, read_state)
        folder = str(checkpoint_folder(pretrained))
        loading.fetch(folder, "config.json")
        loading.fetch(folder, weights_file)
    if is_path(vq_model):
        loading.fetch(str(checkpoint_folder(vq_model)), weights_file)
    if is_path(tokenizer):  # Phi-1.5's config.json and tokenizer (AutoConfig, AutoTokenizer)
        read_transformers_folder(tokenizer, weights=False)


def _vila_u(pretrained: Any = None, **_: Any) -> None:
    vila_u = _module(".vila_u.checkpoint")
    if not is_path(pretrained):
        return
    checkpoint_folder(pretrained)
    folder = vila_u.resolve_folder(pretrained)
    config = vila_u.read_config(folder)  # names llm/ given for the whole checkpoint, as loading does
    for part in vila_u.PARTS:
        sub = vila_u.part_folder(folder, config, part)
        if not sub.is_dir():
            raise FileNotFoundError(f"{folder} has no {part}/ folder (the VILA-U layout: llm/, vision_tower/, "
                                    "mm_projector/)")
        read_config(sub)
        weight_files(sub)
    require_any(vila_u.part_folder(folder, config, "llm"), TOKENIZER_FILES, "tokenizer files")


def _blip3o(pretrained: Any = None, processor: Any = None, **_: Any) -> None:
    checkpoint = _module(".blip3o.checkpoint")
    if is_path(pretrained):
        folder = checkpoint_folder(pretrained)
        checkpoint.read_config(folder)
        missing = [p.name for p in checkpoint.weight_files(folder) if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"{folder} has no weights: it lacks {', '.join(missing[:3])}")
        require_any(folder, TOKENIZER_FILES, "tokenizer files")
    if is_path(processor):
        require_any(checkpoint_folder(processor), PROCESSOR_FILES, "image processor config")  # type: ignore[arg-type]
        checkpoint.chat_template(str(processor))


def _bagel(pretrained: Any = None, **_: Any) -> None:
    locate = _module(".bagel.checkpoint").locate
    if is_path(pretrained):
        locate(str(checkpoint_folder(pretrained)))


#: the arguments that name a checkpoint folder or a hub id (Show-o reads three, BLIP3-o two)
FOLDER_ARGS = ("pretrained", "vq_model", "tokenizer", "processor")
#: each native unified model's reader of its local folders
READERS: dict[str, Callable[..., None]] = {"janus": _janus, "showo": _showo, "vila_u": _vila_u, "blip3o": _blip3o,
                                          "bagel": _bagel}


def read_unified_folders(name: str, kwargs: dict[str, Any]) -> None:
    """Every local folder unified model ``name`` reads with ``kwargs``, read as its loader reads it;
    nothing for a Hub id, a model without a reader or an unknown name (building says why).

    Raises:
        GeneratorConfigError: what the loader would stop on, naming the file (the reading's
            ``FileNotFoundError`` or ``ValueError`` is its cause).
    """
    reader = READERS.get(name.strip().lower()) if isinstance(name, str) else None
    if reader is None:
        return
    check_source = _module(".common").check_source
    try:  # a mistyped local path is a missing folder, as the loader says, not an invalid hub id
        for arg in FOLDER_ARGS:
            if isinstance(kwargs.get(arg), str) and kwargs[arg]:
                check_source(f"unified.{arg}", kwargs[arg])
    except ValueError as exc:  # its message names the argument
        raise GeneratorConfigError(str(exc)) from exc
    try:
        reader(**{k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in kwargs.items()})
    except (OSError, ValueError) as exc:  # the model cannot load at all, as its constructor would say
        raise GeneratorConfigError(f"unified.{_argument(exc, kwargs)}: {exc}") from exc


def _argument(exc: BaseException, kwargs: dict[str, Any]) -> str:
    """The argument whose folder ``exc`` names (Show-o reads three), else ``pretrained``."""
    text = str(exc)
    named = [k for k, v in kwargs.items() if isinstance(v, (str, os.PathLike)) and os.fspath(v) and os.fspath(v) in text]
    return max(named, key=lambda k: len(os.fspath(kwargs[k])), default="pretrained")
