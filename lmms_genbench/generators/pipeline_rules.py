"""What a diffusers pipeline accepts and needs, read from the pipeline itself.

- the settings its ``__call__`` takes (``generator.<name>`` passes them through);
- the settings it would ignore (FLUX's ``negative_prompt`` without ``true_cfg_scale > 1``);
- the size multiple (VAE scale factor x transformer patch size) and resolution binning;
- the tokens each of its text encoders reads, and how many a prompt loses to each: counted
  inside the pipeline's own tokenizer calls (:class:`counted_tokenizers`), so the text counted
  is the text the pipeline built (Lumina 2's system prompt, Sana's instruction, PixArt's
  lower-casing) cut at the length the pipeline asked for.
"""

from __future__ import annotations

import difflib
import inspect
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.args import ArgumentError

__all__ = [
    "LENGTH_WARNING", "TRUNCATION_WARNING", "check_call_settings", "counted_tokenizers", "ignored_settings",
    "legacy_call_settings", "normalise", "passable_settings", "setting_type", "size_multiple", "text_budget",
    "token_cuts", "truncation_filter", "uses_resolution_binning",
]

#: constructor arguments of the generator that set a ``__call__`` argument: given once, by their own name
OWN = {"num_inference_steps": "steps", "guidance_scale": "guidance", "width": "width", "height": "height",
       "negative_prompt": "negative_prompt"}
#: arguments the generator sets itself for every call
RESERVED = {"self", "prompt", "prompt_2", "prompt_3", "generator", "output_type", "return_dict",
            "num_images_per_prompt"}
#: name parts of arguments that take tensors, images, callables or dicts: nothing a command line can give
NOT_SETTINGS = ("embeds", "latents", "callback", "ip_adapter", "image", "mask", "kwargs", "timesteps", "sigmas")

#: settings a pipeline ignores unless another setting enables them: class prefix -> (setting, enabler, rule)
IGNORED_UNLESS = {
    "Flux": [("negative_prompt", "true_cfg_scale", "true_cfg_scale > 1", lambda v: v is not None and v > 1),
             ("negative_prompt_2", "true_cfg_scale", "true_cfg_scale > 1", lambda v: v is not None and v > 1)],
}

#: text budgets a pipeline hard-codes in its ``encode_prompt`` (class -> tokenizer attribute -> tokens)
FIXED_BUDGETS = {"Kandinsky3Pipeline": {"tokenizer": 128}}

#: the start of diffusers' per-batch truncation warning, which the recorded counts replace
TRUNCATION_WARNING = "The following part of your input was truncated"
#: the start of transformers' once-per-tokenizer warning on a text longer than it reads
LENGTH_WARNING = "Token indices sequence length is longer than"


def _call_parameters(pipeline_cls: type) -> Mapping[str, inspect.Parameter]:
    return inspect.signature(pipeline_cls.__call__).parameters


def passable_settings(pipeline_cls: type) -> dict[str, Any]:
    """Name -> default of every ``__call__`` argument ``generator.<name>`` may set."""
    out = {}
    for name, param in _call_parameters(pipeline_cls).items():
        if param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL) or name in RESERVED or name in OWN:
            continue
        if any(part in name for part in NOT_SETTINGS):
            continue
        out[name] = None if param.default is param.empty else param.default
    return out


def _legacy_coerce(name: str, value: Any, default: Any) -> Any:
    """How a setting was keyed before values were normalised to the parameter's type (kept only
    to find stores keyed that way: :func:`legacy_call_settings`)."""
    if not isinstance(value, str):
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value
    text = value.strip()
    low = text.lower()
    if isinstance(default, bool) or low in ("true", "false"):
        if low in ("true", "1", "yes", "false", "0", "no"):
            return low in ("true", "1", "yes")
        raise ArgumentError(f"{name}: expected true or false; got {value!r}")
    if low in ("none", "null"):
        return None
    for kind in ((float,) if isinstance(default, float) else (int, float)):
        try:
            return kind(text)
        except ValueError:
            continue
    if isinstance(default, (int, float)):
        raise ArgumentError(f"{name}: expected a number; got {value!r}")
    return text


