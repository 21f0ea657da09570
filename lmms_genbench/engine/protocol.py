"""A chain protocol: what the engine does for each doc, read from a task's
``generation_kwargs``.

A chain alternates modalities hop by hop. Image-first: I0 -> T1 -> I2 -> ...;
text-first: T0 -> I1 -> T2 -> .... GenCeption's T iterations (describe, then
draw) are 2T hops of an image-first chain.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.args import ArgumentError, as_int
from ..core.keys import slug, stable_hash
from ..store import Direction, Kind, hop_kind

# GenCeption's generation prompt, verbatim (paper §2.1 and the authors' code)
GENCEPTION_GENERATE_PROMPT = (
    "Generate an image that fully and precisely reflects this description: {description}"
)

# Openings of replies that decline instead of describing; a match fails the doc
# rather than feeding an apology to the generator.
DEFAULT_REFUSAL_PATTERNS = (
    r"^\s*(i'?m|i am)\s+(sorry|unable|not able)",
    r"^\s*i\s+(can(no|')t|cannot|won'?t)\s+(help|assist|describe|provide|do that)",
    r"^\s*sorry,?\s+(but\s+)?i\s+(can|am)",
)

# generation_kwargs keys that configure the protocol; every other key is a
# decoding setting passed to the describer untouched.
PROTOCOL_KEYS = (
    "iterations",
    "generations",
    "direction",
    "generate_prompt",
    "seed",
    "seed_field",
    "direction_field",
    "refusal_patterns",
    "max_seed_side",
    "scorer",
)


@dataclass(frozen=True)
class ChainSpec:
    """Everything that decides a chain's content, hence its artifact key."""

    direction: Direction
    hops: int
    describe_prompt: str
    generate_prompt: str = GENCEPTION_GENERATE_PROMPT
    seed: int = 0
    seed_field: str | None = None
    refusal_patterns: tuple[str, ...] = DEFAULT_REFUSAL_PATTERNS
    max_seed_side: int = 2048
    describer_kwargs: dict = field(default_factory=dict, hash=False, compare=False)
    # the task's scorer settings: carried to the scorer on every chain, never part
    # of the chain's content (changing a scorer must not recompute chains)
    scorer: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self) -> None:
        if self.direction not in ("image_first", "text_first"):
            raise ValueError(
                f"generation_kwargs.direction must be 'image_first' or 'text_first', got {self.direction!r}"
            )
        if not isinstance(self.hops, int) or self.hops < 1:
            raise ValueError(f"chain length must be at least one hop, got {self.hops!r}")
        if "{description}" not in self.generate_prompt:
            raise ValueError(
                "generation_kwargs.generate_prompt must contain '{description}', "
                f"got {self.generate_prompt!r}"
            )
        for pattern in self.refusal_patterns:
            re.compile(pattern)
        if not isinstance(self.scorer, Mapping):
            raise ValueError(f"generation_kwargs.scorer must be a mapping of scorer settings, got {self.scorer!r}")

    @classmethod
    def from_request(
        cls, context: str, gen_kwargs: dict[str, Any] | None, direction: str | None = None
    ) -> "ChainSpec":
        """Split a request's generation_kwargs into protocol and decoding settings.

        ``direction`` (read by the caller from the doc field named by
        ``generation_kwargs.direction_field``) overrides ``generation_kwargs.direction``,
        so one task can hold text-first and image-first chains.
        """
        kwargs = copy.deepcopy(dict(gen_kwargs or {}))
        kwargs.pop("direction_field", None)
        default_direction = kwargs.pop("direction", "image_first")
        direction = direction or default_direction
        iterations = kwargs.pop("iterations", None)
        generations = kwargs.pop("generations", None)
        if iterations is not None and generations is not None:
            raise ValueError("set generation_kwargs.iterations or .generations, not both")
        if generations is not None:
            hops = _positive_int("generations", generations)
        else:
            hops = 2 * _positive_int("iterations", 3 if iterations is None else iterations)
        patterns = kwargs.pop("refusal_patterns", DEFAULT_REFUSAL_PATTERNS)
        if isinstance(patterns, str):
            patterns = (patterns,)
        until = kwargs.get("until")
        if until is not None and len(until) == 0:
            # an explicit empty list means "no stop strings"; some backends reject []
            kwargs.pop("until")
        return cls(
            direction=direction,
            hops=hops,
            describe_prompt=str(context),
            generate_prompt=kwargs.pop("generate_prompt", GENCEPTION_GENERATE_PROMPT),
            seed=_int("seed", kwargs.pop("seed", 0)),
            seed_field=kwargs.pop("seed_field", None),
            refusal_patterns=tuple(patterns or ()),
            max_seed_side=_positive_int("max_seed_side", kwargs.pop("max_seed_side", 2048)),
            scorer=kwargs.pop("scorer", None) or {},
            describer_kwargs=kwargs,
        )

    def kind(self, hop: int) -> Kind:
        return hop_kind(self.direction, hop)

    def protocol_id(self, task: str) -> str:
        settings = {
            "direction": self.direction,
            "describe_prompt": self.describe_prompt,
            "generate_prompt": self.generate_prompt,
            "seed": self.seed,
            "seed_field": self.seed_field,
            "refusal_patterns": list(self.refusal_patterns),
            "max_seed_side": self.max_seed_side,
            "describer_kwargs": self.describer_kwargs,
        }
        # the chain length is left out on purpose: a longer run reuses a shorter
        # run's hops, which are identical by construction
        task_slug = slug(task, keep="A-Za-z0-9._-", sep="_", lower=False, strip="", fallback="task")
        return f"{task_slug}-{stable_hash(settings)}"

    def describe_settings(self) -> dict[str, Any]:
        return {
            "direction": self.direction,
            "hops": self.hops,
            "describe_prompt": self.describe_prompt,
            "generate_prompt": self.generate_prompt,
            "seed": self.seed,
            "describer_kwargs": self.describer_kwargs,
        }

    def refusal(self, text: str) -> str | None:
        for pattern in self.refusal_patterns:
            if re.search(pattern, text, flags=re.IGNORECASE):
                return pattern
        return None


def _int(name: str, value: Any) -> int:
    # core.args.as_int's rules, as for model_args and the CLI: True and 3.7 are refused
    try:
        return as_int(name, value)
    except ArgumentError:
        raise ValueError(f"generation_kwargs.{name} must be an integer, got {value!r}") from None


def _positive_int(name: str, value: Any) -> int:
    number = _int(name, value)
    if number < 1:
        raise ValueError(f"generation_kwargs.{name} must be >= 1, got {value!r}")
    return number
