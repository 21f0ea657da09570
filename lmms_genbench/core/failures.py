"""The failure vocabulary every layer shares: a prompt that could not be drawn, and a
backend that cannot work at all.

Generators return or raise them, the engine records or stops on them, scorers and models
read them; they live at the bottom so that none of those imports another for a word.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GenerationFailure", "GeneratorConfigError", "ProbeFailure"]


@dataclass(frozen=True)
class GenerationFailure:
    """A prompt the backend could not turn into an image, with the reason.

    Returned in place of an image so one bad prompt never sinks its batch.
    """

    reason: str


class GeneratorConfigError(RuntimeError):
    """The backend cannot work at all (bad key, no quota, unknown model).

    Raised rather than returned per prompt: the engine stops the run instead
    of failing every doc, and of paying for descriptions nobody will draw.
    ``fix``: what the user should change, shown in the run's last line
    (:func:`lmms_genbench.generators.config_failure`).
    """

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.fix = fix


class ProbeFailure(RuntimeError):
    """A generator loaded but could not draw its probe picture: its error says "did not draw",
    not "did not load" (:func:`lmms_genbench.core.errors.load_failure`)."""
