"""Text-to-image backends behind one interface (see :mod:`.base`)."""

from .base import GenerationFailure, GenerationResult, Generator, GeneratorConfigError, config_failure
from .registry import build_generator, build_generator_or_explain, generator_names

__all__ = [
    "GenerationFailure",
    "GenerationResult",
    "Generator",
    "GeneratorConfigError",
    "build_generator",
    "build_generator_or_explain",
    "config_failure",
    "generator_names",
]
