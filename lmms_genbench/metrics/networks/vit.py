"""ViT image embeddings: the CLS token of ``last_hidden_state`` (after the final layer norm,
not ``pooler_output``), as GenCeption's code does with ``google/vit-base-patch16-224-in21k``.
DINO (:mod:`.dino`) is this read-out on other weights and pixels."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .batched import ImageEncoder
from .loading import resolve_model

__all__ = ["DEFAULT_VIT", "ViTCLSEncoder"]

DEFAULT_VIT = "google/vit-base-patch16-224-in21k"


def _load_vit(name: str) -> Any:
    from transformers import ViTModel

    # the pooler is never used; skipping it avoids a randomly initialised head on DINO checkpoints
    return ViTModel.from_pretrained(name, add_pooling_layer=False)


class ViTCLSEncoder(ImageEncoder):
    """CLS token of ``last_hidden_state`` of a ViT (after the final layer norm).

    Args:
        model: hub name or local path (loaded with ``ViTModel.from_pretrained``), or a loaded
            model whose output has ``last_hidden_state`` (``ViTModel``, ``Dinov2Model``, ...).
        processor: image processor, or a name/path to load one; None loads the processor
            of ``model`` when it is a name, and is an error for an instance.
        device: torch device string.
        batch_size: images per forward pass.
    """

    default_model = DEFAULT_VIT
    #: builds the processor used when none is passed; None = the model's own (by name only)
    default_processor: Callable[[], Any] | None = None

    def _resolve(self, model: Any, processor: Any) -> tuple[str, Any, Any]:
        return resolve_model(
            model,
            _load_vit,
            companion=processor,
            default_companion=self.default_processor,
            companion_name="processor",
            hint=" (pass its image processor, or a model name to load both)",
        )

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def _encode_batch(self, batch: Sequence[Any], counts: dict[str, int]) -> Any:
        pixel_values = self._pixel_values(batch)
        out = self.model(pixel_values=pixel_values)
        return out.last_hidden_state[:, 0]
