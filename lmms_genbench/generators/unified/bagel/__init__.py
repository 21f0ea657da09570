"""BAGEL (``ByteDance-Seed/BAGEL-7B-MoT``) as ``unified=bagel``, written natively: the authors'
code needs flash-attn and transformers 4.x (see docs/support.md)."""

from .unified import BagelUnified

__all__ = ["BagelUnified"]
