"""``unified=lmms:<model type>``: one lmms-eval model type that both answers and draws,
loaded once, in both roles of the cycle.

lmms-eval 0.7.3's ``bagel`` fixes its role per instance: ``mode=understanding`` answers
questions about images with text, ``mode=generate`` draws (``{"text", "images": [paths]}``,
read by :func:`..lmms_backend.read_answer`). Such a class is switched, not loaded twice: it
is built in its drawing mode (which sets up its output folder) and, before each describe or
draw call, given that role's ``mode`` and the inference settings its module's
``BASE_PARAMS`` holds for it (the user's own overrides of those settings kept). Any class
with that interface works: a ``mode`` attribute and a module-level ``BASE_PARAMS`` holding an
answering and a drawing mode. A class without it is refused with the decoupled way out.

Seeds: as for ``generator=lmms:``, these classes take no per-prompt seed.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

from ...core.args import ArgumentError
from ...core.failures import GenerationFailure
from ..base import GenerationResult
from ..lmms_backend import LmmsGenerator
from .base import run_isolated

__all__ = ["MODES", "LmmsUnified"]

#: (answering mode, drawing mode) tried in order in a class's BASE_PARAMS
MODES = (("understanding", "generate"),)


class LmmsUnified:
    """One lmms-eval model instance as describer and generator.

    Args:
        model: the lmms-eval model type (``bagel``), given as ``unified=lmms:<model type>``.
        batch_size: prompts per drawing call (ours).
        **model_args: the model's own constructor arguments (``unified.pretrained=...``); its
            ``mode`` is set here, per role.
    """

    concurrent = False  # one network: the engine runs describing and drawing in turn

    def __init__(self, model: str | None = None, batch_size: int = 1, **model_args: Any) -> None:
        if "mode" in model_args:
            raise ArgumentError(f"mode: unified=lmms:{model} sets the mode per role itself; drop unified.mode")
        from ... import host
        from ..lmms_backend import repair_registration

        name = str(model or "").strip()
        if name:
            repair_registration(name)
        modes = _modes(host.model_class(name, role="unified model")) if name else None
        if name and modes is None:
            raise ArgumentError(
                f"unified=lmms:{name}: lmms-eval's {name} cannot switch between answering and drawing in one "
                f"instance (no mode attribute with {' and '.join('/'.join(m) for m in MODES)} modes in its "
                f"module's BASE_PARAMS); run it decoupled: describer=<model>,generator=lmms:{name}")
        answer, draw = modes or ("", "")
        self.generator = _UnifiedLmms(model, batch_size, mode=draw, **model_args)
        self.lm, self.batch_size = self.generator.lm, self.generator.batch_size
        self.name, self.legacy_names = self.generator.name, self.generator.legacy_names
        base = getattr(sys.modules.get(type(self.lm).__module__), "BASE_PARAMS", {})
        drawing = dict(getattr(self.lm, "inference_params", {}) or {})
        # the user's overrides (cfg_text_scale=..., do_sample=...) folded into the drawing settings
        overrides = {k: v for k, v in drawing.items() if base.get(draw, {}).get(k, object()) != v}
        answering = {**base.get(answer, {}), **{k: v for k, v in overrides.items() if k in base.get(answer, {})}}
        self._roles = {"describe": (answer, answering), "generate": (draw, drawing)}
        self._lock = threading.Lock()

    def _role(self, role: str) -> None:
        mode, params = self._roles[role]
        self.lm.mode, self.lm.inference_params = mode, dict(params)

    def describe(self, images: Sequence[Any], prompt: str, gen_kwargs: dict[str, Any]) -> list[str | GenerationFailure]:
        """One text per image, as ``describer=<model>`` asks it (one request per image)."""
        with self._lock:
            self._role("describe")
            return run_isolated(self._answer(prompt, gen_kwargs), list(images), max(len(images), 1),
                                f"{self.generator.model} (answering)")

    def _answer(self, prompt: str, gen_kwargs: dict[str, Any]):
        from ... import host

        def call(images: list[Any]) -> list[str | GenerationFailure]:
            texts = host.generate(self.lm, [(prompt, gen_kwargs, [image]) for image in images], quiet=True)
            return [t if isinstance(t, str) else GenerationFailure(f"the model answered {type(t).__name__}")
                    for t in texts]

        return call

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GenerationResult]:
        with self._lock:
            self._role("generate")
            return self.generator.generate(prompts, seeds)

    def __repr__(self) -> str:
        return f"LmmsUnified(name={self.name!r})"


class _UnifiedLmms(LmmsGenerator):
    """The generator half, whose load failures name the role the user typed (unified.<arg>)."""

    ROLE = ("unified model", "unified.")


def _modes(cls: type) -> tuple[str, str] | None:
    """The (answering, drawing) modes ``cls``'s module offers, or None."""
    base = getattr(sys.modules.get(cls.__module__), "BASE_PARAMS", None)
    if not isinstance(base, dict):
        return None
    return next(((a, d) for a, d in MODES if a in base and d in base), None)
