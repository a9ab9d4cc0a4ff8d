"""A background thread's failure, kept until the next user call raises it."""

from __future__ import annotations

import threading
from collections.abc import Callable

from client_balance._logging import get_logger
from client_balance.errors import ClientBalanceError

__all__ = ["FailureSlot", "keep_running"]

_log = get_logger("consumer")


class FailureSlot:
    """Holds a background thread's first failure; ``raise_once`` raises and clears it.

    Later failures before that call are counted in a note of the first (they are logged where
    they happen): the first is the one whose effects came first (a commit that a failed
    ``on_revoked`` skipped), and replaced by a later one it was never raised.

    ``condition`` (if given) is the lock that guards the slot and is notified on a failure, so
    a user call waiting on it wakes up to raise the error instead of sleeping out its timeout.
    """

    __slots__ = ("_condition", "_failure", "_later", "fatal")

    def __init__(self, condition: threading.Condition | None = None) -> None:
        self._condition = condition or threading.Condition()
        self._failure: ClientBalanceError | None = None
        self._later = 0
        self.fatal: ClientBalanceError | None = None
        """A failure the thread cannot recover from: raised by every call, never cleared."""

    def store(self, error: ClientBalanceError) -> None:
        """Keep ``error`` for the next user call, unless one is kept already (then count it)."""
        with self._condition:
            if self._failure is None:
                self._failure = error
            else:
                self._later += 1
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
            later, self._later = self._later, 0
        if error is not None and later:
            more = "1 more failure" if later == 1 else f"{later} more failures"
            error.add_note(f"{more} came after it; each is in the log")
        if self.fatal is not None:  # raised by every call: its traceback would grow with each
            raise self.fatal.with_traceback(None)
        if error is not None:
            raise error


def keep_running(
    step: Callable[[], None],
    stop: threading.Event,
    *,
    thread: str,
    on_failure: Callable[[ClientBalanceError], None],
    pause_s: float = 1.0,
) -> None:
    """Run ``step`` until ``stop`` is set, whatever it raises.

    A background thread of the SDK must not die of one exception it did not expect (a bug, a
    ``BufferError``, an exception of the application's own librdkafka callback raised again by
    ``poll()``): the member would stop reporting or reading, and stall without a word. Such an
    exception is logged with its traceback, handed to ``on_failure`` (the next user call
    raises it), and the loop goes on after ``pause_s``. Only its type and text are kept, not
    the exception: its frames would hold the thread's clients until it is raised.
    """
    while not stop.is_set():
        try:
            step()
        except Exception as error:  # whatever it is: the thread lives on, and tells
            _log.exception("background thread step failed unexpectedly", loop=thread)
            on_failure(
                ClientBalanceError(
                    f"the {thread} thread failed and goes on: {type(error).__name__}: {error}"
                )
            )
            # confluent-kafka keeps a reference to an exception its callback raised: with its
            # traceback, that kept these frames, and through them the member, for good.
            error.__traceback__ = None
            stop.wait(pause_s)
