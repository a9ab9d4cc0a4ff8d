"""The one place that drives confluent-kafka's ``Consumer``.

Every call on the ``Consumer`` is made holding one lock, the client lock. librdkafka is
thread-safe in principle, but a ``get_watermark_offsets`` made while another thread sits in
``consume()`` never returns (confluent-kafka 2.16.1, seen here). The lock also makes a
``consume()`` and the distribution of what it returned one step, so no message fetched before
a partition was released or rewound can reach a buffer afterwards.

Whoever needs messages fetches them: a ``get_message`` caller that finds nothing buffered
takes the client lock and calls ``consume()`` itself, so a batch needs no hand-over between
threads (that hand-over cost a fifth of the throughput). The background thread fetches only
while no caller has for a moment, keeping buffers warm and librdkafka's callbacks served, and
commits confirmed positions on the interval.

Per partition the fetcher keeps a buffer of fetched messages and at most one batch out
(``take_batch`` .. ``settle``). A partition whose buffer is full is paused until the
application catches up. Positions are Kafka's "next message to read"; only confirmed
positions are ever committed, so delivery is at least once and a crash loses nothing.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, TypeVar

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance._kafka_errors import from_kafka_exception
from client_balance.errors import ClientBalanceError, GroupInUseError, KafkaClientError
from client_balance.keys import TopicPartition
from client_balance.settings import ClientBalanceSettings

__all__ = ["LIBRDKAFKA_DEFAULTS", "Batch", "Fetcher", "PartitionLayout", "StartChooser"]

_log = structlog.get_logger("client_balance.fetch")

StartChooser = Callable[[TopicPartition, "int | None", int, int], tuple[int, bool]]
"""(partition, committed or None, low, high) -> (start offset, commit it now)."""
_T = TypeVar("_T")

_IDLE_WAIT_S = 0.5
_CONSUME_WAIT_S = 0.05
_CALLERS_FETCH_FOR_S = 0.1
"""The background thread stays out of fetching while a caller fetched this recently."""
# Commits that fail with these mean someone subscribe()s with our group id.
_GROUP_IN_USE_CODES = frozenset({22, 25, 27})  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE
# Re-commit unchanged positions this often: Kafka expires a simple group's offsets 7 days
# after their last commit, which would silently reset an idle partition.
_RECOMMIT_EVERY_S = 3600.0
_ERROR_LOG_EVERY_S = 60.0
_BUFFER_FLOOR = 50_000  # messages per partition before it is paused
_BUFFER_BATCHES = 10  # ... or this many batches, if more


LIBRDKAFKA_DEFAULTS: Mapping[str, int] = {
    # Bounds how long a commit waits for a group coordinator; nothing else uses it (no joins).
    "session.timeout.ms": 10_000,
    # A broker answers one connection's requests in order, so every metadata and watermark
    # query waits behind the fetch long poll in flight: with librdkafka's 500 ms, registering
    # n new partitions stalled the consumer n * 0.5 s.
    "fetch.wait.max.ms": 100,
    # librdkafka stops fetching a partition for this long whenever its queue holds
    # queued.min.messages (100,000, shared by all partitions); its 1,000 ms default left the
    # consumer idle most of each second on a backlog. Our own buffers bound memory, so a short
    # back-off costs nothing but a check per partition.
    "fetch.queue.backoff.ms": 10,
}
"""librdkafka settings the SDK changes (docs/settings.md); ``settings.kafka`` overrides them."""


@dataclass(frozen=True, slots=True)
class PartitionLayout:
    """A topic's partitions as metadata reports them: leader per partition (-1 = none)."""

    leaders: tuple[int, ...]


@dataclass(slots=True)
class Batch:
    """One batch handed out: messages (filters applied), its range, and its token."""

    partition: TopicPartition
    token: int
    start: int
    end: int
    messages: list[Message]
    high: int | None


@dataclass(slots=True)
class _Held:
    partition: TopicPartition
    filters: frozenset[str] | None
    confirmed: int
    committed: int | None
    buffer: deque[list[Message]] = field(default_factory=deque)
    """Runs of fetched messages, as ``consume()`` returned them (split per partition)."""
    buffered: int = 0
    batch: Batch | None = None
    paused: bool = False
    releasing: bool = False
    rewinding: bool = False
    high: int | None = None
    updated_s: float = field(default_factory=time.time)


