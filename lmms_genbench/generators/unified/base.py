"""The interface of a unified model: one network that both describes and draws.

A unified model stands in for the describer *and* the generator of the cycle
engine, so it implements both halves:

* ``describe(images, prompt, gen_kwargs)``: one text (or
  :class:`~lmms_genbench.generators.GenerationFailure`) per image, as
  :class:`lmms_genbench.engine.Describer`. ``gen_kwargs`` are the task's
  decoding settings (``max_new_tokens``, ``temperature``, ``do_sample``,
  ``top_p``, ``until``...); honour the ones the model supports.
* ``generate(prompts, seeds)``: one PIL image (or failure) per prompt, as
  :class:`lmms_genbench.generators.Generator`. The image must depend only on its
  own prompt and seed, not on its neighbours in a batch, so cached chains stay
  valid however a rerun batches them.

and three attributes:

* ``name``: identifies the weights and every setting that changes an output of
  either half; the artifact store keys both texts and images by it.
* ``batch_size``: items per forward batch (the engine also sends drawings in
  chunks of this size).
* ``concurrent``: True only if ``describe`` and ``generate`` may run at the same
  time on two threads. A single network on one device usually may not (shared
  weights, caches and memory), and then the engine runs the two halves in turn.

Per-item problems are returned as ``GenerationFailure``; a model that cannot work
at all (weights missing, no such device) raises
:class:`~lmms_genbench.generators.GeneratorConfigError` from its constructor.

To add a model (BAGEL, Show-o, ...): write a class with these members whose
constructor takes explicit, validated keyword arguments (the ``unified.<arg>=``
values of ``--model_args``), and register it in
:data:`lmms_genbench.generators.unified.registry.UNIFIED_MODELS`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from PIL import Image

from ...core.failures import GenerationFailure
from ..base import GenerationResult
from ..common import describe_error

logger = logging.getLogger(__name__)

DescribeResult = str | GenerationFailure
T = TypeVar("T")
R = TypeVar("R")


@runtime_checkable
class UnifiedModel(Protocol):
    """One model that turns images into texts and texts into images."""

    name: str
    batch_size: int
    concurrent: bool

    def describe(
        self, images: Sequence[Image.Image], prompt: str, gen_kwargs: dict[str, Any]
    ) -> list[DescribeResult]: ...

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GenerationResult]: ...


def run_isolated(
    call: Callable[[list[T]], list[R]],
    items: Sequence[T],
    batch_size: int,
    what: str,
    on_error: Callable[[], None] | None = None,
) -> list[R | GenerationFailure]:
    """``call`` on chunks of ``batch_size``; a failing chunk is retried item by item.

    The retry pins a failure on the item that causes it (and gets past an
    out-of-memory batch), so one bad input never sinks its batch. ``on_error``
    runs after a failed batch (e.g. to free accelerator memory).
    """
    results: list[R | GenerationFailure] = []
    for start in range(0, len(items), batch_size):
        chunk = list(items[start : start + batch_size])
        try:
            out = call(chunk)
            if len(out) != len(chunk):
                raise RuntimeError(f"{what} returned {len(out)} results for {len(chunk)} inputs")
            results.extend(out)
            continue
        except Exception as exc:  # noqa: BLE001 - any model error is isolated
            if on_error is not None:
                on_error()
            if len(chunk) == 1:
                logger.warning("%s failed: %s", what, describe_error(exc))
                results.append(GenerationFailure(f"{what} raised {describe_error(exc)}"))
                continue
            logger.warning("%s: batch of %d failed (%s); retrying one by one", what, len(chunk), describe_error(exc))
        results.extend(run_isolated(call, chunk, 1, what, on_error))
    return results
