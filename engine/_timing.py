"""Stage timings: every result reports milliseconds, rounded to the microsecond, taken on ``time.perf_counter``."""

from __future__ import annotations

import time

__all__ = ["ms", "ms_since"]


def ms(seconds: float) -> float:
    """``seconds`` in milliseconds, rounded to 3 decimals (a microsecond)."""
    return round(seconds * 1000.0, 3)


def ms_since(t0: float) -> float:
    """Milliseconds since ``t0`` (a ``time.perf_counter()`` reading)."""
    return ms(time.perf_counter() - t0)
