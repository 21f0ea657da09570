"""BLIP3-o as a unified model: :class:`Blip3oUnified` (describe with its Qwen2.5-VL half, draw
with its DiT and diffusion decoder), read from the authors' published checkpoint layout."""

from .model import Blip3oUnified

__all__ = ["Blip3oUnified"]
