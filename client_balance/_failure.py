"""A background thread's failure, kept until the next user call raises it."""

from __future__ import annotations

import threading

from client_balance.errors import ClientBalanceError

__all__ = ["FailureSlot"]


class FailureSlot:
    """Holds the latest failure of a background thread; ``raise_once`` raises and clears it.

    ``condition`` (if given) is the lock that guards the slot and is notified on a failure, so
    a user call waiting on it wakes up to raise the error instead of sleeping out its timeout.
    """

    __slots__ = ("_condition", "_failure", "fatal")

    def __init__(self, condition: threading.Condition | None = None) -> None:
        self._condition = condition or threading.Condition()
        self._failure: ClientBalanceError | None = None
        self.fatal: ClientBalanceError | None = None
        """A failure the thread cannot recover from: raised by every call, never cleared."""

    def store(self, error: ClientBalanceError) -> None:
        """Keep ``error`` for the next user call (a later failure replaces it)."""
        with self._condition:
            self._failure = error
            self._condition.notify_all()

    def store_fatal(self, error: ClientBalanceError) -> None:
        """Keep ``error`` for every call from now on."""
        with self._condition:
            self.fatal = error
            self._condition.notify_all()

    def raise_once(self) -> None:
        """Raise the fatal failure if there is one, else the kept failure, once."""
        if self._failure is None and self.fatal is None:
            return  # the common case, checked before the lock: every user call asks
        with self._condition:
            error, self._failure = self._failure, None
        if self.fatal is not None:
            raise self.fatal
        if error is not None:
            raise error
