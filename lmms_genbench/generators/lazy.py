"""Generators that load their weights on their first drawing.

A run whose every hop is stored draws nothing, so it should load nothing (issue 24). Up
front the cycle model needs only the generator's name (it keys the artifact store) and
its batch size. A backend states both without loading through a classmethod
``plan(**kwargs) -> GeneratorPlan`` that checks every argument as its constructor does;
the diffusers backend is planned here, by building it around a stand-in pipeline of the
dtype the real one would be loaded in (its name reads only the dtype of a pipeline).
A backend without a plan is built at once, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.args import as_choice, as_str
from ..core.deps import require
from .base import GenerationResult, Generator
from .common import DTYPES, check_device, resolve_dtype

__all__ = ["GeneratorPlan", "LazyGenerator", "plan_generator"]


@dataclass(frozen=True)
class GeneratorPlan:
    """What a run needs of a generator before it draws: its store name and batch size."""

    name: str
    batch_size: int


class LazyGenerator:
    """A generator built by ``build()`` on its first :meth:`generate` call (thread-safe).

    ``name`` and ``batch_size`` come from the plan; the built generator must report the
    same name, else the store would be keyed wrongly (a RuntimeError)."""

    def __init__(self, plan: GeneratorPlan, build: Callable[[], Generator]) -> None:
        self.name = plan.name
        self.batch_size = plan.batch_size
        self._build = build
        self._lock = threading.Lock()
        self.loaded: Generator | None = None

    def load(self) -> Generator:
        with self._lock:
            if self.loaded is None:
                built = self._build()
                if built.name != self.name:
                    raise RuntimeError(
                        f"the generator loaded as {built.name!r} but was planned as {self.name!r}: "
                        "its plan and its constructor disagree (a bug in the backend's plan)"
                    )
                self.loaded = built
            return self.loaded

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GenerationResult]:
        return self.load().generate(prompts, seeds)

    def __repr__(self) -> str:
        return f"LazyGenerator(name={self.name!r}, loaded={self.loaded is not None})"


class _StandIn:
    """Takes a pipeline's place while a name is computed: only its dtype is read."""

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype


def _plan_diffusers(cls: type, **kwargs: Any) -> GeneratorPlan | None:
    if kwargs.get("pipeline") is not None or kwargs.get("pretrained") is None:
        return None  # an injected pipeline is loaded already; no pretrained: the constructor says why
    torch = require("torch", "the diffusers generator")
    choice = as_choice("dtype", kwargs.get("dtype", "auto"), DTYPES)
    device = check_device(torch, str(as_str("device", kwargs.get("device", "cuda"))))
    dtype = resolve_dtype(torch, choice, device, None)
    probe = cls(**{**kwargs, "dtype": dtype, "pipeline": _StandIn(getattr(torch, dtype))})
    return GeneratorPlan(probe.name, probe.batch_size)


def plan_generator(name: str, kwargs: dict[str, Any]) -> GeneratorPlan | None:
    """The plan of generator ``name`` with ``kwargs`` (every argument checked, nothing loaded),
    or None where it must be built to be known (an unknown name: building says why).

    Raises:
        ArgumentError: an argument is unknown or unusable, as building would say.
    """
    from .registry import GENERATORS

    if not isinstance(name, str) or name.strip().lower() not in GENERATORS:
        return None
    key = GENERATORS.canonical(name)
    if key == "diffusers":
        return GENERATORS.call(key, _plan_diffusers, **kwargs)
    planner = getattr(GENERATORS.load(key), "plan", None)
    if planner is None:
        return None
    return GENERATORS.call(key, lambda cls, **checked: planner(**checked), **kwargs)
