"""One declarative table per unified model: each argument's name, type, default, allowed values
and the source of its default, read by the constructor's checks, ``plan``, ``from_parts``, the
unknown-argument message, ``inspect.signature``, the docstring's Args and docs/support.md.

A model whose authors' own sources disagree on some defaults names each set as a
:class:`Preset`; ``unified.preset=<name>`` starts from that set, and the arguments given
explicitly override it. The preset itself is no part of the model's name: two ways to the
same values give the same store key.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...core.args import ArgumentError, as_choice, as_float, as_int, as_str
from ..common import DTYPES

__all__ = ["FRACTION", "Arg", "Arguments", "Preset", "Rule", "describing", "runtime"]


@dataclass(frozen=True)
class Rule:
    """A further check of an argument's value: ``test(value)`` must hold, else the message
    ``"<name>: <message>"`` (formatted with ``value``, as checked, and ``given``, as it came in)."""

    test: Callable[[Any], bool]
    message: str


#: a probability mass in (0, 1]
FRACTION = Rule(lambda p: 0 < p <= 1, "expected a number in (0, 1]; got {given!r}")


@dataclass(frozen=True)
class Arg:
    """One constructor argument.

    ``kind``: ``str``, ``int`` (at least ``minimum``, default 1), ``float`` (finite, at least
    ``minimum``, default 0) or ``"choice"`` (one of ``choices``, case-insensitive). ``source``:
    where the default comes from (the authors' file and setting; empty: ours, no authors'
    default). ``doc``: what it is, for the docstring. ``attr``: the attribute set on the model
    (default: the name; None: none). ``key``: its name among the settings that name the model
    (default: the name; None: not named by itself, as ``pretrained``, ``dtype`` and the runtime ones)."""

    name: str
    kind: Any
    default: Any
    doc: str
    source: str = ""
    minimum: float | None = None
    choices: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    attr: str | None = ""
    key: str | None = ""
    optional: bool = False
    quiet_default: bool = False

    def check(self, value: Any) -> Any:
        """``value`` as the model keeps it; an :class:`ArgumentError` naming the argument, what is
        allowed and what came in."""
        if self.kind == "choice":
            checked: Any = as_choice(self.name, value, self.choices)
        elif self.kind is str:
            checked = str(as_str(self.name, value))
        elif self.kind is int:
            checked = int(as_int(self.name, value, minimum=int(1 if self.minimum is None else self.minimum)))  # type: ignore[arg-type]
        else:
            checked = as_float(self.name, value, minimum=0.0 if self.minimum is None else self.minimum,
                               optional=self.optional)
            if checked is None:
                return None
        for rule in self.rules:
            if not rule.test(checked):
                raise ArgumentError(f"{self.name}: " + rule.message.format(value=checked, given=value))
        return checked

    @property
    def annotation(self) -> Any:
        kind = str if self.kind == "choice" else self.kind
        return kind | None if self.default is None else kind  # type: ignore[operator]

    def allowed(self) -> str:
        """What it takes, in words (the docstring's and the docs' wording)."""
        if self.kind == "choice":
            return "one of " + ", ".join(f"``{c}``" for c in self.choices)
        if self.kind is str:
            return "a string"
        low = (1 if self.minimum is None else int(self.minimum)) if self.kind is int else (self.minimum or 0.0)
        rules = [rule.message.split(";")[0].removeprefix("expected ") for rule in self.rules]
        if not rules or not rules[0].startswith("a number"):  # a range of its own says all
            rules.insert(0, f"{'an integer' if self.kind is int else 'a number'} >= {low:g}")
        return "; ".join(rules) + (" or none" if self.optional else "")


@dataclass(frozen=True)
class Preset:
    """A named set of defaults (``unified.preset=<name>``) and where the authors set them."""

    name: str
    values: Mapping[str, Any]
    source: str


def runtime(dtype: str = "auto", batch_size: int = 4, dtype_source: str = "",
            dtype_doc: str = "``auto`` is bfloat16 on CUDA where supported, else float16 on CUDA/MPS, else float32",
            ) -> tuple[Arg, ...]:
    """``device``, ``dtype`` and ``batch_size``, as every unified model takes them."""
    return (
        Arg("device", str, "cuda", "torch device (``cuda``, ``cuda:1``, ``cpu``); a missing accelerator is an "
            "error, never a silent CPU run", key=None),
        Arg("dtype", "choice", dtype, dtype_doc, source=dtype_source, choices=DTYPES, attr=None, key=None),
        Arg("batch_size", int, batch_size, "images described, or prompts drawn, per forward batch", key=None),
    )


def describing(temperature: float, temperature_source: str, max_new_tokens: int, max_source: str) -> tuple[Arg, ...]:
    """``temperature`` and ``max_new_tokens``, the describing defaults where the task sets none."""
    return (
        Arg("temperature", float, temperature, "describing temperature where the task sets none (0 = greedy)",
            source=temperature_source),
        Arg("max_new_tokens", int, max_new_tokens, "description length limit where the task sets none",
            source=max_source),
    )


@dataclass(frozen=True)
class Arguments:
    """A model's arguments in their order, and its presets (the first is the default)."""

    family: str
    args: tuple[Arg, ...]
    presets: tuple[Preset, ...] = ()
    by_name: dict[str, Arg] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        args = self.args
        if self.presets:
            names = tuple(p.name for p in self.presets)
            args = (*args, Arg("preset", "choice", names[0], "a named set of defaults where the authors' own "
                               "sources disagree (explicit arguments override its values)", choices=names, key=None))
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "by_name", {a.name: a for a in args})
        for preset in self.presets:
            unknown = set(preset.values) - set(self.by_name)
            if unknown:
                raise ValueError(f"preset {preset.name!r} sets no argument named {sorted(unknown)}")

    @property
    def names(self) -> list[str]:
        return list(self.by_name)

    @property
    def defaults(self) -> dict[str, Any]:
        """Every argument's default (the default preset's values)."""
        return {a.name: a.default for a in self.args}

    def given(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments a call gave (positional ones in the table's order); an unknown one is an
        :class:`ArgumentError` naming it and the allowed ones."""
        unknown = [k for k in kwargs if k not in self.by_name]
        if len(args) > len(self.args) or unknown:
            what = f"unified.{unknown[0]}" if unknown else f"{len(args)} positional arguments"
            raise ArgumentError(f"{what}: not an argument of unified={self.family} (allowed: {', '.join(self.names)})")
        given = dict(zip(self.names, args))
        twice = sorted(set(given) & set(kwargs))
        if twice:
            raise ArgumentError(f"unified.{twice[0]}: given twice (by position and by name)")
        return {**given, **kwargs}

    def resolve(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every argument checked, in the table's order: the defaults, then the preset's values,
        then the arguments ``given``."""
        values = self.defaults
        if self.presets:
            chosen = self.by_name["preset"].check(given.get("preset", values["preset"]))
            values.update(next(p for p in self.presets if p.name == chosen).values)
        values.update(given)
        return {a.name: a.check(values[a.name]) for a in self.args}

    def signature(self) -> inspect.Signature:
        """The constructor's signature (``self`` first), as ``inspect.signature`` shows it."""
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Signature([inspect.Parameter("self", kind)] + [
            inspect.Parameter(a.name, kind, default=a.default, annotation=a.annotation) for a in self.args],
            return_annotation=None)

    def docstring(self, indent: str = "    ") -> str:
        """The docstring's Args section."""
        lines = [f"{indent}Args:"]
        for a in self.args:
            source = f": {a.source}" if a.source else ""
            lines.append(f"{a.name} ({a.allowed()}; default ``{a.default!r}``{source}): {a.doc}.")
        for p in self.presets:
            values = ", ".join(f"{k}={v!r}" for k, v in p.values.items()) or "the defaults above"
            lines.append(f"preset ``{p.name}``: {values} ({p.source}).")
        return "\n".join([lines[0], *(textwrap.fill(line, 100, initial_indent=indent * 2, subsequent_indent=indent * 3)
                                     for line in lines[1:])])

    def defaults_cell(self) -> str:
        """docs/support.md's "defaults" cell: ``arg`` = value, grouped by source, then the presets."""
        groups: dict[str, list[str]] = {}  # by source, in the order of their first argument
        for a in self.args:
            if a.source:
                groups.setdefault(a.source, []).append(f"`{a.name}` = {_shown(a.default)}")
        cell = "; ".join(f"{', '.join(items)}: {source}" for source, items in groups.items())
        if self.presets:
            first, *others = self.presets
            cell += (f". The authors' own sources disagree; `unified.preset` names each set: `{first.name}` "
                     f"(the default, followed above: {first.source})")
            for p in others:
                values = ", ".join(f"`{k}` = {_shown(v)}" for k, v in p.values.items())
                cell += f"; `{p.name}`: {values} ({p.source})"
        return cell.replace("|", "\\|")


def _shown(value: Any) -> str:
    return f"`{value}`" if isinstance(value, str) and "/" in value else str(value)

