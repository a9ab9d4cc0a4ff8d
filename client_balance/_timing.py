"""Pure timing objects with an injectable clock, so waits can be tested without sleeping."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable

from client_balance.errors import ConfigError

__all__ = ["MAX_WAIT_S", "Deadline", "OncePer", "check_seconds"]

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


class OncePer:
    """Lets each key through once per ``window_s``, and counts what it held back meanwhile.

    For what is said again and again (a broker away repeats its error on every try): the first
    goes on, the rest wait out the window. At most ``keys_kept`` keys are remembered; past that
    all are forgotten, so memory never grows. Safe from any thread.
    """

    def __init__(
        self,
        window_s: float,
        clock: Callable[[], float] = time.monotonic,
        keys_kept: int = 256,
    ) -> None:
        self._window_s = window_s
        self._clock = clock
        self._keys_kept = keys_kept
        self._lock = threading.Lock()
        self._passed: dict[Hashable, tuple[float, int]] = {}  # key -> (passed at, held since)

    def admit(self, key: Hashable) -> int | None:
        """None if ``key`` passed less than ``window_s`` ago; else how many were held since."""
        now = self._clock()
        with self._lock:
            passed_at, held = self._passed.get(key, (-math.inf, 0))
            if now - passed_at < self._window_s:
                self._passed[key] = (passed_at, held + 1)
                return None
            if len(self._passed) >= self._keys_kept:
                self._passed.clear()
            self._passed[key] = (now, 0)
            return held
