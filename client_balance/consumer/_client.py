"""The client lock: every call on confluent-kafka's ``Consumer`` is made holding it.

librdkafka is thread-safe in principle, but a ``get_watermark_offsets`` made while another
thread sits in ``consume()`` never returns (confluent-kafka 2.16.1, seen here). Holding one lock
for every call also makes a ``consume()`` and the distribution of what it returned one step, so
no message fetched before a partition was released or rewound can reach a buffer afterwards.

A thread that waits to make a call makes fetching threads give way (``try_fetch`` refuses
while anyone waits), so a command waits at most one short ``consume()``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import TypeVar

from client_balance._kafka import Consumer, KafkaException, kafka_tp, stopped
from client_balance._logging import get_logger
from client_balance.consumer._buffers import HeldPartition
from client_balance.errors import ClientBalanceError

__all__ = ["ClientGate", "refresh_highs"]

_T = TypeVar("_T")
_log = get_logger("fetch")
_HIGHS_WAIT_S = 0.5  # a scrape's wait for the client; one consume() lasts at most 0.5 s


class ClientGate:
    """Serializes calls on one client; queues calls that nobody waits for."""

    def __init__(
        self, on_wait: Callable[[], None], on_release: Callable[[], None] = lambda: None
    ) -> None:
        self._lock = threading.RLock()
        self._count_lock = threading.Lock()
        self._waiting_calls = 0
        self._commands: deque[Callable[[], object]] = deque()
        self._on_wait = on_wait
        self._on_release = on_release
        self.releases = 0
        """Calls finished so far: a fetcher refused while one ran waits only until it ends."""
        self.closed = False

    @property
    def has_commands(self) -> bool:
        """Calls are queued for the next holder of the lock."""
        return bool(self._commands)

    def submit(self, action: Callable[[], object]) -> None:
        """Have ``action`` made by the next holder of the client lock; nobody waits for it."""
        self._commands.append(action)
        self._on_wait()

    def call(self, action: Callable[[], _T]) -> _T:
        """Make ``action`` (calls on the client) holding the client lock."""
        self._acquire(-1)
        return self._make(action)

    def call_within(self, action: Callable[[], object], wait_s: float) -> bool:
        """Make ``action`` if the lock comes within ``wait_s``; else its next holder makes it.

        For what must not stall behind a call that hangs (a commit to a coordinator that is
        away holds the lock for as long as it waits): False if ``action`` was queued.
        """
        if not self._acquire(wait_s):
            self.submit(action)
            return False
        self._make(action)
        return True

    def _acquire(self, wait_s: float) -> bool:
        with self._count_lock:
            self._waiting_calls += 1
        try:
            return self._lock.acquire(timeout=wait_s)
        finally:
            with self._count_lock:
                self._waiting_calls -= 1

    def _make(self, action: Callable[[], _T]) -> _T:
        try:
            if self.closed:
                raise stopped("the consumer is closed")
            self._serve_commands()
            return action()
        finally:
            self.releases += 1  # before the release, under the lock: no increment is lost
            self._lock.release()
            self._on_release()

    def try_fetch(self, fetch: Callable[[], object]) -> bool:
        """Run ``fetch`` unless another thread holds or waits for the client lock."""
        if self._waiting_calls or not self._lock.acquire(blocking=False):
            return False
        try:
            if self.closed:
                return False
            self._serve_commands()
            fetch()
        finally:
            self._lock.release()
        return True

    def close(self, close_client: Callable[[], None]) -> None:
        """Refuse further calls and close the client, once the current call is done."""
        with self._lock:
            self.closed = True
            close_client()

    def _serve_commands(self) -> None:
        while self._commands:
            action = self._commands.popleft()
            try:
                action()
            except ClientBalanceError as error:
                _log.warning("background call failed", error=str(error))


def refresh_highs(
    gate: ClientGate,
    consumer: Consumer,
    states: Callable[[], Iterable[HeldPartition]],
    lock: threading.Condition,
) -> None:
    """Update the held partitions' high watermarks from the client's cache (no I/O).

    A metrics scrape asks: it waits for the client at most ``_HIGHS_WAIT_S``, then reports the
    marks known so far (the refresh is queued), not stall behind a hanging commit.
    """
    gate.call_within(lambda: _refresh_highs(consumer, states(), lock), _HIGHS_WAIT_S)


def _refresh_highs(
    consumer: Consumer, states: Iterable[HeldPartition], lock: threading.Condition
) -> None:
    for state in states:
        try:
            _, high = consumer.get_watermark_offsets(kafka_tp(state.partition), cached=True)
        except KafkaException:
            continue
        with lock:
            if high >= 0:
                state.high = int(high)
