"""Text-to-image backends behind one interface (see :mod:`.base`)."""

from ..core.failures import GenerationFailure, GeneratorConfigError
from .base import GenerationResult, Generator, config_failure
from .lazy import GeneratorPlan, LazyGenerator, LazyUnified, plan_generator
from .registry import build_generator, build_generator_or_explain, explain_generator_failure, generator_names

__all__ = [
    "GenerationFailure",
    "GenerationResult",
    "Generator",
    "GeneratorConfigError",
    "GeneratorPlan",
    "LazyGenerator",
    "LazyUnified",
    "build_generator",
    "build_generator_or_explain",
    "config_failure",
    "explain_generator_failure",
    "generator_names",
    "plan_generator",
]
