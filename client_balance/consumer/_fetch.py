"""The one place that drives confluent-kafka's ``Consumer`` (built by ``_kafka``).

Every call on the ``Consumer`` is made holding the client lock (``_client.ClientGate``).

Whoever needs messages fetches them: a ``get_message`` caller that finds nothing buffered
takes the client lock and calls ``consume()`` itself, so a batch needs no hand-over between
threads (that hand-over cost a fifth of the throughput). The background thread fetches only
while no caller has for a moment, keeping buffers warm and librdkafka's callbacks served, and
commits confirmed positions on the interval.

Per partition the fetcher keeps a buffer of fetched messages (``_shelf``) and at most one
batch out (``take_batch`` .. ``settle``). A partition whose buffer is full is paused until the
application catches up; once the buffers of all partitions hold ``max_buffered_bytes``, nobody
fetches until batches are taken out of them, or, if only partitions whose batch is out hold
them, a caller fetches for the others in their place (``Shelf.stuck``). Positions are Kafka's
"next message to read"; only confirmed positions are ever committed, so delivery is at least
once and a crash loses nothing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from client_balance._failure import FailureSlot, keep_running
from client_balance._kafka import (
    KafkaError,
    KafkaException,
    Message,
    commit_client,
    fetch_client,
    from_kafka_exception,
    kafka_tp,
)
from client_balance._logging import get_logger
from client_balance._secrets import scrub
from client_balance._timing import Deadline
from client_balance.consumer._buffers import (
    Batch,
    FetchErrors,
    HeldPartition,
    Positions,
    Settled,
    why_nothing,
)
from client_balance.consumer._client import ClientGate, refresh_highs
from client_balance.consumer._commits import Committer
from client_balance.consumer._retention import restart_out_of_range
from client_balance.consumer._shelf import Shelf
from client_balance.consumer._starts import StartChooser, Starter
from client_balance.errors import ClientBalanceError
from client_balance.keys import TopicPartition
from client_balance.settings import ClientBalanceSettings

__all__ = ["Batch", "Fetcher", "Positions", "StartChooser"]

_log = get_logger("fetch")

_Sink = Callable[[str], None]
"""Where librdkafka's statistics documents go (a JSON text each)."""

_IDLE_WAIT_S = 0.5
_CONSUME_WAIT_S = 0.05
_CALLER_CONSUME_WAIT_S = 0.005
"""A caller with nothing queued for it waits this long for messages to come. What is queued
already goes out at once, as Kafka's ``poll()`` would; librdkafka's ``consume()`` waits for a
full batch, which cost the first message of a sparse topic the whole wait (docs/benchmarks.md)."""
_CALLERS_FETCH_FOR_S = 0.1
"""The background thread stays out of fetching while a caller asked for a batch this recently."""


