"""Text-to-image backends behind one interface (see :mod:`.base`)."""

from .base import GenerationFailure, GenerationResult, Generator, GeneratorConfigError, config_failure
from .lazy import GeneratorPlan, LazyGenerator, plan_generator
from .registry import build_generator, generator_names

__all__ = [
    "GenerationFailure",
    "GenerationResult",
    "Generator",
    "GeneratorConfigError",
    "GeneratorPlan",
    "LazyGenerator",
    "build_generator",
    "config_failure",
    "generator_names",
    "plan_generator",
]