class Fetcher:
    """The confluent-kafka ``Consumer`` behind a client-balanced consumer (module docstring)."""

    def __init__(self, settings: ClientBalanceSettings) -> None:
        self._settings = settings
        self._batch_max = settings.batch_max_messages
        # Pausing makes librdkafka drop what it prefetched for the partition and fetch it again,
        # and one fetch brings thousands of messages: pause only well above a batch.
        self._buffer_max = max(_BUFFER_BATCHES * settings.batch_max_messages, _BUFFER_FLOOR)
        self._filter_header = settings.filter_header
        self._timeout_s = settings.request_timeout_s
        self._consumer = Consumer(
            {
                **LIBRDKAFKA_DEFAULTS,
                **settings.consumer_config(),
                "error_cb": self._on_kafka_error,
            }
        )
        self._lock = threading.Condition()
        self._held: dict[TopicPartition, _Held] = {}
        self._topics_assigned: set[str] = set()
        """Every topic ever assigned to the client; one topic allows a cheaper split."""
        self._ready: deque[TopicPartition] = deque()
        self._client_lock = threading.RLock()
        self._waiting_calls = 0
        """Threads waiting for the client lock to make a call; fetching callers give way."""
        self._commands: deque[Callable[[], object]] = deque()
        """Calls that nobody waits for, made by the next holder of the client lock."""
        self._last_caller_fetch_s = 0.0
        self._closed = False
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._tokens = itertools.count(1)
        self._failure: ClientBalanceError | None = None
        self._last_flush_s = time.monotonic()
        self._last_recommit_s = time.monotonic()
        self._last_fetch_error = ""
        self._last_fetch_error_s = 0.0
        self._thread = threading.Thread(target=self._run, name="client-balance-fetch", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ queries (any thread)
    def layouts(self, topics: Iterable[str]) -> dict[str, PartitionLayout]:
        """Partition leaders per topic; a topic Kafka does not know has no partitions."""
        try:
            metadata = self._call(lambda: self._consumer.list_topics(timeout=self._timeout_s))
        except KafkaException as error:
            raise from_kafka_exception(error, "querying metadata") from error
        layouts = {}
        for topic in topics:
            found = metadata.topics.get(topic)
            if found is None or (found.error is not None and not found.partitions):
                layouts[topic] = PartitionLayout(())
                continue
            count = max(found.partitions) + 1 if found.partitions else 0
            leaders = [-1] * count
            for number, partition in found.partitions.items():
                leaders[number] = -1 if partition.error is not None else partition.leader
            layouts[topic] = PartitionLayout(tuple(leaders))
        return layouts

    # ------------------------------------------------------------------ holding partitions
    def held(self) -> set[TopicPartition]:
        """The partitions currently held."""
        with self._lock:
            return set(self._held)

    def hold(
        self,
        requests: Mapping[TopicPartition, frozenset[str] | None],
        choose_start: StartChooser,
    ) -> dict[TopicPartition, int]:
        """Start fetching partitions; ``choose_start`` picks each start from what Kafka says.

        All of it runs as one step of the fetch thread: watermarks, one committed-offsets
        query, one commit of the starts that must be committed, one ``incremental_assign``.
        Returns each partition's start.
        """
        wanted = {tp: f for tp, f in requests.items() if tp not in self.held()}
        if not wanted:
            return {}
        return self._call(lambda: self._hold(wanted, choose_start))

    def _hold(
        self,
        wanted: Mapping[TopicPartition, frozenset[str] | None],
        choose_start: StartChooser,
    ) -> dict[TopicPartition, int]:
        consumer = self._consumer
        try:
            ranges = {
                tp: consumer.get_watermark_offsets(
                    KafkaTopicPartition(tp.topic, tp.partition), timeout=self._timeout_s
                )
                for tp in wanted
            }
            answers = consumer.committed(
                [KafkaTopicPartition(tp.topic, tp.partition) for tp in wanted],
                timeout=self._timeout_s,
            )
        except KafkaException as error:
            raise from_kafka_exception(error, "reading offsets to start from") from error
        committed = {
            TopicPartition(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None
            for tp in answers
        }
        states, to_commit = [], []
        for partition, filters in wanted.items():
            low, high = ranges[partition]
            start, commit_now = choose_start(partition, committed.get(partition), low, high)
            state = _Held(partition, filters, confirmed=start, committed=committed.get(partition))
            state.high = high
            states.append(state)
            if commit_now:
                to_commit.append(state)
        if to_commit:
            self._commit_now(to_commit)
        with self._lock:
            for state in states:
                self._held[state.partition] = state
        assigned = [
            KafkaTopicPartition(s.partition.topic, s.partition.partition, s.confirmed)
            for s in states
        ]
        self._topics_assigned.update(s.partition.topic for s in states)
        consumer.incremental_assign(assigned)
        # librdkafka keeps a partition's pause across unassign and assign: one paused (full
        # buffer) when it was last released would never be fetched again.
        consumer.resume(assigned)
        return {state.partition: state.confirmed for state in states}

    def release(self, partition: TopicPartition, wait_s: float, *, commit: bool = True) -> None:
        """Stop fetching ``partition``: wait up to ``wait_s`` for its batch, commit, unassign.

        A batch still out after ``wait_s`` is rolled back: its messages come again to whoever
        holds the partition next, and a late confirm of it is refused. ``commit=False`` is for
        a partition that another member holds by now: its commits are not ours to overwrite.
        """
        with self._lock:
            state = self._held.get(partition)
            if state is None:
                return
            state.releasing = True
            deadline = time.monotonic() + wait_s
            while state.batch is not None and (left := deadline - time.monotonic()) > 0:
                self._lock.wait(left)
            state.batch = None
        try:
            if commit and state.committed != state.confirmed:
                self._call(lambda: self._commit_now([state]))
        finally:
            with self._lock:
                self._held.pop(partition, None)
            self._call(lambda: self._unassign(partition))

    def offsets(self) -> list[tuple[TopicPartition, int, int | None, int | None, float]]:
        """(partition, confirmed, committed, high, updated) for every held partition."""
        with self._lock:
            return [
                (s.partition, s.confirmed, s.committed, s.high, s.updated_s)
                for s in self._held.values()
            ]

    # ------------------------------------------------------------------ batches
    def take_batch(self, timeout_s: float) -> Batch | int:
        """The next batch, round robin over partitions; else why not (406/407/408)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                self._raise_failure()
                while self._ready:
                    partition = self._ready.popleft()
                    state = self._held.get(partition)
                    if (
                        state is not None
                        and state.buffer
                        and not (state.batch or state.releasing or state.rewinding)
                    ):
                        return self._hand_out(state)
                left = deadline - time.monotonic()
                if left <= 0 or self._stopping.is_set():
                    return self._why_nothing()
                fetching = any(not s.paused for s in self._held.values())
            if fetching and self._fetch_if_free(min(left, _CONSUME_WAIT_S)):
                continue
            with self._lock:
                if not self._ready:  # what another thread fetched meanwhile is not waited for
                    self._lock.wait(min(left, _CONSUME_WAIT_S))

    def settle(
        self, partition: TopicPartition, token: int, consumed: bool
    ) -> tuple[int, bool] | None:
        """Confirm or roll back the batch ``token``; None if it is not out any more.

        Returns the confirmed position and whether it is committed already.
        """
        with self._lock:
            state = self._held.get(partition)
            if state is None or state.batch is None or state.batch.token != token:
                return None
            batch, state.batch = state.batch, None
            state.updated_s = time.time()
            if consumed:
                state.confirmed = batch.end
                if state.buffer and not state.releasing:
                    self._ready.append(partition)
            else:
                state.buffer.clear()
                state.buffered = 0
                state.rewinding = True  # nothing fetched before the rewind may be buffered
            self._lock.notify_all()
        if not consumed:
            self._call(lambda: self._rewind(state, batch.start))
            return state.confirmed, state.committed == state.confirmed
        if self._settings.commit == "sync":
            try:
                self._call(lambda: self._commit_now([state]))
            except GroupInUseError:
                raise
            except KafkaClientError as error:
                # Confirmed all the same: the fetch thread commits it once Kafka answers.
                _log.warning("commit failed; will retry", error=str(error))
                return batch.end, False
            return batch.end, True
        if state.paused and state.buffered < self._buffer_max // 2:
            self._submit(lambda: self._resume(state))
        return batch.end, False

    def _hand_out(self, state: _Held) -> Batch:
        buffer = state.buffer
        taken: list[Any] = []
        need = self._batch_max
        while need and buffer:
            run = buffer[0]
            if len(run) <= need:
                taken += buffer.popleft()
                need -= len(run)
            else:
                taken += run[:need]
                buffer[0] = run[need:]
                need = 0
        state.buffered -= len(taken)
        end = taken[-1].offset() + 1
        messages = taken if state.filters is None else [m for m in taken if self._keep(m, state)]
        state.batch = Batch(
            state.partition, next(self._tokens), state.confirmed, end, messages, state.high
        )
        if state.paused and state.buffered < self._buffer_max // 2:
            self._submit(lambda: self._resume(state))
        return state.batch

    def _keep(self, message: Any, state: _Held) -> bool:
        assert state.filters is not None  # noqa: S101 - only called for filtered partitions
        for name, value in message.headers() or ():
            if name == self._filter_header:
                text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
                return text in state.filters
        return False

    def _why_nothing(self) -> int:
        if not self._held:
            return 406
        if all(state.batch is not None for state in self._held.values()):
            return 408
        return 407

    # ------------------------------------------------------------------ commits
    def flush(self) -> None:
        """Commit every confirmed position not yet committed."""
        self._call(self._flush)

    def _flush(self) -> None:
        with self._lock:
            due = [s for s in self._held.values() if s.committed != s.confirmed]
        if due:
            self._commit_now(due)

    def _commit_now(self, states: list[_Held]) -> None:
        offsets = [
            KafkaTopicPartition(s.partition.topic, s.partition.partition, s.confirmed)
            for s in states
        ]
        positions = [s.confirmed for s in states]
        try:
            answers = self._consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            raise self._commit_error(error) from error
        failed = [tp for tp in answers or () if tp.error is not None]
        if failed:
            raise self._commit_error(KafkaException(failed[0].error))
        with self._lock:
            for state, position in zip(states, positions, strict=True):
                state.committed = position

    def _commit_error(self, error: KafkaException) -> ClientBalanceError:
        mapped = from_kafka_exception(error, "committing offsets")
        if mapped.kafka_code in _GROUP_IN_USE_CODES:
            group = self._settings.group_id
            return GroupInUseError(
                f"group {group!r} has members that subscribe(); Kafka rejects the commits of "
                f"client-balanced consumers then ({mapped.kafka_name}). Use a group id that is "
                "never used with subscribe()",
                group_id=group,
            )
        return mapped

    # ------------------------------------------------------------------ the fetch thread
    def _submit(self, action: Callable[[], object]) -> None:
        """Have ``action`` made by the next holder of the client lock; nobody waits for it."""
        self._commands.append(action)
        self._wake.set()

    def _call(self, action: Callable[[], _T]) -> _T:
        """Make ``action`` (calls on the ``Consumer``) holding the client lock."""
        with self._lock:
            self._waiting_calls += 1
        try:
            self._client_lock.acquire()
        finally:
            with self._lock:
                self._waiting_calls -= 1
        try:
            if self._closed:
                raise KafkaClientError(
                    "the consumer is closed", kafka_code=-1, kafka_name="STOPPED"
                )
            self._serve_commands()
            return action()
        finally:
            self._client_lock.release()

    def _fetch_if_free(self, wait_s: float) -> bool:
        """Fetch once unless another thread holds or waits for the client lock."""
        if self._waiting_calls or not self._client_lock.acquire(blocking=False):
            return False
        try:
            if self._closed:
                return False
            self._serve_commands()
            self._fetch_once(wait_s)
        finally:
            self._client_lock.release()
        return True

    def _fetch_once(self, wait_s: float) -> None:
        if threading.current_thread() is not self._thread:
            self._last_caller_fetch_s = time.monotonic()
        try:
            messages = self._consumer.consume(num_messages=self._batch_max, timeout=wait_s)
        except KafkaException as error:
            _log.warning("consume failed", error=str(error))
            return
        if messages:
            self._distribute(messages)

    def _run(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                fetching = any(not s.paused for s in self._held.values())
            callers_fetch = time.monotonic() - self._last_caller_fetch_s < _CALLERS_FETCH_FOR_S
            if self._commands or (fetching and not callers_fetch):
                if not self._fetch_if_free(_CONSUME_WAIT_S):
                    self._wake.wait(_CONSUME_WAIT_S)
            else:
                self._wake.wait(_CALLERS_FETCH_FOR_S if fetching else _IDLE_WAIT_S)
            self._wake.clear()
            self._flush_on_interval()

    def _serve_commands(self) -> None:
        while self._commands:
            action = self._commands.popleft()
            try:
                action()
            except ClientBalanceError as error:
                _log.warning("background call failed", error=str(error))

    def _flush_on_interval(self) -> None:
        now = time.monotonic()
        # Also in "sync" mode: a commit that failed while the broker was away is retried here.
        if now - self._last_flush_s >= self._settings.commit_interval_s:
            self._last_flush_s = now
            try:
                if now - self._last_recommit_s >= _RECOMMIT_EVERY_S:
                    self._last_recommit_s = now
                    with self._lock:
                        states = list(self._held.values())
                    if states:
                        self._call(lambda: self._commit_now(states))
                else:
                    self._call(self._flush)
            except GroupInUseError as error:
                self._fail(error)
            except KafkaClientError as error:
                _log.warning("commit failed; will retry", error=str(error))

    def _distribute(self, messages: list[Any]) -> None:
        if any(map(Message.error, messages)):
            messages = self._drop_errors(messages)
        # Split the list into runs of one partition with C-level passes only: a Python loop
        # over every message would cost more than librdkafka takes to fetch it.
        runs: list[tuple[tuple[str | None, int | None], int]]
        if len(self._topics_assigned) == 1:
            # Only ever one topic, so no message (not even one left over from a released
            # partition) can be of another: the partition alone tells runs apart, at a third
            # of the cost of comparing (topic, partition) pairs.
            (topic,) = self._topics_assigned
            partitions = map(Message.partition, messages)
            runs = [((topic, number), len(list(group))) for number, group in groupby(partitions)]
        else:
            keys = zip(map(Message.topic, messages), map(Message.partition, messages), strict=True)
            runs = [(key, len(list(group))) for key, group in groupby(keys)]
        to_pause = []
        with self._lock:
            start = 0
            for key, length in runs:
                run = messages[start : start + length]
                start += length
                state = self._held.get(key)  # type: ignore[call-overload]  # a plain tuple matches
                if state is None or state.releasing or state.rewinding:
                    continue
                if not state.buffer and state.batch is None:
                    self._ready.append(state.partition)
                state.buffer.append(run)
                state.buffered += length
                if state.buffered >= self._buffer_max and not state.paused:
                    state.paused = True
                    to_pause.append(state.partition)
            self._lock.notify_all()
        if to_pause:
            self._consumer.pause([KafkaTopicPartition(tp.topic, tp.partition) for tp in to_pause])

    def _drop_errors(self, messages: list[Any]) -> list[Any]:
        kept = []
        for message in messages:
            error = message.error()
            if error is None:
                kept.append(message)
            elif error.code() != KafkaError._PARTITION_EOF:
                self._log_fetch_error(str(error), message.topic())
        return kept

    def _log_fetch_error(self, text: str, topic: str | None) -> None:
        # A broker that is away reports the same error on every consume(): log it once a minute.
        now = time.monotonic()
        if self._last_fetch_error != text or now - self._last_fetch_error_s > _ERROR_LOG_EVERY_S:
            self._last_fetch_error, self._last_fetch_error_s = text, now
            _log.warning("fetch error", error=text, topic=topic)

    def _resume(self, state: _Held) -> None:
        with self._lock:
            if not state.paused or state.partition not in self._held:
                return
            state.paused = False
        tp = KafkaTopicPartition(state.partition.topic, state.partition.partition)
        self._consumer.resume([tp])

    def _rewind(self, state: _Held, position: int) -> None:
        tp = KafkaTopicPartition(state.partition.topic, state.partition.partition)
        self._consumer.incremental_unassign([tp])
        with self._lock:
            state.buffer.clear()
            state.buffered = 0
            state.paused = False
            state.rewinding = False
        if state.partition in self._held:
            self._consumer.incremental_assign(
                [KafkaTopicPartition(tp.topic, tp.partition, position)]
            )
            self._consumer.resume([tp])  # it may have been paused: see the end of _hold

    def _unassign(self, partition: TopicPartition) -> None:
        tp = KafkaTopicPartition(partition.topic, partition.partition)
        with contextlib.suppress(KafkaException):  # it was never assigned, or already gone
            self._consumer.incremental_unassign([tp])

    def refresh_highs(self) -> None:
        """Update each held partition's high watermark from the client's cache (no I/O)."""
        self._call(self._refresh_highs)

    def _refresh_highs(self) -> None:
        with self._lock:
            partitions = list(self._held)
        for partition in partitions:
            try:
                _, high = self._consumer.get_watermark_offsets(
                    KafkaTopicPartition(partition.topic, partition.partition), cached=True
                )
            except KafkaException:
                continue
            with self._lock:
                state = self._held.get(partition)
                if state is not None and high >= 0:
                    state.high = int(high)

    # ------------------------------------------------------------------ failures and close
    def _on_kafka_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._fail(from_kafka_exception(KafkaException(error), "consuming"))
        else:
            _log.info("kafka client reports", error=str(error))

    def _fail(self, error: ClientBalanceError) -> None:
        with self._lock:
            self._failure = error
            self._lock.notify_all()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            error, self._failure = self._failure, None
            raise error

    def raise_failure(self) -> None:
        """Raise (once) an error the fetch thread met since the last call."""
        with self._lock:
            self._raise_failure()

    def close(self, release_wait_s: float) -> None:
        """Release every partition (committing confirmed positions), stop, close the client."""
        errors: list[BaseException] = []
        # One deadline for all batches out, not one per partition: they are confirmed (or not)
        # in parallel by the application's threads.
        with self._lock:
            for state in self._held.values():
                state.releasing = True
            deadline = time.monotonic() + release_wait_s
            while any(s.batch is not None for s in self._held.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._lock.wait(left)
        for partition in sorted(self.held()):
            try:
                self.release(partition, 0.0)
            except ClientBalanceError as error:
                errors.append(error)
        self._stopping.set()
        self._wake.set()
        with self._lock:
            self._lock.notify_all()
        self._thread.join()
        with self._client_lock:
            self._closed = True
            self._consumer.close()
        if errors:
            raise errors[0]


def read_ranges(
    config: Mapping[str, Any],
    ranges: Mapping[TopicPartition, tuple[int, int]],
    *,
    batch_max_messages: int,
    idle_timeout_s: float,
) -> Iterable[list[Message]]:
    """Read ``[start, end)`` of each partition once, in lists of up to ``batch_max_messages``.

    For one-off readers (a Spark task): a plain assign-only client of its own, no commits, no
    buffers beyond a list. Raises :class:`KafkaClientError` when no message arrives for
    ``idle_timeout_s`` while some range is unfinished (the data is gone, or the cluster).
    """
    left = {tp: (start, end) for tp, (start, end) in ranges.items() if start < end}
    if not left:
        return
    consumer = Consumer(
        {
            "auto.offset.reset": "earliest",  # a start below the log's start: from its start
            **config,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        consumer.assign(
            [KafkaTopicPartition(tp.topic, tp.partition, start) for tp, (start, _) in left.items()]
        )
        last_progress = time.monotonic()
        while left:
            try:
                messages = consumer.consume(num_messages=batch_max_messages, timeout=0.1)
            except KafkaException as error:
                raise from_kafka_exception(error, "reading offset ranges") from error
            kept = _within(messages, left, consumer)
            if not messages and _past_the_end(consumer, left):
                last_progress = time.monotonic()
            if kept:
                last_progress = time.monotonic()
                yield kept
            elif left and time.monotonic() - last_progress > idle_timeout_s:
                raise KafkaClientError(
                    f"no message for {idle_timeout_s} s while reading "
                    f"{', '.join(f'{tp}@{b[0]}..{b[1]}' for tp, b in sorted(left.items()))}",
                    kafka_code=-185,
                    kafka_name="_TIMED_OUT",
                    retriable=True,
                )
    finally:
        consumer.close()


def _within(
    messages: list[Message], left: dict[TopicPartition, tuple[int, int]], consumer: Consumer
) -> list[Message]:
    """The messages inside their ranges; ranges read to their end leave ``left``."""
    kept = []
    for message in messages:
        offset = message.offset()
        if message.error() is not None or offset is None:
            continue
        key = TopicPartition(message.topic() or "", message.partition() or 0)
        bounds = left.get(key)
        if bounds is None or offset >= bounds[1]:
            continue
        kept.append(message)
        if offset + 1 >= bounds[1]:
            del left[key]
            consumer.incremental_unassign([KafkaTopicPartition(key.topic, key.partition)])
    return kept


def _past_the_end(consumer: Consumer, left: dict[TopicPartition, tuple[int, int]]) -> bool:
    """Drop ranges whose position passed their end without a message at ``end - 1``.

    The end may be a transaction marker or a compacted-away record. True if any was dropped.
    """
    positions = consumer.position([KafkaTopicPartition(tp.topic, tp.partition) for tp in left])
    dropped = False
    for position in positions:
        key = TopicPartition(position.topic, position.partition)
        if key in left and position.offset >= left[key][1]:
            del left[key]
            dropped = True
    return dropped