class Fetcher:
    """The confluent-kafka ``Consumer`` behind a client-balanced consumer (module docstring)."""

    def __init__(self, settings: ClientBalanceSettings, statistics: _Sink | None = None) -> None:
        self._settings = settings
        self._timeout_s = settings.request_timeout_s
        self._consumer = fetch_client(settings, self._on_kafka_error, statistics)
        self._lock = threading.Condition()
        self._held: dict[TopicPartition, HeldPartition] = {}
        self.shelf = Shelf(
            self._held, settings.batch_max_messages, settings.max_buffered_bytes,
            settings.filter_header,
        )  # fmt: skip
        self._ready = self.shelf.ready
        self._wake = threading.Event()
        self._gate = ClientGate(on_wait=self._wake.set, on_release=self._notify)
        self.commits = _committer(self)  # also asked by the member whether commits settled
        self.starter = Starter(  # its ``admin`` is set once ``launch`` has made one
            self._consumer, held=self._held, lock=self._lock, shelf=self.shelf,
            commits=self.commits, timeout_s=self._timeout_s,
            isolation=settings.consumer_config().get("isolation.level"),
        )  # fmt: skip
        self._last_caller_fetch_s = 0.0
        self.on_fatal: Callable[[], None] = lambda: None
        self._stopping = threading.Event()
        self.failures = FailureSlot(self._lock)  # raised by the next call (a fatal one: all)
        self._fetch_errors = FetchErrors(kafka=settings.kafka, refused=self.failures.store)
        loop = partial(keep_running, thread="fetch", on_failure=self.failures.store)
        self._thread = threading.Thread(target=loop, args=(self._run_once, self._stopping),
                                        name="client-balance-fetch", daemon=True)  # fmt: skip
        self._thread.start()
        self.commits.start()  # its client is made on its own thread, ready by the first commit

    def metadata(self, topics: Sequence[str]) -> Any:
        """Metadata of ``topics`` through this client (warm, and its cache learns)."""
        # One topic is asked alone: a round then costs the same on a cluster of many topics.
        only = topics[0] if len(topics) == 1 else None
        try:
            return self._gate.call(lambda: self._consumer.list_topics(only, self._timeout_s))
        except KafkaException as error:
            raise from_kafka_exception(error, "querying metadata") from error

    def held(self) -> set[TopicPartition]:
        """The partitions currently held (not those only fetched ahead)."""
        with self._lock:
            return {tp for tp, state in self._held.items() if state.fetched_ahead is None}

    def hold(
        self, requests: Mapping[TopicPartition, frozenset[str] | None], choose_start: StartChooser,
        *, skip_unreadable: bool = False,
    ) -> dict[TopicPartition, int]:  # fmt: skip
        """Start fetching partitions; ``choose_start`` picks each start from what Kafka says.

        One step under the client lock (``Starter.hold``, which also says ``skip_unreadable``).
        Returns each partition's start; its batches wait for :meth:`announce`.
        """
        wanted = {tp: f for tp, f in requests.items() if tp not in self.held()}
        if not wanted:
            return {}
        return self._gate.call(
            partial(self.starter.hold, wanted, choose_start, skip_unreadable=skip_unreadable)
        )

    def fetch_ahead(
        self, requests: Mapping[TopicPartition, frozenset[str] | None], choose_start: StartChooser
    ) -> None:
        """Fetch partitions expected to be held, before their claim (``_starts``)."""
        with self._lock:
            wanted = {tp: f for tp, f in requests.items() if tp not in self._held}
        if wanted:
            self._gate.call(lambda: self.starter.ahead(wanted, choose_start))

    @contextlib.contextmanager
    def dropping_ahead(self) -> Iterator[None]:
        """On the way out, stop fetching what was fetched ahead and is not held by then."""
        try:
            yield
        finally:
            self.starter.drop_read_ahead()
            with self._lock:
                ahead = [s for s in self._held.values() if s.fetched_ahead is not None]
            if ahead:
                self._gate.call(lambda: self.starter.forget(ahead))

    def announce(self, partitions: Iterable[TopicPartition]) -> None:
        """Let batches of partitions just held go out (``hold`` keeps them back until then)."""
        with self._lock:
            for state in filter(None, map(self._held.get, partitions)):
                state.announced = True
                if state.buffer and state.batch is None:
                    self._ready.append(state.partition)
            self._lock.notify_all()
        self._wake.set()  # the fetch thread kept off them until now (``Shelf.may_fetch``)

    def quiesce(
        self, partitions: Iterable[TopicPartition], wait_s: float
    ) -> dict[TopicPartition, int]:
        """Hand out no more batches of ``partitions``; their confirmed positions, once settled.

        A batch still out after ``wait_s`` (one deadline for all) is rolled back: it comes
        again to the next holder, and a late confirm of it is refused.
        """
        with self._lock:
            states = [s for tp in partitions if (s := self._held.get(tp)) is not None]
            for state in states:
                state.releasing = True
            self._lock.wait_for(lambda: all(s.batch is None for s in states), wait_s)
            for state in states:
                state.batch = None
            return {state.partition: state.confirmed for state in states}

    def release(
        self, partitions: Iterable[TopicPartition], wait_s: float, *, commit: bool = True
    ) -> None:
        """Stop fetching ``partitions``: quiesce, commit them together (one round trip), forget."""
        chosen = sorted(partitions)
        self.quiesce(chosen, wait_s)
        # Those released meanwhile by another thread (fencing) are gone from _held.
        states = [state for tp in chosen if (state := self._held.get(tp)) is not None]
        if not states:
            return
        try:
            if commit and (due := [s for s in states if s.committed != s.confirmed]):
                self.commits.commit_held(due)
        finally:
            self._gate.call(lambda: self.starter.forget(states))

    def let_go(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop holding ``partitions`` now, not waiting on a client lock a stuck commit holds."""
        gone = self.starter.drop([s for tp in partitions if (s := self._held.get(tp)) is not None])
        self._gate.submit(lambda: self.starter.unassign(gone))

    def offsets(self) -> list[Positions]:
        """Where every held partition stands."""
        return [state.positions() for state in self._states()]

    def take_batch(self, timeout_s: float) -> Batch | int:
        """The next batch, round robin over partitions; else why not (406/407/408)."""
        # A caller is here: the fetch thread stays out (``_run``). Had it fetched on, every
        # batch would pass from its thread to the caller's, at a fifth of the throughput.
        self._last_caller_fetch_s = time.monotonic()
        deadline = None
        while True:
            with self._lock:
                self.failures.raise_once()
                batch = self.shelf.take()
                if batch is not None:
                    self._resume_if_drained(batch.partition)
                    return batch
                polled, deadline = deadline is not None, deadline or Deadline(timeout_s)
                left = deadline.left_s()  # a get_message(0) fetches once, waiting for nothing
                if (left <= 0 and polled) or self._stopping.is_set():
                    return why_nothing(self._held.values())
                fetching = self.shelf.may_fetch(for_caller=True)
                released = self._gate.releases
            taken: list[Batch] = []
            fetch = partial(self._fetch_once, min(max(left, 0.0), _CALLER_CONSUME_WAIT_S), taken)
            if fetching and self._gate.try_fetch(fetch):
                if taken:
                    self._resume_if_drained(taken[0].partition)
                    return taken[0]
                continue
            with self._lock:
                # What another thread fetched meanwhile is not waited for, nor a client lock
                # freed meanwhile (a query of the reconcile thread): the caller fetches then.
                # Batches that may not go out (the lease in doubt) are waited on like none.
                takeable = self._ready and self.shelf.lease_ok()
                if not takeable and self._gate.releases == released:
                    self._lock.wait(min(left, _CONSUME_WAIT_S))

    def _notify(self) -> None:
        with self._lock:
            self._lock.notify_all()

    def settle(
        self, partition: TopicPartition, token: int, consumed: bool, *, until: int | None = None
    ) -> Settled | None:
        """Confirm or roll back the batch ``token``; None if it is not out any more.

        ``until`` confirms it only that far; the rest comes again (a head set aside, ``_launch``).
        """
        with self._lock:
            state = self._held.get(partition)
            if state is None or state.batch is None or state.batch.token != token:
                return None
            batch, rewind_to = self.shelf.settle(state, consumed, until)
            position = state.confirmed
            self._lock.notify_all()
        if rewind_to is not None:
            self._gate.call(lambda: self._rewind(state, rewind_to))
        if consumed and self._settings.commit == "sync":
            committed = self.commits.commit_confirmed(state)
            return Settled(position, committed, batch.end, batch.holding)
        if rewind_to is None:
            self._resume_if_drained(partition)
        return Settled(position, state.committed == position, batch.end, batch.holding)

    def _resume_if_drained(self, partition: TopicPartition) -> None:
        state = self._held.get(partition)
        if state is not None and self.shelf.drained(state):
            self._gate.submit(lambda: self._resume(state))
        if self.starter.deferred:  # a batch went out: the rest of a claim may come (``_starts``)
            self._gate.submit(self.starter.resume_deferred)

    def flush(self) -> None:
        """Commit every confirmed position not yet committed."""
        self.commits.commit_due(self._states())

    def _states(self) -> list[HeldPartition]:
        with self._lock:
            return [state for state in self._held.values() if state.fetched_ahead is None]

    def _fetch_once(self, wait_s: float, taken: list[Batch] | None = None) -> None:
        """``consume()`` and share out; a caller's ``taken`` gets the first batch it can have."""
        count, consume = self.shelf.fetch_count(), self._consumer.consume
        try:  # a caller takes what is there now, and waits only when nothing is
            messages = consume(num_messages=count, timeout=0) if taken is not None else []
            if not messages:
                messages = consume(num_messages=count, timeout=wait_s)
        except KafkaException as error:
            _log.warning("consume failed", error=scrub(str(error), self._settings.kafka))
            return
        if messages and any(map(Message.error, messages)):
            messages, out_of_range = self._fetch_errors.drop(messages)
            restart_out_of_range(self._consumer, self._held, out_of_range, self._timeout_s,
                                 partial(_locked, self._lock, self.shelf.cut))  # fmt: skip
        if not messages:
            return
        with self._lock:
            to_pause = self.shelf.share_out(messages, taken)
            self._lock.notify_all()
        if to_pause:
            self._consumer.pause([kafka_tp(tp) for tp in to_pause])

    def _run_once(self) -> None:
        deferred_s = self.starter.deferred_wait_s(self._gate.call)
        with self._lock:
            fetching = self.shelf.may_fetch()
        callers_fetch = time.monotonic() - self._last_caller_fetch_s < _CALLERS_FETCH_FOR_S
        if self._gate.has_commands or (fetching and not callers_fetch):
            if not self._gate.try_fetch(partial(self._fetch_once, _CONSUME_WAIT_S)):
                self._wake.wait(_CONSUME_WAIT_S)
        else:
            self._wake.wait(min(_CALLERS_FETCH_FOR_S if fetching else _IDLE_WAIT_S, deferred_s))
        self._wake.clear()
        self.commits.on_interval(self.failures.store)

    def _resume(self, state: HeldPartition) -> None:
        with self._lock:
            if not state.paused or self._held.get(state.partition) is not state:
                return
            state.paused = False
        self._consumer.resume([kafka_tp(state.partition)])

    def _rewind(self, state: HeldPartition, position: int) -> None:
        # Released (and maybe held again) since the rollback: no longer this state's to move.
        with self._lock:
            if self._held.get(state.partition) is not state:
                state.rewinding = False
                return
        tp = kafka_tp(state.partition)
        self._consumer.incremental_unassign([tp])
        with self._lock:
            self.shelf.drop(state)
            state.paused = state.rewinding = False
            held = self._held.get(state.partition) is state
        if held:
            self._consumer.incremental_assign([kafka_tp(state.partition, position)])
            self._consumer.resume([tp])  # it may have been paused: see the end of _hold

    def refresh_highs(self) -> None:
        """Update the held partitions' high watermarks from the client's cache (no I/O)."""
        refresh_highs(self._gate, self._consumer, self._states, self._lock)

    def _on_kafka_error(self, error: KafkaError) -> None:
        said = scrub(str(error), self._settings.kafka)
        if error.fatal():  # the member must stop (PartitionKeeper.round), not stall
            self.failures.store_fatal(_consuming_failed(error, self._settings.kafka))
            _log.error("the Kafka client failed for good; stopping", error=said)
            self.on_fatal()
        else:
            _log.info("kafka client reports", error=said)

    def close(self, release_wait_s: float) -> None:
        """Release every partition (committing confirmed positions), stop, close the client."""
        failed: ClientBalanceError | None = None
        try:  # one deadline for all batches out: the application's threads confirm them at once
            self.release(self.held(), release_wait_s)
        except ClientBalanceError as error:
            failed = error
        self._stopping.set()
        self._wake.set()
        self._notify()
        self._thread.join()
        self.commits.close()
        self._gate.close(self._consumer.close)
        if failed is not None:
            raise failed


def _committer(fetcher: Fetcher) -> Committer:
    settings = fetcher._settings
    return Committer(
        partial(commit_client, settings), settings.group_id, settings.commit_interval_s,
        fetcher._lock, held=fetcher._states,
        may_commit=lambda: fetcher.shelf.lease_ok(),  # noqa: PLW0108 - set later
        holds=lambda state: fetcher._held.get(state.partition) is state,
        answer_wait_s=settings.request_timeout_s,
    )  # fmt: skip


def _consuming_failed(error: KafkaError, kafka: Mapping[str, Any]) -> ClientBalanceError:
    return from_kafka_exception(KafkaException(error), "consuming", kafka=kafka)


def _locked(lock: threading.Condition, cut: Callable[[HeldPartition, int], None],
            state: HeldPartition, restart: int) -> None:  # fmt: skip
    with lock:
        cut(state, restart)
