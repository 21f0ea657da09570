"""What a diffusers pipeline accepts and needs, read from the pipeline itself.

- the settings its ``__call__`` takes (``generator.<name>`` passes them through);
- the settings it would ignore (FLUX's ``negative_prompt`` without ``true_cfg_scale > 1``);
- the size multiple (VAE scale factor x transformer patch size) and resolution binning;
- the tokens each of its text encoders reads, and how many a prompt loses to each.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.args import ArgumentError

__all__ = [
    "TRUNCATION_WARNING", "check_call_settings", "ignored_settings", "passable_settings", "size_multiple",
    "text_budget", "token_cuts", "truncation_filter", "uses_resolution_binning",
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


def _coerce(name: str, value: Any, default: Any) -> Any:
    """A command-line string as the type the pipeline's default has (or the literal it spells)."""
    if not isinstance(value, str):
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


def check_call_settings(pipeline_cls: type, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` checked against the pipeline's ``__call__`` and coerced; an unknown name is refused
    with the names it accepts."""
    passable = passable_settings(pipeline_cls)
    out = {}
    for name, value in sorted(given.items()):
        if name in OWN:
            raise ArgumentError(f"{name}: set it as generator.{OWN[name]}; got generator.{name}={value!r}")
        if name not in passable:
            raise ArgumentError(
                f"unknown argument {name!r}: {pipeline_cls.__name__} takes none of that name; generator.<arg> "
                f"passes through only {', '.join(sorted(passable))} (besides the generator's own steps, "
                f"guidance, width, height, negative_prompt, dtype, device, batch_size, revision)"
            )
        out[name] = _coerce(name, value, passable[name])
    return out


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
        return not str(record.msg).startswith(TRUNCATION_WARNING)


class truncation_filter:
    """While in use, drop diffusers' per-batch truncation warning from ``pipeline``'s own module
    logger (nothing else, nowhere else): the counts are recorded per hop instead."""

    def __init__(self, pipeline: Any, active: bool) -> None:
        self.logger = logging.getLogger(type(pipeline).__module__) if active else None
        self.filter = _DropTruncationWarning()

    def __enter__(self) -> "truncation_filter":
        if self.logger is not None:
            self.logger.addFilter(self.filter)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.logger is not None:
            self.logger.removeFilter(self.filter)
