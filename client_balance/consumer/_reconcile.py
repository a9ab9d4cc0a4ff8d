"""The reconcile thread and the round it runs: targets, group checks, release, register.

Every ``reconcile_interval_s``, at once on start, and whenever woken, the round refreshes
metadata, asks :class:`TargetPlanner` for the partitions this member should hold, releases what
it holds beyond them (and what became unsubscribable), then registers what it lacks, in that
order. Releases and registrations run the application's lifecycle hooks (``_hooks``).

A round that only :meth:`Reconciler.wake` asked for (the status topic changed, a pin, fencing)
is *light*: it works from the metadata of the last full round instead of asking the cluster
again, because nothing that wakes it changes partitions or leaders, and on the way from a
member leaving or joining to its partitions being fetched again that query is a round trip
waiting on the client lock. The interval's rounds, :meth:`Reconciler.run_round` and any round
an interval after the last full one are full.

A failure of one round is logged and kept for the next user call; the thread goes on. A Kafka
error that only says the cluster is out of reach for now (a broker down, a timeout, a
coordinator moving) is logged and not raised: the next round tries again, which is how workers
ride out a broker restart without the application doing anything.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from client_balance._failure import FailureSlot
from client_balance._kafka import is_transient
from client_balance._logging import get_logger
from client_balance.errors import ClientBalanceError

__all__ = ["RELEASE_WAIT_S", "Reconciler"]

_log = get_logger("reconcile")

RELEASE_WAIT_S = 3.0
"""How long a release waits for a batch that is out (TubeMQ's pullRebConfirmWaitPeriodMs)."""


class Reconciler:
    """Runs ``round_once(full)`` now, every ``interval_s``, and whenever woken, until stopped."""

    def __init__(
        self,
        round_once: Callable[[bool], None],
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._round_once = round_once
        self._interval_s = interval_s
        self._clock = clock
        self._wake = threading.Event()
        self._full_wanted = True  # the first round is full
        self._last_full_s = clock()
        self._stop = threading.Event()
        self._lock = threading.Condition()
        self._finished = 0  # rounds finished
        self._running_round = False
        self._failures = FailureSlot()
        self._thread = threading.Thread(
            target=self._run, name="client-balance-reconcile", daemon=True
        )

    def start(self) -> None:
        """Start the thread; its first round runs at once."""
        self._thread.start()

    @property
    def thread(self) -> threading.Thread:
        """The thread rounds (and the hooks they call) run on."""
        return self._thread

    def run_round(self, timeout_s: float) -> bool:
        """Have a round start after this call and wait for it: True if it ended in time."""
        with self._lock:
            # A round already running began before this call: wait for the one after it.
            needed = self._finished + (2 if self._running_round else 1)
            self._full_wanted = True
            self._wake.set()
            # A stop ends the wait: the round waited for would never come.
            self._lock.wait_for(lambda: self._finished >= needed or self._stop.is_set(), timeout_s)
            return self._finished >= needed

    def wake(self) -> None:
        """Have a round start soon, without waiting for it."""
        self._wake.set()

    def stop(self) -> None:
        """Stop after the current round."""
        with self._lock:
            self._stop.set()
            self._lock.notify_all()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def raise_failure(self) -> None:
        """Raise (once) the failure of a round since the last call."""
        self._failures.raise_once()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                self._wake.clear()
                self._running_round = True
                now = self._clock()
                full = self._full_wanted or now - self._last_full_s >= self._interval_s
                self._full_wanted = False
                if full:
                    self._last_full_s = now
            try:
                self._round_once(full)
            except ClientBalanceError as error:
                _log.warning("reconcile round failed", error=str(error), kind=type(error).__name__)
                if not is_transient(error):
                    self._failures.store(error)
            except BaseException as error:  # a hook's sys.exit() too: it ended the thread, unsaid
                _log.exception("reconcile round failed unexpectedly")
                self._failures.store(ClientBalanceError(f"reconcile round failed: {error!r}"))
            with self._lock:
                self._running_round = False
                self._finished += 1
                self._lock.notify_all()
            if not self._wake.wait(self._interval_s):
                with self._lock:
                    self._full_wanted = True  # the interval's round
