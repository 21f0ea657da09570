"""The describer and generator of ``--model cycle`` (or its one unified model), named from the
run's :class:`~lmms_genbench.command.RunCommand` without loading weights; each loads at its
first use, so a run whose hops are all stored loads neither (issue 24). Also what each writes
beside its store folder (:mod:`lmms_genbench.store.identity`)."""

from __future__ import annotations

import functools
from typing import Any

from .. import host
from ..command import RunCommand
from ..command.cycle import OFFLINE_HINT, VLLM_CPU_MEMORY_FRACTION
from ..core.errors import load_failure
from ..core.model_args import public_args
from ..engine import LazyDescriber, LmmsDescriber
from ..generators import (GeneratorPlan, LazyGenerator, LazyUnified, build_generator_or_explain,
                          explain_generator_failure, plan_generator)

__all__ = ["build_describer", "build_roles", "describer_identity", "generator_identity", "load_planned"]


def _otherwise(command: RunCommand) -> str:
    """The way out named in a role's error line: never what the command already has."""
    return "" if command.top.get("preset") else OFFLINE_HINT


def _role_plan(command: RunCommand, kind: str, args: dict[str, Any]):
    """The plan the preflight made with the arguments as given, or the name of the store folder
    that holds every hop (preflight/stored.py); None: plan here."""
    role = next((r for r in command.roles if r.kind == kind), None)
    if role is not None and role.stored:
        return GeneratorPlan(role.stored, int(args.get("batch_size") or 4))
    return role.plan if role is not None else None


def build_roles(command: RunCommand):
    """The describer and generator ``command`` names, and whether they may run on two threads at once.

    A role that does not load stops the run with one line naming its weights argument
    (:class:`~lmms_genbench.core.errors.ActionableError`): at its first use, or here for a
    backend without a plan. Each role's settings are planned once: by the preflight, whose
    plan is taken, or here."""
    args = command.cycle
    assert args is not None
    otherwise = _otherwise(command)
    if args.unified:
        from ..generators.unified import build_unified, plan_unified, unified_concurrency

        unified, unified_args = args.unified, args.unified_args

        def explain(exc: Exception):  # the one line, at start (plan) or at first use (build)
            return load_failure(exc, "unified model", unified, unified_args, "unified.", otherwise)

        def build():
            try:
                return build_unified(unified, **unified_args)
            except Exception as exc:
                raise explain(exc) from exc

        try:
            plan = _role_plan(command, "unified", unified_args) or plan_unified(unified, unified_args)
        except Exception as exc:
            raise explain(exc) from exc
        if plan is None:  # a class without a plan loads now, as before
            model = build()
            return model, model, bool(getattr(model, "concurrent", False))
        concurrent = unified_concurrency(unified)
        model = LazyUnified(plan, build, concurrent)  # its weights load at first use, as below
        model.identity = generator_identity(command, model)
        return model, model, concurrent
    describer, describer_args = args.describer, args.describer_args
    generator, generator_args = args.generator, args.generator_args
    # what can be checked without weights (names, arguments, devices) is checked now, before any doc
    stored = next((r.stored for r in command.roles if r.kind == "describer" and r.stored), None)
    if stored is None:
        host.model_class(describer, role="describer")
    lazy_describer = LazyDescriber(stored or host.model_identity(describer, describer_args),
                                   functools.partial(build_describer, describer, describer_args, otherwise))
    lazy_describer.legacy_names = () if stored else host.model_legacy_names(describer, describer_args)
    build = functools.partial(build_generator_or_explain, generator, generator_args, otherwise)
    lazy_describer.identity = describer_identity(command, lazy_describer)
    try:
        plan = _role_plan(command, "generator", generator_args) or plan_generator(generator, generator_args)
    except Exception as exc:
        raise explain_generator_failure(exc, generator, generator_args, otherwise) from exc
    if plan is not None and plan.load is not None:  # what the plan checked loads as it is: checked once
        build = functools.partial(load_planned, plan.load, generator, generator_args, otherwise)
    drawer = build() if plan is None else LazyGenerator(plan, build)
    try:
        drawer.identity = generator_identity(command, drawer)
    except AttributeError:  # a backend object that takes no attribute: its store folder says its name alone
        pass
    return lazy_describer, drawer, True


def load_planned(load, name: str, args: dict[str, Any], otherwise: str):
    """``load()``, or the one line :func:`build_generator_or_explain` gives for the same failure."""
    try:
        return load()
    except Exception as exc:
        raise explain_generator_failure(exc, name, args, otherwise) from exc


def build_describer(name: str, args: dict[str, Any], otherwise: str = OFFLINE_HINT):
    """Instantiate a registered lmms-eval model by name with its own arguments."""
    if name == "vllm":
        # vLLM's engine fails in a child process; the parent sees only "initialization
        # failed", most often for memory: say which argument decides it
        otherwise = (
            f"if vLLM's log above blames memory, change describer.gpu_memory_utilization (here "
            f"{args.get('gpu_memory_utilization', 'the class default 0.8')}): the fraction of the GPU's "
            f"memory, or without CUDA of the RAM (default {VLLM_CPU_MEMORY_FRACTION} there), that vLLM "
            f"reserves for the weights and the KV cache" + (f"; or {otherwise}" if otherwise else "")
        )
    model = host.build_model(name, args, role="describer", prefix="describer.", otherwise=otherwise)
    return LmmsDescriber(model, host.model_identity(name, args))


def describer_identity(command: RunCommand, describer: Any) -> dict[str, Any]:
    """What the describer's store folder is named from, and its arguments as given (a unified
    model: its own, as :func:`generator_identity`)."""
    args = command.cycle
    assert args is not None
    if args.unified:
        return generator_identity(command, describer)
    return {**host.model_record(args.describer, args.describer_args), "role": "describer",  # type: ignore[arg-type]
            "given": public_args(args.describer_args)}


def generator_identity(command: RunCommand, generator: Any) -> dict[str, Any]:
    """What the generator's (or unified model's) store folder is named from: its plan's or
    built generator's ``identity`` when it states one, else its name; and its arguments as given."""
    args = command.cycle
    assert args is not None
    role, name, given = (("unified", args.unified, args.unified_args) if args.unified else
                         ("generator", args.generator, args.generator_args))
    stated = dict(getattr(generator, "identity", None) or {})
    return {**stated, "role": role, "model": name, "given": public_args(given)}
