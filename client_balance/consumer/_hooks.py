"""The application's callbacks: partition lifecycle hooks, and where their failures wait.

``on_assigned(positions)`` runs once partitions are registered (key -> the offset fetching
starts at), before any of their batches is handed out. ``on_revoked(positions)`` runs when
partitions are released, after their last batch was confirmed (or rolled back) and before the
final commit, with the confirmed positions that commit will write: the place to flush state.
If ``on_revoked`` raises, the partitions are released without that commit (their confirmed
messages come again to the next holder): the committed offset never passes an unwritten state.
``on_lost(positions)`` runs when partitions were taken away with nothing committed (this member
was fenced, its claim lapsed, or the topic was recreated): key -> the last confirmed position,
which may be behind what the group has committed since.

Hooks run one at a time, never concurrently with each other. A hook or an ``assigner`` that
raises is logged with the member and the round, and its error (a :class:`CallbackError`) is
raised from the application's next call, or by ``shutdown()`` itself; nothing else stops for
it (the aiokafka pattern).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType

from client_balance._failure import FailureSlot
from client_balance._logging import get_logger
from client_balance.errors import CallbackError, ConfigError

__all__ = ["PartitionHook", "PartitionHooks", "check_callback"]

_log = get_logger("hooks")

PartitionHook = Callable[[Mapping[str, int]], object]
"""A lifecycle hook: called with partition key -> offset (read-only), keys sorted."""


def check_callback(name: str, given: object) -> None:
    """Refuse a callback (a hook, an ``assigner``) the engine's threads could not run."""
    if given is None:
        return
    if not callable(given):
        raise ConfigError(f"{name}={given!r} is not callable; give a function or None")
    # Called from a thread, an async function only makes a coroutine that nobody awaits: its
    # body never runs, and the engine went on as if it had (a release without the flush).
    if any(
        inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)
        for function in (given, type(given).__call__)  # the method of a callable object
    ):
        raise ConfigError(
            f"{name}={given!r} is an async function, which the consumer's threads would call "
            "and never await; give a plain function or None (from it, reach an event loop "
            "with loop.call_soon_threadsafe)"
        )


class PartitionHooks:
    """The three lifecycle hooks of one consumer, run one at a time; failures kept."""

    def __init__(
        self,
        consumer_id: str,
        *,
        on_assigned: PartitionHook | None = None,
        on_revoked: PartitionHook | None = None,
        on_lost: PartitionHook | None = None,
    ) -> None:
        self._consumer_id = consumer_id
        self._hooks = {"on_assigned": on_assigned, "on_revoked": on_revoked, "on_lost": on_lost}
        self._lock = threading.RLock()  # re-entrant: a hook may call disconnect() itself
        self.failures = FailureSlot()
        self.round_number = 0
        """The reconcile round running now (for the logs and errors of its callbacks)."""
        self._running_in: threading.Thread | None = None  # the thread inside a hook now

    def assigned(self, positions: Mapping[str, int]) -> None:
        """Run ``on_assigned`` for partitions registered now."""
        self._call("on_assigned", positions)

    def revoked(self, positions: Mapping[str, int]) -> bool:
        """Run ``on_revoked`` for partitions about to be released: False if it raised.

        Their commit is then not written: the state it flushes may not have been.
        """
        return self._call("on_revoked", positions)

    def lost(self, positions: Mapping[str, int]) -> None:
        """Run ``on_lost`` for partitions taken away with nothing committed."""
        self._call("on_lost", positions)

    def failed(self, callback: str, error: BaseException | str) -> None:
        """Log a callback's failure and keep it for the application's next call."""
        reason = error if isinstance(error, str) else f"raised {type(error).__name__}: {error}"
        _log.error(
            "application callback failed",
            callback=callback,
            consumer_id=self._consumer_id,
            round=self.round_number,
            reason=reason,
            exc_info=None if isinstance(error, str) else error,  # where in the user's code
        )
        self.failures.store(
            CallbackError(
                f"{callback} of {self._consumer_id} failed in reconcile round "
                f"{self.round_number}: {reason}",
                callback=callback,
                round_number=self.round_number,
            )
        )

    def _call(self, name: str, positions: Mapping[str, int]) -> bool:
        hook = self._hooks[name]
        if hook is None or not positions:
            return True
        view = MappingProxyType(dict(sorted(positions.items())))
        with self._lock:
            outer, self._running_in = self._running_in, threading.current_thread()
            try:
                returned = hook(view)
            except Exception as error:  # whatever the hook raises waits for the next call
                self.failed(name, error)
                return False
            finally:
                self._running_in = outer
            if inspect.isawaitable(returned):  # a plain function handing on an async one's work
                if inspect.iscoroutine(returned):
                    returned.close()  # reported here, not as "never awaited" on stderr
                self.failed(name, f"returned {returned!r}, which is never awaited: its work did "
                            "not run; give a function that does it before returning")  # fmt: skip
                return False
        return True

    def running_here(self) -> bool:
        """Whether the calling thread is inside one of the hooks now."""
        return self._running_in is threading.current_thread()
