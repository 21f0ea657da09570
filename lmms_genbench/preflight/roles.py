"""What each model of a run (:class:`~lmms_genbench.command.Role`, read once by
:func:`~lmms_genbench.command.read_command`) needs that can be checked without its weights: its
settings (the generators' planners; an lmms-eval class's constructor), its device, its API key,
and where its weights come from."""

from __future__ import annotations

import inspect
import os
from typing import Any

from ..command import Role
from ..core.errors import WEIGHT_ARGS, ActionableError, describe
from .problems import Problem

__all__ = ["API_KEYS", "device_problem", "key_problems", "setting_problems", "weights_needed", "weights_of"]

#: lmms-eval API describers and the variable holding their key (their classes read these)
API_KEYS = {"openai": "OPENAI_API_KEY", "gpt4v": "OPENAI_API_KEY", "claude": "ANTHROPIC_API_KEY",
            "gemini_api": "GOOGLE_API_KEY", "reka": "REKA_API_KEY"}


def setting_problems(role: Role, cuda: bool) -> list[Problem]:
    """Every ``<prefix><arg>`` the role's class refuses, read without weights: a generator's or
    unified model's planner (devices set aside: :func:`device_problem` tells those), an
    lmms-eval class's constructor signature."""
    if role.kind == "describer":
        return _describer_settings(role)
    args = dict(role.args)
    if not cuda:  # checked once, for every role, by device_problem
        args = {k: ("cpu" if k in ("device", "device_map") and str(v).startswith("cuda") else v) for k, v in args.items()}
        if role.kind == "unified" or role.name == "diffusers":  # their default device is cuda
            args.setdefault("device", "cpu")
        if args != role.args:  # offloading to a device the check put on the CPU: device_problem tells it
            args.pop("offload", None)
    try:
        if role.kind == "unified":
            from ..generators.unified import plan_unified

            plan = plan_unified(role.name, args)
        else:
            from ..generators import plan_generator

            plan = plan_generator(role.name, args)
            if plan is None and role.name == "openai":
                from ..generators import build_generator

                build_generator(role.name, **args)  # no weights: an HTTP client, and its key checked
    except Exception as exc:  # noqa: BLE001 - whatever the planner refuses is a problem to list
        from ..generators import explain_generator_failure

        line = explain_generator_failure(exc, role.name, role.args) if role.kind == "generator" else None
        if line is not None:
            return [Problem(line.cause, line.fix)]
        return [Problem(f"the {role.kind} {role.name} refuses its arguments ({describe(exc)})",
                        f"change the {role.prefix}<arg> values it names")]
    if args == role.args:  # planned as the run plans it: the run takes this plan, not a second one
        role.plan = plan
    return []


def _unified_defaults(name: str) -> dict[str, Any]:
    """A registered unified class's constructor defaults (its default checkpoint is checked like a
    given one); {} for ``lmms:<type>`` or an unknown name (planning says why)."""
    from ..generators.unified.registry import UNIFIED_MODELS

    try:
        cls = UNIFIED_MODELS.load(UNIFIED_MODELS.canonical(name))
    except Exception:  # noqa: BLE001 - an unknown name is reported by the planner
        return {}
    signature = inspect.signature(cls.__init__)
    return {n: p.default for n, p in signature.parameters.items() if p.default is not inspect.Parameter.empty}


def _describer_settings(role: Role) -> list[Problem]:
    from .. import host
    from ..command.names import lmms_model_problem

    if lmms_model_problem(role.name, role.kind):
        return []  # told by the command's reading, without lmms-eval's log of every name it knows

    try:
        cls = host.model_class(role.name, role=role.kind if not role.prefix else role.prefix.rstrip("."))
    except ActionableError as exc:
        return [Problem(exc.cause, exc.fix)]
    signature = inspect.signature(cls.__init__)
    role.defaults = {n: p.default for n, p in signature.parameters.items() if p.default is not inspect.Parameter.empty}
    named = [n for n in signature.parameters if n not in ("self", "args", "kwargs")]
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    if takes_any and not _refuses_extra(cls):
        return []  # extra keywords go through to an engine (vllm): the class itself decides
    unknown = sorted(set(role.args) - set(named))
    if not unknown:
        return []
    return [Problem(f"{role.prefix}{unknown[0]}" + (f" (and {', '.join(role.prefix + u for u in unknown[1:])})"
                                                      if unknown[1:] else "")
                    + f" is not an argument of lmms-eval's {role.name} class (it takes {', '.join(named)})",
                    f"remove it, or spell it as the class does ({role.prefix}<one of those>)")]


