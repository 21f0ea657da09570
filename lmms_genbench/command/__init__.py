"""What a run was asked for: lmms-eval's ``--model``, ``--model_args`` and ``--tasks``, read once.

:func:`read_command` turns them into a :class:`RunCommand`: the roles the model type builds
(each model's name, its own arguments and how the user spells them), the top-level
arguments, ``--model cycle``'s checked :class:`~.cycle.CycleArgs`, the tasks, and every
problem of the arguments themselves (a wrong value is one problem; the rest is still read).
The model types (``models/``), the preflight (``preflight/``) and ``lmms-genbench check``
all take it; nothing else parses ``--model_args``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ActionableError, model_arg_error
from ..core.model_args import optional_int, split_prefixed
from .cycle import CycleArgs, read_cycle_args, smoke_describer_args
from .names import generator_problem, lmms_model_problem, unified_problem

__all__ = ["T2I_OFFLINE_HINT", "Role", "RunCommand", "lmms_eval_arguments", "name_problems", "read_command"]


@dataclass
class Role:
    """One model of a run: ``kind`` describer (any lmms-eval model), generator or unified;
    ``prefix``: how the user spells its arguments (``describer.``)."""

    kind: str
    name: str
    args: dict[str, Any]
    prefix: str
    defaults: dict[str, Any] = field(default_factory=dict)  # its class's own defaults, once read
    #: a generator's or unified model's plan (generators.lazy), when the preflight made it with
    #: the arguments as given: the run takes it instead of planning again
    plan: Any = None
    #: its store folder's name, when the preflight found the store holds every hop the run needs:
    #: the run names the role so and loads it only if a hop turns out missing
    stored: str | None = None


@dataclass(frozen=True)
class RunCommand:
    """One lmms-eval command, read (see the module docstring)."""

    model: str
    model_args: dict[str, Any]
    roles: tuple[Role, ...]
    #: the top-level model arguments (artifacts, output_dir, preset, ...)
    top: dict[str, Any]
    cycle: CycleArgs | None
    tasks: tuple[str, ...] = ()
    output_path: str | None = None
    processes: int = 1
    problems: tuple[ActionableError, ...] = ()
    #: lmms-eval's --include_path: more task folders
    include_path: tuple[str, ...] = ()
    #: lmms-eval's --limit (a float, as its parser reads it; None: every doc)
    limit: float | None = None


def read_command(model: str, model_args: Mapping[str, Any], tasks: Sequence[str] = (),
                 output_path: str | None = None, processes: int = 1) -> RunCommand:
    """``--model model --model_args ... --tasks ...`` read once (``model_args`` as lmms-eval's
    parser makes them; None values are left out). Whether the models it names exist is
    :func:`name_problems`' (the preflight's): building a model says so too."""
    model_args = {k: v for k, v in model_args.items() if v is not None}
    top = {k: v for k, v in model_args.items() if "." not in k}
    cycle, problems = None, []
    if model == "cycle":
        cycle, problems = read_cycle_args(model_args)
        roles = _cycle_roles(cycle)
    elif model == "t2i":
        roles, problems = _t2i_roles(model_args, top)
    elif model == "chef":
        roles, problems = _chef_roles(model_args, top)
    else:  # another lmms-eval model type: its own arguments, unprefixed
        roles, top = [Role("describer", model, dict(model_args), "")], {}
    return RunCommand(model, model_args, tuple(roles), top, cycle, tuple(t for t in tasks if t), output_path,
                      max(1, int(processes)), tuple(problems))


def _cycle_roles(args: CycleArgs | None) -> list[Role]:
    if args is None:
        return []
    if args.unified:
        return [Role("unified", args.unified, args.unified_args, "unified.")]
    return [Role("describer", args.describer, args.describer_args, "describer."),  # type: ignore[arg-type]
            Role("generator", args.generator, args.generator_args, "generator.")]  # type: ignore[arg-type]


#: the way out a --model t2i generator that does not load names in its line
T2I_OFFLINE_HINT = "try the pipeline offline with generator=smoke"
#: --model t2i's top-level model_args
T2I_ARGS = ("generator", "output_dir", "num_images_per_prompt", "seed", "batch_size", "max_batch_size", "device")


def _t2i_roles(model_args: dict[str, Any], top: dict[str, Any]) -> tuple[list[Role], list]:
    grouped, unknown = split_prefixed(model_args, ("generator",))
    unknown = {k: v for k, v in unknown.items() if k not in T2I_ARGS}
    problems = []
    if unknown:
        first = sorted(unknown)[0]
        problems.append(model_arg_error(
            "t2i", f"unknown model_args {', '.join(f'{k}={v}' for k, v in sorted(unknown.items()))}; allowed: "
            "generator, output_dir, num_images_per_prompt, seed, and generator.<arg>",
            f"remove it, or give it to the generator with its prefix (generator.{first}=...)"))
    for arg, minimum in (("num_images_per_prompt", 1), ("seed", None)):
        try:
            value = optional_int(arg, top.get(arg))
        except ValueError as exc:
            value = None
            problems.append(model_arg_error("t2i", str(exc), f"give {arg}=<an integer>, or leave it out"))
        if minimum is not None and value is not None and value < minimum:
            problems.append(model_arg_error("t2i", f"model_args {arg} must be an integer >= {minimum}, got {value!r}",
                                            f"give {arg}=<images per prompt, an integer >= 1>, or leave it out (default 1)"))
    name = str(top.get("generator", "smoke"))
    return [Role("generator", name, grouped["generator"], "generator.")], problems


def _chef_roles(model_args: dict[str, Any], top: dict[str, Any]) -> tuple[list[Role], list]:
    grouped, _unknown = split_prefixed({k: v for k, v in model_args.items() if "." in k}, ("inner", "judge"))
    inner, inner_args = top.get("inner"), grouped["inner"]
    if top.get("preset") == "smoke":
        inner = inner or "llava_hf"
        if inner == "llava_hf":
            inner_args = {**smoke_describer_args(), **inner_args}
    roles = [Role("describer", str(inner), inner_args, "inner.")] if inner else []
    if top.get("judge") not in (None, "", "inner"):
        roles.append(Role("describer", str(top["judge"]), grouped["judge"], "judge."))
    return roles, []


def name_problems(command: RunCommand) -> list[ActionableError]:
    """One problem per model ``command`` names that does not exist, with the nearest name that
    does; read from the registries' name lists, never by importing a class."""
    problems = []
    for role in command.roles:
        if role.kind == "describer":
            found = lmms_model_problem(role.name, f"{role.prefix.rstrip('.') or '--model'}")
        elif role.kind == "unified":
            found = unified_problem(role.name)
        else:
            found = generator_problem(role.name)
        if found:
            problems.append(model_arg_error(command.model, *found) if role.prefix else ActionableError(*found))
    return problems


def lmms_eval_arguments() -> tuple[list[str], str | None, list[str], float | None] | None:
    """``--tasks``, ``--output_path``, ``--include_path`` and ``--limit`` of the ``lmms-eval`` command this process runs, read by
    lmms-eval's own parser from the command line; None when this process is not one (a model
    built from Python: ``simple_evaluate``, tests)."""
    argv = list(sys.argv)
    program = argv[0].replace("\\", "/") if argv else ""
    if not ((program.endswith(("/lmms-eval", "lmms_eval/__main__.py")) or program == "lmms-eval") and "--model" in argv):
        return None
    from lmms_eval.__main__ import parse_eval_args

    try:
        _parser, args = parse_eval_args()
    except SystemExit:  # lmms-eval parsed it already; a second reading that fails checks nothing
        return None
    tasks = [t.strip() for t in str(args.tasks or "").split(",") if t.strip()]
    include = getattr(args, "include_path", None)
    return (tasks, args.output_path, [str(p) for p in ([include] if isinstance(include, str) else include or [])],
            getattr(args, "limit", None))
