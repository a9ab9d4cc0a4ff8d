"""Pure timing objects with an injectable clock, so waits can be tested without sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Deadline"]


class Deadline:
    """A point in time ``timeout_s`` from now, on ``clock`` (``time.monotonic`` by default)."""

    __slots__ = ("_clock", "_end_s")

    def __init__(self, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._end_s = clock() + timeout_s

    def left_s(self) -> float:
        """Seconds left, never below zero."""
        return max(self._end_s - self._clock(), 0.0)

    @property
    def expired(self) -> bool:
        """Whether no time is left."""
        return self._clock() >= self._end_s
