"""Short, stable generator names that change whenever the output can."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

_SLUG_MAX = 40


def slug(text: str, *, max_len: int = _SLUG_MAX) -> str:
    """Lower-case ``text`` and keep only ``[a-z0-9.]`` runs joined by dashes."""
    cleaned = re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")
    return cleaned[:max_len].rstrip("-.") or "x"


def settings_hash(settings: Mapping[str, Any]) -> str:
    """8 hex digits of a hash over ``settings`` (JSON, keys sorted).

    Sorting keys makes the hash independent of argument order, so the same
    settings always give the same name across runs and machines.
    """
    blob = json.dumps(dict(settings), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:8]


def generator_name(prefix: str, label: str, settings: Mapping[str, Any]) -> str:
    """``<prefix>-<slug of label>-<hash of settings>``."""
    return f"{prefix}-{slug(label)}-{settings_hash(settings)}"
