"""What the unified models share: argument checks, naming, decoding settings, seeds, memory.

Each model (:mod:`.janus`, :mod:`.showo`, :mod:`.vila_u`, :mod:`.blip3o`, :mod:`.bagel`) keeps
its own arguments, defaults and messages; the steps they all take the same way live here once,
so a fix to one (a stop string, a seed check) reaches every model.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ...core.args import as_float, as_int
from ...core.checkpoints import checkpoint_keys, is_local_folder, recorded_checkpoints
from ...core.deps import require
from ...core.keys import generator_name, name_record
from ..common import check_device, resolve_dtype
from ..lazy import GeneratorPlan
from .arguments import Arguments
from .base import run_isolated

#: the line of a model's docstring that :attr:`UnifiedCommon.ARGUMENTS` replaces with its Args section
ARGS_LINE = "    Args: see ``ARGUMENTS``."

__all__ = ["CLEANUP", "CheckpointError", "UnifiedCommon", "authors_text", "check_source", "count", "cut", "hf_decoding", "need", "number",
           "plain_decoding", "repo_file", "stop_strings"]


class CheckpointError(ValueError):
    """A checkpoint that cannot be read as the model's: the message names the file and the key or
    file that is missing or wrong (each model's loader wraps it in its one-line load error)."""


def need(mapping: Any, key: str, source: str) -> Any:
    """``mapping[key]``; a missing key is a :class:`CheckpointError` naming ``source`` (the file)."""
    if not isinstance(mapping, dict):
        raise CheckpointError(f"{source} is not a JSON object")
    if key not in mapping:
        raise CheckpointError(f"{source} has no {key!r}")
    return mapping[key]


def check_source(arg: str, value: str) -> None:
    """``value`` of argument ``arg`` (a hub id or a local folder) checked before any download: what
    can only be a local path (absolute, ``./``, ``~``, more than one ``/``, or under a folder that
    exists here) must be a folder, so a mistyped path is reported as a missing folder rather than
    by the Hub client as an invalid repository id."""
    if os.path.isdir(value):
        return
    if os.path.exists(value):
        raise CheckpointError(f"{arg}: {value!r} is a file; give the checkpoint's folder (or a hub id)")
    head = value.split("/", 1)[0]
    local = (os.path.isabs(value) or value.startswith((".", "~")) or "\\" in value or value.count("/") > 1
             or ("/" in value and os.path.isdir(head)))
    if local:
        raise CheckpointError(f"{arg}: no such folder {value!r} (a hub id is <owner>/<name>)")


def number(arg: str, value: Any, minimum: float = 0.0) -> float:
    """``value`` as a float of at least ``minimum`` (the message names ``arg``)."""
    return float(as_float(arg, value, minimum=minimum))  # type: ignore[arg-type]


def count(arg: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an int of at least ``minimum`` (the message names ``arg``)."""
    return int(as_int(arg, value, minimum=minimum))  # type: ignore[arg-type]


class UnifiedCommon:
    """The members every unified model has in the same form; ``family`` names the model type
    (``unified=<family>``): it starts the artifact name and the messages."""

    family: ClassVar[str]
    name: str
    pretrained: str
    batch_size: int

    #: the model's arguments (:mod:`.arguments`): the constructor's checks, ``plan``, the
    #: signature, the docstring's Args and docs/support.md's defaults all read it
    ARGUMENTS: ClassVar[Arguments]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table = cls.__dict__.get("ARGUMENTS")
        if table is None:
            return
        cls.family = table.family
        if "__init__" in cls.__dict__:  # inspect.signature(cls) shows the table's arguments
            cls.__dict__["__init__"].__signature__ = table.signature()
        if cls.__doc__ and ARGS_LINE in cls.__doc__:
            cls.__doc__ = cls.__doc__.replace(ARGS_LINE, table.docstring())

    @classmethod
    def plan(cls, *args: Any, **kwargs: Any) -> GeneratorPlan:
        """Name and batch size, every argument and the device checked, no weights loaded
        (:mod:`lmms_genbench.generators.lazy`), through the same ``_check`` the constructor runs first."""
        probe = cls.__new__(cls)
        probe._check(*args, **kwargs)
        return GeneratorPlan(probe.name, probe.batch_size, probe.legacy_names, identity=probe.identity)

    def _check(self, *args: Any, **kwargs: Any) -> None:
        """Every argument checked against :attr:`ARGUMENTS` (defaults, then the preset's values,
        then those given), set as attributes, and the name built."""
        table = self.ARGUMENTS
        values = table.resolve(table.given(args, kwargs))
        for arg in table.args:
            if arg.attr is not None:
                setattr(self, arg.attr or arg.name, values[arg.name])
        self._settle(values["dtype"], self._settings(values))

    def _settings(self, values: dict[str, Any]) -> dict[str, Any]:
        """The settings besides ``pretrained`` and ``dtype`` that name the model (its keyed arguments)."""
        return {arg.key or arg.name: values[arg.name] for arg in self.ARGUMENTS.args
                if arg.key is not None and not (arg.quiet_default and values[arg.name] == arg.default)}

    def _settle(self, dtype_choice: str, settings: dict[str, Any]) -> None:
        """torch imported, the device checked, the dtype resolved and the name built from
        ``pretrained``, ``dtype`` and ``settings`` (every other setting that changes an output)."""
        torch = self._torch = require("torch", f"the {self.family} unified model")
        self._device = check_device(torch, self.device)
        self.dtype = self._resolve_dtype(dtype_choice)
        # a local folder reads best by its own name; the hash still holds the full path
        label = os.path.basename(os.path.normpath(self.pretrained)) if os.path.isdir(self.pretrained) else self.pretrained
        key = {"pretrained": self.pretrained, "dtype": self.dtype, **settings}
        # every checkpoint it reads (a folder by its bytes' digest, a Hub id by its cached commit),
        # so weights changed in place, or a new revision, name a new folder
        sources = {arg: value for arg, value in key.items()
                   if arg == "pretrained" or isinstance(value, str) and ("/" in value or is_local_folder(value))}
        weights = checkpoint_keys(sources)
        self.name = generator_name(self.family, label, {**key, "weights": weights} if weights else key)
        #: the name before the weights were part of it: a store written so is adopted (store.identity.adopt_folder)
        self.legacy_names = (generator_name(self.family, label, key),) if weights else ()
        #: what made the name, written beside the store's folder (store/identity.py)
        self.identity = {**name_record(self.family, label, {**key, "weights": weights} if weights else key),
                         "checkpoints": recorded_checkpoints(sources, weights)}

    def _resolve_dtype(self, choice: str) -> str:
        """The dtype's name (``auto`` made concrete for the device); a model whose parts run in
        several dtypes overrides it (blip3o) and names them all."""
        return resolve_dtype(self._torch, choice, self._device, None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, device={self.device!r})"

    def _isolated(self, call: Callable[[list[Any]], list[Any]], items: Sequence[Any], what: str) -> list[Any]:
        """:func:`.base.run_isolated` in chunks of ``batch_size``, memory freed after a failed chunk."""
        return run_isolated(call, list(items), self.batch_size, f"{self.family} {what}", self._free_memory)

    def _seeded(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[tuple[str, int]]:
        """``(prompt, seed)`` pairs; a count mismatch is the caller's bug, so it raises."""
        prompts, seeds = list(prompts), [int(s) for s in seeds]
        if len(prompts) != len(seeds):
            raise ValueError(f"generate: expected one seed per prompt; got {len(prompts)} prompts and {len(seeds)} seeds")
        return list(zip(prompts, seeds))

    def _free_memory(self) -> None:
        # after an out-of-memory batch the cached blocks would fail the retries too
        if self._torch.cuda.is_available():
            self._torch.cuda.empty_cache()


def stop_strings(gen_kwargs: dict[str, Any]) -> list[str]:
    """The task's ``until`` as a list of strings."""
    until = gen_kwargs.get("until") or []
    return [until] if isinstance(until, str) else [str(u) for u in until]


def cut(text: str, until: list[str]) -> str:
    """``text`` up to the first stop string, stripped."""
    for stop in until:
        if stop and stop in text:
            text = text.split(stop, 1)[0]
    return text.strip()


#: transformers 4.x's ``PreTrainedTokenizerBase.clean_up_tokenization`` (the same from 4.36.2 to
#: 4.51.3, the authors' pins), applied by their ``decode`` when the tokenizer's
#: ``clean_up_tokenization_spaces`` is on; transformers 5 skips it for byte-level BPE tokenizers
CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
           (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def authors_text(text: str, config: Any, default: bool) -> str:
    """Decoded ``text`` as the authors' transformers 4.x returns it: cleaned of the spaces before
    punctuation (:data:`CLEANUP`) where the tokenizer config (``tokenizer_config.json``, or a
    tokenizer's ``init_kwargs``) sets ``clean_up_tokenization_spaces``, else where ``default`` (that
    version's default for that tokenizer class) is on."""
    setting = (config or {}).get("clean_up_tokenization_spaces")
    if not (default if setting is None else bool(setting)):
        return text
    for before, after in CLEANUP:
        text = text.replace(before, after)
    return text


def hf_decoding(gen_kwargs: dict[str, Any], temperature: float, max_new_tokens: int,
                top_p: float | None = None) -> tuple[dict[str, Any], list[str]]:
    """The task's ``generation_kwargs`` as transformers ``generate`` arguments, plus its stop strings.

    ``temperature``, ``max_new_tokens`` and ``top_p`` are the model's own where the task sets none
    (no ``top_p``: none is passed unless the task gives one).
    """
    temperature = as_float("gen_kwargs temperature", gen_kwargs.get("temperature", temperature), minimum=0.0)
    settings: dict[str, Any] = {
        "max_new_tokens": as_int("gen_kwargs max_new_tokens", gen_kwargs.get("max_new_tokens", max_new_tokens),
                                 minimum=1),
        # as lmms-eval's models: temperature 0 means greedy whatever do_sample says
        "do_sample": bool(gen_kwargs.get("do_sample", True)) and bool(temperature),
        "num_beams": as_int("gen_kwargs num_beams", gen_kwargs.get("num_beams", 1), minimum=1),
    }
    if settings["do_sample"]:
        settings["temperature"] = temperature
        chosen = gen_kwargs.get("top_p")
        chosen = top_p if chosen is None else chosen
        if chosen is not None:
            settings["top_p"] = as_float("gen_kwargs top_p", chosen, minimum=0.0)
    return settings, stop_strings(gen_kwargs)


def plain_decoding(gen_kwargs: dict[str, Any], temperature: float, max_new_tokens: int) -> tuple[int, float, list[str]]:
    """``(max_new_tokens, temperature, stop strings)`` for a model's own decoding loop: the task's
    where it sets them, else the model's; ``do_sample`` false means temperature 0 (greedy)."""
    max_new = count("gen_kwargs max_new_tokens", gen_kwargs.get("max_new_tokens", max_new_tokens))
    temperature = number("gen_kwargs temperature", gen_kwargs.get("temperature", temperature))
    if not gen_kwargs.get("do_sample", True):
        temperature = 0.0
    return max_new, temperature, stop_strings(gen_kwargs)


def repo_file(repo: str, filename: str) -> Path | None:
    """``filename`` of a local folder or a Hub repository (through the HF_ENDPOINT the Hub client
    reads), or None where it has no such file."""
    if os.path.isdir(repo):
        path = Path(repo) / filename
        return path if path.is_file() else None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        return Path(hf_hub_download(repo, filename))
    except EntryNotFoundError:
        return None
