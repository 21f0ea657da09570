"""Show-o as a unified model (``unified=showo``): :class:`ShowoUnified` in :mod:`.model`; the
MAGVIT-v2 tokenizer (:mod:`.magvit`), token layouts and omni-attention masks (:mod:`.omni`),
MaskGIT decoding (:mod:`.maskgit`) and checkpoint reading (:mod:`.loading`) beside it."""

from .model import ShowoUnified

__all__ = ["ShowoUnified"]
