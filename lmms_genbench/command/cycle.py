"""What ``--model cycle``'s model_args mean: presets, checks, and the roles they name.

:func:`read_cycle_args` turns the keyword arguments lmms-eval passes the model into a
:class:`CycleArgs`, before anything loads, and lists every wrong value (each one line naming
the argument, what is allowed and what came in); the model raises them all at once (exit 1:
lmms-eval itself would print an Exception and exit 0). ``models/cycle.py`` builds the roles
and runs the chains.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any

from collections.abc import Mapping

from ..core.errors import ActionableError, model_arg_error
from ..core.model_args import optional_int, split_prefixed
from ..core.registry import lookup

__all__ = ["PRESETS", "SCORER_PRESETS", "TOP_LEVEL_ARGS", "VLLM_CPU_MEMORY_FRACTION", "CycleArgs", "in_shard",
           "read_cycle_args", "resolve_roles", "shard_arg", "smoke_describer_args", "OFFLINE_HINT",
           "smoke_unified_args", "vllm_describer_args", "DESCRIBER_BATCH"]


PRESETS: dict[str, dict[str, Any]] = {
    # random-weight describer and generator built locally: proves the plumbing, not a model
    "smoke": {"describer": "llava_hf", "generator": "smoke"},
    # a random-weight Janus built locally, as one unified model
    "smoke_unified": {"unified": "janus"},
}
# a smoke model's chains are scored with offline networks too, whatever the task
# asks (explicit scorer settings of the task and LMMS_GENBENCH_* variables still win)
SCORER_PRESETS = {"smoke": "smoke", "smoke_unified": "smoke"}


#: the way out of a model that did not load, named in its error line (cycle and chef models)
OFFLINE_HINT = "run offline with --model_args preset=smoke"


def smoke_describer_args() -> dict[str, Any]:
    from ..smoke.llava import tiny_llava_path

    # one torch thread for these tiny networks is set while the model runs, not here
    # (lmms_genbench.hooks.run): parsing changes no process-wide setting
    return {"pretrained": str(tiny_llava_path()), "device": "cpu", "device_map": "cpu", "dtype": "float32"}


# lmms-eval's vllm chat class sends one prompt per call (batch_size=1) and asks
# vLLM for 80% of the device's memory. vLLM 0.32's CPU backend reserves that
# fraction of the RAM for the weights and the KV cache up front (its cpu_worker.py):
# 0.92 fails at start, 0.8 took 11 GB, 0.1 serves small models (issue 13). On a
# GPU the class's default stands.
VLLM_CPU_MEMORY_FRACTION = 0.1


def vllm_describer_args(args: dict[str, Any], describer_batch: int) -> dict[str, Any]:
    """Defaults for ``describer=vllm`` under the user's own ``describer.<arg>`` values:
    each describe step's images in one vLLM call, and a memory fraction that
    fits the machine. None of these enter the artifact key (OPERATIONAL_ARGS)."""
    import torch

    filled: dict[str, Any] = {"batch_size": describer_batch}
    if not torch.cuda.is_available():
        filled["gpu_memory_utilization"] = VLLM_CPU_MEMORY_FRACTION
    return {**filled, **args}


def smoke_unified_args() -> dict[str, Any]:
    from ..smoke.janus import tiny_janus_path

    return {"pretrained": str(tiny_janus_path()), "device": "cpu", "dtype": "float32"}


#: top-level model_args of --model cycle (the roles' own take a prefix)
TOP_LEVEL_ARGS = ("describer", "generator", "unified", "preset", "artifacts", "describer_batch", "stop_after_hop",
                  "shard")
#: what lmms-eval passes every model besides its model_args (ignored: each role has its own)
HOST_ARGS = ("batch_size", "max_batch_size", "device")
#: images per describer call unless describer_batch says otherwise
DESCRIBER_BATCH = 16


def _arg_error(cause: str, fix: str) -> ActionableError:
    """A wrong --model_args value: one line, exit 1 (lmms-eval prints an Exception and exits 0)."""
    return model_arg_error("cycle", cause, fix)


def _int_arg(name: str, value: Any, minimum: int, fix: str, optional: bool = False) -> int | None:
    """``model_args name`` as an integer >= ``minimum`` (unset: None if ``optional``), or its one line."""
    try:
        number = optional_int(name, value)
    except ValueError:
        number = minimum - 1
    if (number is None and not optional) or (number is not None and number < minimum):
        raise _arg_error(f"model_args {name} must be an integer >= {minimum}, got {value!r}", fix)
    return number


def shard_arg(value: Any) -> tuple[int, int] | None:
    """``shard=i/n`` as ``(i, n)`` with ``0 <= i < n``; unset: None."""
    if value is None or value == "":
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(value))
    if not match or not int(match[1]) < int(match[2]):
        raise _arg_error(
            f"model_args shard must be i/n with integers 0 <= i < n (this job's share of n), got {value!r}",
            "give shard=<i>/<n>, e.g. shard=0/4 ... shard=3/4 for a four-job array (SLURM: "
            "shard=$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT), or leave it out to run every doc",
        )
    return int(match[1]), int(match[2])


def in_shard(chain_key: str, shard: tuple[int, int] | None) -> bool:
    """Whether a chain belongs to ``shard``: by a hash of its key (the doc's id, not its
    position), so every job of an array, a resume and a later dataset order agree."""
    if shard is None:
        return True
    digest = hashlib.sha256(chain_key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % shard[1] == shard[0]


def resolve_roles(preset, describer, generator, unified, describer_args, generator_args, unified_args):
    """Apply ``preset`` and check that the model_args name one decoupled pair or one unified model."""
    try:
        fill = {} if preset is None else lookup(PRESETS, preset, "model_args preset")
    except ValueError as exc:
        raise _arg_error(str(exc), f"give {' or '.join(f'preset={p}' for p in PRESETS)}, or leave preset out and "
                         "name describer=... and generator=... (or unified=...)") from None
    if unified or unified_args or "unified" in fill:
        unified = unified or fill.get("unified")
        mixed = [role for role, name in (("describer", describer), ("generator", generator)) if name]
        mixed += [f"{role}.{k}" for role, args in (("describer", describer_args), ("generator", generator_args)) for k in args]
        if mixed:
            raise _arg_error(
                f"model_args unified={unified!r} replaces the describer and the generator, but "
                f"{', '.join(mixed)} was given too",
                "give either unified=... (with unified.<arg>=...) or describer=... and generator=...",
            )
        if not unified:
            raise _arg_error(
                f"model_args {', '.join('unified.' + k for k in unified_args)} given without unified=<name>",
                "add unified=<name> (e.g. janus), or drop the unified.<arg> values",
            )
        if preset == "smoke_unified" and unified == "janus":
            unified_args = {**smoke_unified_args(), **unified_args}
        return None, None, unified, {}, {}, unified_args
    describer = describer or fill.get("describer")
    generator = generator or fill.get("generator")
    if preset == "smoke" and describer == "llava_hf":
        describer_args = {**smoke_describer_args(), **describer_args}
    if not describer:
        raise _arg_error(
            "model_args describer is required (an lmms-eval model name such as llava_hf)",
            "give describer=<model> (with describer.pretrained=...), or unified=<model>, or use preset=smoke",
        )
    if not generator:
        raise _arg_error(
            "model_args generator is required (diffusers, openai, smoke, lmms:<model type>)",
            "give generator=<name> (with generator.<arg>=...), or use preset=smoke",
        )
    return describer, generator, None, describer_args, generator_args, {}


@dataclasses.dataclass(frozen=True)
class CycleArgs:
    """The model_args of one ``--model cycle``, checked, with the preset applied: one
    describer and one generator, or one unified model (the other names None)."""

    describer: str | None
    generator: str | None
    unified: str | None
    describer_args: dict[str, Any]
    generator_args: dict[str, Any]
    unified_args: dict[str, Any]
    describer_batch: int
    stop_after_hop: int | None
    shard: tuple[int, int] | None
    #: "smoke" when a smoke preset built the model: its chains are scored offline too
    scorer_preset: str | None


def read_cycle_args(model_args: Mapping[str, Any]) -> tuple[CycleArgs | None, list[ActionableError]]:
    """``--model cycle``'s model_args (as lmms-eval passes them) read once: the checked
    :class:`CycleArgs` (None when a role cannot be told) and every problem, each one line; a
    wrong value is one problem and the rest is still checked around it. Whether the models it
    names exist is :func:`lmms_genbench.command.name_problems`'s. A smoke preset builds its
    tiny checkpoint (cached)."""
    problems: list[ActionableError] = []

    def checked(check, *args, default=None):
        try:
            return check(*args)
        except ActionableError as exc:
            problems.append(exc)
            return default

    top = {k: v for k, v in model_args.items() if "." not in k}
    unknown_top = {k: v for k, v in top.items() if k not in TOP_LEVEL_ARGS + HOST_ARGS}
    grouped, unknown = split_prefixed({k: v for k, v in model_args.items() if "." in k}, ("describer", "generator",
                                                                                           "unified"))
    unknown.update(unknown_top)
    if unknown:
        first = sorted(unknown)[0].partition(".")[2] or sorted(unknown)[0]
        problems.append(_arg_error(
            f"unknown model_args {', '.join(f'{k}={v}' for k, v in sorted(unknown.items()))}; allowed: "
            f"{', '.join(TOP_LEVEL_ARGS)}, and describer.<arg>, generator.<arg>, unified.<arg>",
            f"remove it, or give it to a role with its prefix (describer.{first}=..., generator.{first}=... "
            f"or unified.{first}=...)",
        ))
    describer_batch = checked(_int_arg, "describer_batch", top.get("describer_batch", DESCRIBER_BATCH), 1,
                              "give describer_batch=<images per describer call, an integer >= 1>, or leave "
                              f"it out (default {DESCRIBER_BATCH})", default=DESCRIBER_BATCH)
    stop_after_hop = checked(_int_arg, "stop_after_hop", top.get("stop_after_hop"), 0,
                             "give stop_after_hop=<the last hop this run computes, an integer >= 0>, or leave "
                             "it out to finish every chain", True)
    shard = checked(shard_arg, top.get("shard"))
    preset = top.get("preset")
    roles = checked(resolve_roles, preset, top.get("describer"), top.get("generator"), top.get("unified"),
                    grouped["describer"], grouped["generator"], grouped["unified"])
    if roles is None:
        return None, problems
    describer, generator, unified, describer_args, generator_args, unified_args = roles
    if describer == "vllm":
        describer_args = vllm_describer_args(describer_args, describer_batch)
    return CycleArgs(describer, generator, unified, describer_args, generator_args, unified_args,
                     describer_batch, stop_after_hop, shard, SCORER_PRESETS.get(preset or "")), problems