def _refuses_extra(cls: type) -> bool:
    """Whether the class's constructor refuses keywords it does not name (most lmms-eval classes
    assert ``kwargs == {}``): read from its source, the only place that says so."""
    try:
        source = inspect.getsource(cls.__init__)
    except (OSError, TypeError):
        return False
    return "kwargs == {}" in source.replace(" ", "").replace("kwargs=={}", "kwargs == {}") or "Unexpected kwargs" in source


def device_problem(roles: list[Role], cuda_devices: int, processes: int = 1) -> Problem | None:
    """One problem for every role that asks for CUDA on a machine with fewer GPUs than asked."""
    asking, cpu = [], []
    for role in roles:
        defaults = dict(role.defaults) if role.kind == "describer" else {}
        if role.name == "diffusers" or role.kind == "unified" and not role.name.startswith("lmms:"):
            defaults["device"] = "cuda"  # these backends' default (every native unified class's)
        # what the user gave first, then the class's defaults
        candidates = [(k, role.args[k], True) for k in ("device", "device_map") if k in role.args]
        candidates += [(k, defaults.get(k), False) for k in ("device", "device_map") if k not in role.args]
        for key, value, given in candidates:
            if isinstance(value, str) and value.startswith("cuda"):
                asking.append(f"{role.prefix}{key}={value}" + ("" if given else " (its default)"))
                cpu.append(f"{role.prefix}{key}=cpu")
                # lmms-eval's qwen2_5_vl sends inputs to cuda while device_map is its default "auto",
                # whatever device says: the CPU needs both
                if key == "device" and "device_map" in defaults and "device_map" not in role.args:
                    cpu.append(f"{role.prefix}device_map=cpu")
                break
    if not asking:
        return None
    if cuda_devices == 0:
        return Problem(f"CUDA is asked for ({', '.join(asking)}) but this machine has no CUDA device "
                       "(torch.cuda.is_available() is False)",
                       f"run on a machine with a CUDA GPU, or on the CPU with {', '.join(cpu)} (slow for real models); "
                       "a run whose store holds every hop needs no CUDA, and the check says so")
    if processes > cuda_devices:
        return Problem(f"{processes} processes with CUDA are asked for but this machine has {cuda_devices} GPU(s)",
                       f"launch at most {cuda_devices} processes (accelerate launch --num_processes {cuda_devices})")
    return None


def key_problems(roles: list[Role]) -> list[Problem]:
    """API describers whose key variable is unset (the openai generator's planner checks its own)."""
    problems = []
    for role in roles:
        variable = API_KEYS.get(role.name)
        if role.kind == "describer" and variable and not role.args.get("api_key") and not os.environ.get(variable):
            problems.append(Problem(f"the {role.prefix.rstrip('.') or 'model'} {role.name} calls an API and "
                                    f"{variable} is not set", f"export {variable}=<your API key>"))
    return problems


#: the file that marks a unified model's checkpoint layout, where config.json alone does not: BLIP3-o's
#: decoder lives beside its LM; BAGEL's published repository holds llm_config.json, vit_config.json and
#: ema.safetensors instead of a config.json
UNIFIED_FILES = {"blip3o": "diffusion-decoder/model_index.json", "bagel": "ema.safetensors"}


def weights_of(role: Role) -> tuple[str, str, str | None, str] | None:
    """``(what, value, revision, needed file)`` of the weights a role loads from a folder or the
    Hub; None for an API model or a backend without weights."""
    if role.name in API_KEYS or role.name in ("openai", "smoke") or role.name.startswith("lmms:"):
        return None
    for key in WEIGHT_ARGS:
        value = role.args.get(key)
        default = False
        if value in (None, "") and role.kind in ("describer", "unified"):
            defaults = role.defaults or (_unified_defaults(role.name) if role.kind == "unified" else {})
            value, default = defaults.get(key), True
        if isinstance(value, str) and value:
            needed = "model_index.json" if role.kind == "generator" else UNIFIED_FILES.get(role.name, "config.json")
            what = f"{role.prefix}{key}={value}" + (" (the class default)" if default else "")
            return what, value, role.args.get("revision") or None, needed
    return None


def weights_needed(role: Role) -> list[tuple[str, str, str | None, str]]:
    """Every ``(what, value, revision, needed file)`` a role loads: a unified model that reads
    several repositories lists them (its class's ``weights``, e.g. Show-o's transformer,
    tokenizer and image tokenizer), any other role its one :func:`weights_of`."""
    if role.kind == "unified":
        from ..generators.unified.registry import unified_weights

        listed = unified_weights(role.name, role.args)
        if listed is not None:
            revision = role.args.get("revision") or None
            return [(f"{role.prefix}{arg}={value}" + ("" if arg in role.args else " (the class default)"), value,
                     revision if arg == "pretrained" else None, needed) for arg, value, needed in listed]
    one = weights_of(role)
    return [one] if one is not None else []
