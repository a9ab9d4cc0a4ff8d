"""Pure timing objects with an injectable clock, so waits can be tested without sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable

from client_balance.errors import ConfigError

__all__ = ["MAX_WAIT_S", "Deadline", "check_seconds"]

MAX_WAIT_S = 1e9
"""Longest wait a call accepts: threading's waits overflow near 9.2e9 s."""


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


def check_seconds(name: str, value: object, *, below_s: float = MAX_WAIT_S) -> float:
    """A number of seconds given to a call: finite, >= 0 and below ``below_s``, else ConfigError.

    nan and inf fail the range comparison; bools and strings are refused by type.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < below_s:
        raise ConfigError(
            f"{name}={value!r} is not allowed; give a finite number of seconds >= 0 "
            f"(below {below_s:g})"
        )
    return float(value)
