"""Build a generator backend by name.

Backends are imported only when built, so ``import lmms_genbench.generators``
pulls in neither torch nor diffusers nor httpx.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import ActionableError, load_failure
from ..core.registry import Registry
from ..core.failures import GeneratorConfigError
from .base import Generator, config_failure

GENERATORS = Registry(
    {
        "diffusers": ".diffusers_backend:DiffusersGenerator",
        "lmms": ".lmms_backend:LmmsGenerator",
        "openai": ".openai_backend:OpenAIImageGenerator",
        "smoke": ".smoke:SmokeGenerator",
    },
    package=__package__,
    what="name",
    context="{} generator",
)


#: ``generator=lmms:<model type>`` drives an image-generating lmms-eval model type
LMMS_PREFIX = "lmms:"


def generator_names() -> list[str]:
    """The names :func:`build_generator` accepts, sorted."""
    return GENERATORS.names()


def build_generator(name: str, **kwargs: Any) -> Generator:
    """Build the backend called ``name`` with ``kwargs``.

    Args:
        name: One of :func:`generator_names`, or ``lmms:<model type>`` for an
            image-generating lmms-eval model type (:mod:`.lmms_backend`).
        **kwargs: The backend's constructor arguments. Values may be the
            strings, ints, floats and bools an lmms-eval command line produces;
            each backend coerces and validates them before doing any heavy
            work.

    Raises:
        ValueError: ``name`` is unknown, an argument is not one the backend
            takes, or a value is unusable; the message names the argument,
            what is allowed and what came in.
    """
    if isinstance(name, str) and name.strip().lower().startswith(LMMS_PREFIX):
        # lmms:<model type>: the rest of the name is an lmms-eval model type, and every
        # argument is that model's own, so the constructor check of build() cannot apply
        return GENERATORS.load("lmms")(model=name.strip()[len(LMMS_PREFIX):], **kwargs)
    return GENERATORS.build(name, **kwargs)


def build_generator_or_explain(name: str, args: dict[str, Any], otherwise: str = "") -> Generator:
    """:func:`build_generator`, or the one line that ends the run when the generator cannot be
    built (``ActionableError``: exit 1, where lmms-eval would print an Exception and exit 0).
    ``otherwise``: another way out, named in that line. Used by every model type."""
    try:
        return build_generator(name, **args)
    except Exception as exc:
        raise explain_generator_failure(exc, name, args, otherwise) from exc


def explain_generator_failure(exc: Exception, name: str, args: dict[str, Any], otherwise: str = "") -> ActionableError:
    """The one line for a generator that cannot be planned or built."""
    if isinstance(exc, GeneratorConfigError) and exc.fix:  # e.g. no API key: the error knows the fix
        return config_failure(exc, name)
    return load_failure(exc, "generator", name, args, "generator.", otherwise)
