"""Small helpers every experiment runner uses."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["finite", "spread"]

T = TypeVar("T")


def finite(obj):
    """JSON-safe copy: non-finite floats become ``None``."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def spread(items: Sequence[T], m: int) -> list[T]:
    """At most ``m`` items taken evenly along ``items`` (so every family and transfer condition of a
    split stays represented); ``m <= 0`` keeps all."""
    if m <= 0 or len(items) <= m:
        return list(items)
    step = len(items) / m
    return [items[int(i * step)] for i in range(m)]
