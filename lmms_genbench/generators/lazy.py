"""Generators that load their weights on their first drawing.

A run whose every hop is stored draws nothing, so it should load nothing (issue 24). Up
front the cycle model needs only the generator's name (it keys the artifact store) and
its batch size. A backend states both without loading through a classmethod
``plan(**kwargs) -> GeneratorPlan`` that checks every argument as its constructor does;
the diffusers backend plans around the pipeline class its ``model_index.json`` names.
A backend without a plan (or whose plan is None: a diffusers hub id not downloaded yet) is
built at once, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ActionableError
from .base import GenerationResult, Generator

__all__ = ["GeneratorPlan", "LazyGenerator", "LazyUnified", "plan_generator", "plan_registered"]


@dataclass(frozen=True)
class GeneratorPlan:
    """What a run needs of a generator before it draws: its store name and batch size."""

    name: str
    batch_size: int
    #: names the same generator had in stores written by earlier versions (adopted, not redrawn)
    legacy_names: tuple[str, ...] = ()
    #: what made the name, written readably beside the store's folder (``core.keys.name_record``
    #: and what else says which drawing it is); empty: the store writes the name alone
    identity: Mapping[str, Any] = field(default_factory=dict)
    #: loads what the plan names, its arguments checked by the plan already (None: the caller
    #: builds from the arguments, checking them again)
    load: Callable[[], Any] | None = None


class LazyGenerator:
    """A generator built by ``build()`` on its first :meth:`generate` call (thread-safe).

    ``name`` and ``batch_size`` come from the plan; the built generator must report the
    same name, else the store would be keyed wrongly (a RuntimeError)."""

    def __init__(self, plan: GeneratorPlan, build: Callable[[], Generator]) -> None:
        self.name = plan.name
        self.batch_size = plan.batch_size
        self.legacy_names = plan.legacy_names
        self.identity = dict(plan.identity)
        self._build = build
        self._lock = threading.Lock()
        self.loaded: Generator | None = None

    def load(self) -> Generator:
        with self._lock:
            if self.loaded is None:
                built = self._build()
                if built.name != self.name:  # one line and exit 1, not a traceback lmms-eval ends with 0
                    raise ActionableError(
                        f"the generator loaded as {built.name!r} but was planned as {self.name!r}: its plan and "
                        "its constructor disagree (a bug in the backend's plan; nothing was drawn under either)",
                        "report it with the command line; a run without this generator.<arg> may avoid it")
                self.loaded = built
            return self.loaded

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GenerationResult]:
        return self.load().generate(prompts, seeds)

    @property
    def text_budget(self) -> dict[str, int]:
        """The loaded generator's tokens per text encoder (known once it has drawn)."""
        return dict(getattr(self.loaded, "text_budget", None) or {})

    def text_cuts(self, prompts: Sequence[str]) -> list[dict[str, int]]:
        return self.load().text_cuts(prompts)

    def __repr__(self) -> str:
        return f"LazyGenerator(name={self.name!r}, loaded={self.loaded is not None})"


class LazyUnified(LazyGenerator):
    """A unified model (it describes and draws: :mod:`.unified`) built on its first use by
    either role. ``concurrent``: whether both roles may run at once, as the class states."""

    def __init__(self, plan: GeneratorPlan, build: Callable[[], Any], concurrent: bool) -> None:
        super().__init__(plan, build)
        self.concurrent = concurrent

    def describe(self, images: Sequence[Any], prompt: str, gen_kwargs: dict[str, Any]) -> list[Any]:
        return self.load().describe(images, prompt, gen_kwargs)

    def __repr__(self) -> str:
        return f"LazyUnified(name={self.name!r}, loaded={self.loaded is not None})"


def plan_generator(name: str, kwargs: dict[str, Any]) -> GeneratorPlan | None:
    """The plan of generator ``name`` with ``kwargs`` (every argument checked, nothing loaded),
    or None where it must be built to be known (an unknown name: building says why).

    Raises:
        ArgumentError: an argument is unknown or unusable, as building would say.
    """
    from .registry import GENERATORS

    return plan_registered(GENERATORS, name, kwargs)


def plan_registered(registry: Any, name: str, kwargs: dict[str, Any]) -> GeneratorPlan | None:
    """The plan of ``name`` in ``registry`` (a :class:`~lmms_genbench.core.registry.Registry` of
    classes): its class's ``plan(**kwargs)``, the arguments checked against its constructor
    first; None for an unknown name or a class without ``plan``."""
    if not isinstance(name, str) or name.strip().lower() not in registry:
        return None
    key = registry.canonical(name)
    planner = getattr(registry.load(key), "plan", None)
    if planner is None:
        return None
    return registry.call(key, lambda cls, **checked: planner(**checked), **kwargs)
