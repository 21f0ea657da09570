"""Unified models: one network that both describes images and draws them.

See :mod:`.base` for the interface and how to add a model; shipped: ``janus`` (Janus-Pro
through transformers) and ``bagel`` (BAGEL, :mod:`.bagel`); registry.py lists them.
"""

from .base import UnifiedModel, run_isolated
from .registry import UNIFIED_MODELS, build_unified, plan_unified, unified_concurrency, unified_names

__all__ = ["UNIFIED_MODELS", "UnifiedModel", "build_unified", "plan_unified", "run_isolated", "unified_concurrency",
           "unified_names"]
