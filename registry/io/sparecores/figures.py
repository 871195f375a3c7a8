"""What the parsers keep of a tool's figures: positive finite numbers, each config or app once."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable


MAX_BYTES = 2**50   # a size (working set, block, cache) past a pebibyte: damaged (past INT64, a database error)


def positive(value) -> float | None:
    """`value` as a float when it is a finite number above zero (a rate, a latency), else None."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x > 0 else None


def first_each(items: Iterable, key: Callable) -> list:
    """Drop the Nones; of items with the same key (a repeated line), keep the first."""
    out, seen = [], set()
    for item in items:
        if item is not None and key(item) not in seen:
            seen.add(key(item))
            out.append(item)
    return out