#: the scalar types a setting can be normalised to, by how an annotation spells them
_KINDS = {"bool": bool, "int": int, "float": float, "str": str}


def setting_type(param: inspect.Parameter) -> type | None:
    """The type of a ``__call__`` argument: its default's, else the one scalar its annotation
    names (``Optional[int]``, ``int | None``, ``"float"``); None when neither says."""
    default = param.default
    if default is not param.empty and type(default) in (bool, int, float, str):
        return type(default)
    annotation = param.annotation
    if annotation is param.empty:
        return None
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None) or repr(annotation)
    named = {kind for word, kind in _KINDS.items() if re.search(rf"\b{word}\b", str(text))}
    return named.pop() if len(named) == 1 else None


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def normalise(name: str, value: Any, kind: type | None) -> Any:
    """``value`` (a command-line string, or what lmms-eval's parser made of it) as ``kind``, so
    one setting keys one way: ``0``/``false`` -> False for a bool, ``512.0`` -> 512 for an int,
    ``2`` -> 2.0 for a float; ``none``/``null`` -> None. A value ``kind`` cannot hold is refused
    naming the type."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("none", "null"):
            return None
    else:
        text = value
    if value is None or kind is None:
        return _legacy_coerce(name, value, None)
    if kind is bool:
        word = str(text).strip().lower() if not isinstance(text, bool) else str(text).lower()
        if isinstance(text, float) and text in (0.0, 1.0):
            word = str(int(text))
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise ArgumentError(f"{name}: expected true or false (a bool); got {value!r}")
    if kind in (int, float):
        try:
            number = float(text) if isinstance(text, str) else text
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise ValueError
        except ValueError:
            raise ArgumentError(f"{name}: expected {'an integer' if kind is int else 'a number'} "
                                f"({kind.__name__}); got {value!r}") from None
        if kind is float:
            return float(number)
        if number != number or abs(number) == float("inf") or number != int(number):
            raise ArgumentError(f"{name}: expected an integer (int); got {value!r}")
        return int(number)
    return text


#: the longest unknown-argument message: the one-line error quotes 300 characters of it
MESSAGE_CHARS = 280


def _accepted(name: str, passable: Mapping[str, Any], room: int) -> str:
    """``passes through only a, b, ...`` in about ``room`` characters: the names closest to
    ``name`` first, then the rest in order, whole names only, then how many did not fit."""
    close = difflib.get_close_matches(name, list(passable), n=3, cutoff=0.5)
    names = close + [n for n in sorted(passable) if n not in close]
    if not names:
        return "passes nothing through"
    text = "passes through only " + names[0]
    for i, each in enumerate(names[1:], start=1):
        more = f" and {len(names) - i} more (its __call__ arguments)"
        if len(text) + 2 + len(each) + (len(more) if i < len(names) - 1 else 0) > room:
            return text + more
        text += ", " + each
    return text


def _checked_names(pipeline_cls: type, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given``'s names checked against the pipeline's ``__call__``: an unknown one is refused with
    the names it accepts. Returns name -> the parameter's default."""
    passable = passable_settings(pipeline_cls)
    for name, value in sorted(given.items()):
        if name in OWN:
            raise ArgumentError(f"{name}: set it as generator.{OWN[name]}; got generator.{name}={value!r}")
        if name not in passable:
            head = f"unknown argument {name!r}: {pipeline_cls.__name__} takes none of that name; generator.<arg> "
            raise ArgumentError(head + _accepted(name, passable, MESSAGE_CHARS - len(head)))
    return passable


