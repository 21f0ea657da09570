"""A local checkpoint folder read the way its loader reads it, before any weight loads.

Each loader that takes a folder (a describer through :func:`lmms_genbench.host.build_model`, the
diffusers generator through ``generators/pipeline_folder.py``, the unified models through
``generators/unified/folders.py``) calls these first, and ``lmms-genbench check`` calls the
same functions, so the check lists exactly what the run would stop on, in the same words. They
raise ``FileNotFoundError`` (a file or folder the loader reads is not there) or ``ValueError``
(it is there but unreadable, or names a class that does not exist); they read small JSON files
only, never a weight.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["PROCESSOR_FILES", "TOKENIZER_FILES", "checkpoint_folder", "is_path", "read_config", "read_transformers_folder",
           "require_any", "weight_files"]

#: the files one of which a transformers tokenizer is read from (fast, sentencepiece, BPE, WordPiece)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model",
                   "sentencepiece.bpe.model")
#: the files one of which an image processor (or a whole processor) is read from
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json")


def is_path(value: Any) -> bool:
    """Whether a weights argument names a local path rather than a Hub id: it exists on disk, or it
    is written as a path (``/``, ``.``, ``~``)."""
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        return False
    text = os.fspath(value)
    return os.path.exists(os.path.expanduser(text)) or text.startswith(("/", ".", "~"))


def checkpoint_folder(value: str | os.PathLike) -> Path:
    """``value`` as an existing folder.

    Raises:
        FileNotFoundError: it does not exist, or it is a file.
    """
    folder = Path(os.path.expanduser(os.fspath(value)))
    if not folder.exists():
        raise FileNotFoundError(f"{value} does not exist")
    if not folder.is_dir():
        raise FileNotFoundError(f"{value} is a file, not a checkpoint folder")
    return folder


def read_config(folder: Path, name: str = "config.json") -> dict[str, Any]:
    """``folder/name`` as a JSON object.

    Raises:
        FileNotFoundError: there is no such file. ValueError: it is not a JSON object.
    """
    path = folder / name
    if not path.is_file():
        raise FileNotFoundError(f"{folder} has no {name}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path} is not readable JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a JSON object")
    return data


def require_any(folder: Path, names: Sequence[str], what: str) -> Path:
    """The first of ``names`` that ``folder`` holds.

    Raises:
        FileNotFoundError: it holds none of them (``what``: what they are, for the message).
    """
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"{folder} has no {what} ({' or '.join(names)})")


def weight_files(folder: Path, stems: Sequence[str] = ("model", "pytorch_model")) -> list[Path]:
    """The weight files a ``from_pretrained`` of ``folder`` reads: ``<stem>.safetensors`` or
    ``<stem>.bin`` (a variant such as ``<stem>.fp16.safetensors`` too), or every shard its
    ``<stem>.safetensors.index.json`` names.

    Raises:
        FileNotFoundError: there is none, or an index names a shard the folder lacks.
        ValueError: an index that is not JSON with a ``weight_map``.
    """
    for stem in stems:
        for suffix in (".safetensors", ".bin"):
            index = folder / f"{stem}{suffix}.index.json"
            if index.is_file():
                shards = sorted(set(read_config(folder, index.name).get("weight_map", {}).values()))
                if not shards:
                    raise ValueError(f"{index} has no weight_map")
                missing = [s for s in shards if not (folder / s).is_file()]
                if missing:
                    raise FileNotFoundError(f"{folder} lacks {', '.join(missing[:3])}, which {index.name} names")
                return [folder / s for s in shards]
            whole = folder / f"{stem}{suffix}"
            if whole.is_file():
                return [whole]
            variants = sorted(folder.glob(f"{stem}.*{suffix}"))
            if variants:
                return variants
    names = [f"{stem}{suffix}" for stem in stems for suffix in (".safetensors", ".bin")]
    raise FileNotFoundError(f"{folder} has no weights ({', '.join(names)} or a sharded index of them)")


def read_transformers_folder(value: str | os.PathLike, *, weights: bool = True, tokenizer: bool = True,
                             processor: bool = False, known_class: bool = True) -> dict[str, Any]:
    """A transformers checkpoint folder as ``from_pretrained`` reads it: ``config.json`` (its
    ``model_type`` known to this transformers, read by ``AutoConfig`` as the loaders do, unless it
    brings its own code through ``auto_map``), its weight files, and where the loader reads them
    its tokenizer and processor files. Returns the config.

    Raises:
        FileNotFoundError, ValueError: see the module docstring.
    """
    folder = checkpoint_folder(value)
    config = read_config(folder)
    if known_class and "auto_map" not in config:
        import transformers

        try:
            transformers.AutoConfig.from_pretrained(str(folder))
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"{folder}/config.json does not read as a transformers config: {exc}") from exc
    if weights:
        weight_files(folder)
    if tokenizer:
        require_any(folder, TOKENIZER_FILES, "tokenizer files")
    if processor:
        require_any(folder, PROCESSOR_FILES, "image processor config")
    return config
