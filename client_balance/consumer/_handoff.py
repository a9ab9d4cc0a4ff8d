"""A ``shutdown()`` called from a callback, finished on a thread of its own.

The call that runs a hook (or a round, for an ``assigner``) holds the keeper lock the shutdown
needs, and a round cannot join its own thread: the shutdown waits on a thread of its own for
that call to return. What it raises is kept for the next ``shutdown()``, which waits for it,
rather than left to ``threading.excepthook`` (which prints to stderr).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from client_balance._failure import FailureSlot
from client_balance._logging import get_logger
from client_balance.errors import ClientBalanceError

__all__ = ["HandOff"]

_log = get_logger("consumer")

_STOPPER_NAME = "client-balance-shutdown"


class HandOff:
    """Runs a shutdown on a thread of its own; the next ``shutdown()`` raises its failure."""

    def __init__(self, hook_failures: FailureSlot) -> None:
        self._hook_failures = hook_failures
        self._failure: ClientBalanceError | None = None
        self._ran = False

    def thread(self, stop: Callable[[], None]) -> threading.Thread:
        """A thread (not started) that runs ``stop`` and keeps what it raises."""
        return threading.Thread(target=self._run, args=(stop,), name=_STOPPER_NAME)

    def _run(self, stop: Callable[[], None]) -> None:
        self._ran = True
        try:
            stop()
        except ClientBalanceError as error:  # nobody waits on this thread to be told
            _log.error("the shutdown begun in a callback failed", error=str(error))
            self._failure = error

    def raise_once(self) -> None:
        """After a handed-off shutdown: raise its failure, else a callback's not raised yet."""
        if not self._ran:
            return
        error, self._failure = self._failure, None
        if error is not None:
            raise error
        self._hook_failures.raise_once()