def check_call_settings(pipeline_cls: type, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` checked against the pipeline's ``__call__``, each value normalised to its
    parameter's type (:func:`normalise`); a value equal to the parameter's default is left out,
    as if not given (it draws the same, so it keys the same). An unknown name is refused with
    the names it accepts."""
    passable = _checked_names(pipeline_cls, given)
    params = _call_parameters(pipeline_cls)
    out = {}
    for name, value in sorted(given.items()):
        value = normalise(name, value, setting_type(params[name]))
        default = passable[name]
        if value == default and type(value) is type(default):
            continue
        out[name] = value
    return out


def legacy_call_settings(pipeline_cls: type, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` as stores written before :func:`normalise` keyed it (defaults kept, ``0`` for
    a bool kept): only to find those stores and adopt them (``store.identity.adopt_folder``)."""
    passable = _checked_names(pipeline_cls, given)
    try:
        return {name: _legacy_coerce(name, value, passable[name]) for name, value in sorted(given.items())}
    except ArgumentError:
        return {}


def ignored_settings(pipeline_cls: type, settings: Mapping[str, Any]) -> dict[str, str]:
    """Settings in ``settings`` this pipeline would ignore, each with why."""
    defaults = passable_settings(pipeline_cls)
    out = {}
    for prefix, rules in IGNORED_UNLESS.items():
        if not pipeline_cls.__name__.startswith(prefix):
            continue
        for setting, enabler, rule, ok in rules:
            if settings.get(setting) is None:
                continue
            value = settings.get(enabler, defaults.get(enabler))
            if not ok(value):
                out[setting] = f"{pipeline_cls.__name__} uses {setting} only when {rule} (here {enabler}={value})"
    return out


def size_multiple(pipeline: Any) -> int:
    """Pixels a width or height must be a multiple of: the VAE's scale factor times the
    transformer's patch size (FLUX packs 2x2 latents: times 2)."""
    scale = getattr(pipeline, "vae_scale_factor", None) or 8
    patch = getattr(pipeline, "patch_size", None)
    if patch is None:
        config = getattr(getattr(pipeline, "transformer", None), "config", None)
        patch = getattr(config, "patch_size", None) if config is not None else None
    if type(pipeline).__name__.startswith("Flux"):
        patch = 2  # _pack_latents: 2x2 latent patches whatever the config says
    return int(scale) * int(patch or 1)


def uses_resolution_binning(pipeline_cls: type, settings: Mapping[str, Any]) -> bool:
    param = _call_parameters(pipeline_cls).get("use_resolution_binning")
    if param is None:
        return False
    return bool(settings.get("use_resolution_binning", param.default))


def text_budget(pipeline: Any, settings: Mapping[str, Any]) -> dict[str, tuple[str, Any, int]]:
    """``<text encoder attribute>:<its model's class>`` -> (that class, its tokenizer, the tokens it reads).

    The encoder that ``max_sequence_length`` governs (T5 of SD3 and FLUX, the only one of
    PixArt, Sana, Lumina) reads that many tokens: the setting, else the pipeline's default;
    the others read their tokenizer's ``model_max_length`` (CLIP: 77)."""
    cls = type(pipeline)
    params = _call_parameters(cls)
    attrs = [a for a in ("tokenizer", "tokenizer_2", "tokenizer_3") if getattr(pipeline, a, None) is not None]
    long_attr = attrs[-1] if attrs and "max_sequence_length" in params else None
    fixed = FIXED_BUDGETS.get(cls.__name__, {})
    out = {}
    for attr in attrs:
        tokenizer = getattr(pipeline, attr)
        if attr in fixed:
            tokens = fixed[attr]
        elif attr == long_attr:
            tokens = settings.get("max_sequence_length") or params["max_sequence_length"].default
        else:
            tokens = getattr(tokenizer, "model_max_length", None)
        if not isinstance(tokens, int) or not 0 < tokens < 100_000:  # no real limit known
            continue
        encoder = "text_encoder" + attr[len("tokenizer"):]
        model = type(getattr(pipeline, encoder, None)).__name__
        out[f"{encoder}:{model}"] = (model, tokenizer, tokens)
    return out


def token_cuts(budget: Mapping[str, tuple[str, Any, int]], prompts: Sequence[str]) -> list[dict[str, int]]:
    """Per prompt, the tokens each encoder cuts: its token count (special tokens included, as the
    pipeline tokenizes) beyond what the encoder reads."""
    out: list[dict[str, int]] = [{} for _ in prompts]
    for encoder, (_model, tokenizer, tokens) in budget.items():
        ids = tokenizer(list(prompts), truncation=False, add_special_tokens=True, verbose=False)["input_ids"]
        for cut, row in zip(out, ids):
            cut[encoder] = max(0, len(row) - tokens)
    return out


class _DropTruncationWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith((TRUNCATION_WARNING, LENGTH_WARNING))


#: where transformers warns of a text longer than its tokenizer reads
_TOKENIZER_LOGGER = "transformers.tokenization_utils_base"


class truncation_filter:
    """While in use, drop diffusers' per-batch truncation warning from ``pipeline``'s own module
    logger, and transformers' "Token indices sequence length" warning (nothing else, nowhere
    else): the counts are recorded per hop instead."""

    def __init__(self, pipeline: Any, active: bool) -> None:
        names = (type(pipeline).__module__, _TOKENIZER_LOGGER) if active else ()
        self.loggers = [logging.getLogger(name) for name in names]
        self.filter = _DropTruncationWarning()

    def __enter__(self) -> truncation_filter:
        from ..hooks.call import log_filter

        self._in_place = log_filter([log.name for log in self.loggers], self.filter)
        self._in_place.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._in_place.__exit__(*exc)


def _tokenizer_attr(encoder: str) -> str:
    """``text_encoder_3:T5EncoderModel`` -> ``tokenizer_3``."""
    return "tokenizer" + encoder.split(":", 1)[0][len("text_encoder"):]


class _CountingTokenizer:
    """Stands in for a pipeline's tokenizer during one call: answers as it does, and for each
    call that truncates (``truncation`` and ``max_length`` given) records, per text, the tokens
    beyond ``max_length``, counting the very text the pipeline passed."""

    def __init__(self, tokenizer: Any, sink: list[list[int]]) -> None:
        self.__dict__["_tokenizer"] = tokenizer
        self.__dict__["_sink"] = sink

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._tokenizer, name, value)

    def __len__(self) -> int:
        return len(self._tokenizer)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self._tokenizer(*args, **kwargs)
        text = args[0] if args else kwargs.get("text")
        limit = kwargs.get("max_length")
        if text is not None and kwargs.get("truncation") and isinstance(limit, int):
            texts = [text] if isinstance(text, str) else list(text)
            ids = self._tokenizer(texts, truncation=False, padding=False, verbose=False,
                                  add_special_tokens=kwargs.get("add_special_tokens", True))["input_ids"]
            self._sink.append([max(0, len(row) - limit) for row in ids])
        return out


class counted_tokenizers:
    """While in use, the tokenizers of ``budget``'s encoders are swapped on ``pipeline`` for
    counting stand-ins (set past the pipeline's config, so nothing it saves changes);
    :meth:`cuts` then gives, per prompt, the tokens each encoder's tokenizer cut."""

    def __init__(self, pipeline: Any, budget: Mapping[str, Any]) -> None:
        self.pipeline = pipeline
        self.calls: dict[str, list[list[int]]] = {encoder: [] for encoder in budget}

    def __enter__(self) -> counted_tokenizers:
        from ..hooks.call import TARGETS, attributes

        swaps = {}
        for encoder, sink in self.calls.items():
            attr = _tokenizer_attr(encoder)
            tokenizer = getattr(self.pipeline, attr, None)
            if tokenizer is not None:
                swaps[attr] = _CountingTokenizer(tokenizer, sink)
        self._in_place = attributes(self.pipeline, swaps, TARGETS["tokenizers"], bypass=True)
        self._in_place.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._in_place.__exit__(*exc)

    def cuts(self, prompts: int) -> list[dict[str, int]] | None:
        """Per prompt, each encoder's cut, from its first truncating call over ``prompts`` texts
        (the prompts: pipelines encode them before any negative prompt); None when an encoder
        made no such call (a pipeline that tokenizes otherwise: count the prompts instead)."""
        out: list[dict[str, int]] = [{} for _ in range(prompts)]
        for encoder, calls in self.calls.items():
            first = next((call for call in calls if len(call) == prompts), None)
            if first is None:
                return None
            for cut, tokens in zip(out, first):
                cut[encoder] = tokens
        return out
