"""Per-partition state of the fetcher: buffered runs of messages and the one batch out.

Pure bookkeeping, no Kafka calls: the fetcher holds its lock around every use. Buffers are
bounded per partition by message count and per consumer by bytes (:class:`ByteBudget`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import count, groupby
from operator import countOf
from typing import Any, NamedTuple

from client_balance._kafka import (
    KafkaError,
    KafkaException,
    Message,
    from_kafka_exception,
    is_access_denied,
)
from client_balance._logging import get_logger
from client_balance._secrets import scrub
from client_balance._timing import OncePer
from client_balance.errors import ClientBalanceError
from client_balance.keys import TopicPartition

__all__ = [
    "Batch",
    "ByteBudget",
    "FetchErrors",
    "HeldPartition",
    "Positions",
    "Settled",
    "split_runs",
    "why_nothing",
]

_log = get_logger("fetch")
_ERROR_LOG_EVERY_S = 60.0

Run = tuple[tuple[str | None, int | None], int]
"""((topic, partition), length) of consecutive messages of one partition."""


_SAMPLE_MESSAGES = 10_000
"""Messages the byte budget's running mean size is over, about (older ones weigh less)."""
_RECENT_FETCHES = 16
"""Fetches whose mean sizes the byte budget's estimate is the largest of: a mean over a few
messages strays from the running one, by more the fewer there are."""

_HOLDINGS = count(1)
"""Numbers each holding of a partition: released and held again, it is another one."""


@dataclass(slots=True)
class Batch:
    """One batch handed out: messages (filters applied), its range, and its token."""

    partition: TopicPartition
    token: int
    start: int
    end: int
    messages: list[Message]
    high: int | None
    holding: int = 0
    """The holding it came from (``HeldPartition.holding``)."""


class Settled(NamedTuple):
    """What settling a batch left: the confirmed position, whether it is committed, its end."""

    position: int
    committed: bool
    batch_end: int
    holding: int = 0


class Positions(NamedTuple):
    """Where a held partition stands: a snapshot for reports and ``offset_infos()``."""

    partition: TopicPartition
    confirmed: int
    committed: int | None
    high: int | None
    updated_s: float
    lost_to_retention: int


@dataclass(slots=True)
class HeldPartition:
    """A partition the fetcher holds: positions, buffered runs, the batch out, flags."""

    partition: TopicPartition
    filters: frozenset[str] | None
    confirmed: int
    committed: int | None
    buffer: deque[list[Message]] = field(default_factory=deque)
    """Runs of fetched messages, as ``consume()`` returned them (split per partition)."""
    sizes: deque[int] = field(default_factory=deque)
    """Bytes of each buffered run (its messages' values), in step with ``buffer``."""
    buffered: int = 0
    buffered_bytes: int = 0
    batch: Batch | None = None
    paused: bool = False
    releasing: bool = False
    rewinding: bool = False
    high: int | None = None
    updated_s: float = field(default_factory=time.time)
    evicted: bool = False
    """Its buffer was dropped while its batch was out, for partitions that had nothing
    (``Shelf._evict``): paused until that batch is settled, then fetched again from there."""
    lost_to_retention: int = 0
    """Offsets retention deleted before they were delivered (see ``_retention``)."""
    lost_counted_to: int = 0
    """Where the offsets counted in ``lost_to_retention`` end: none is counted twice."""
    cut_to: int | None = None
    """A truncated log's restart, below the end of the batch out: its settle stands there."""
    announced: bool = True
    """False from ``hold`` until ``announce``: its ``on_assigned`` hook has not run yet."""
    fetched_ahead: tuple[int, int] | None = None
    """(low, high) watermarks read when it was fetched ahead of its claim (``_starts``); None
    once held. Such a partition is not held yet: nothing of it is handed out or committed."""
    holding: int = field(default_factory=lambda: next(_HOLDINGS))
    """This holding's number: the rollbacks counted against a batch are this holding's only."""

    def positions(self) -> Positions:
        """Where it stands now."""
        return Positions(
            self.partition, self.confirmed, self.committed, self.high, self.updated_s,
            self.lost_to_retention,
        )  # fmt: skip

    @property
    def can_hand_out(self) -> bool:
        """Buffered messages and nothing that forbids handing them out now."""
        return (
            bool(self.buffer)
            and self.announced
            and not (self.batch or self.releasing or self.rewinding)
        )

    def hand_out(self, batch_max: int, token: int, filter_header: str) -> tuple[Batch, int]:
        """Take up to ``batch_max`` buffered messages as the batch out; and their bytes."""
        # A run taken whole is ours alone (a slice, or consume()'s own list): the batch is that
        # list itself, extended in place if more runs fit, instead of a copy.
        taken, taken_bytes = self._pop(batch_max)
        while len(taken) < batch_max and self.buffer:
            run, run_bytes = self._pop(batch_max - len(taken))
            taken += run
            taken_bytes += run_bytes
        self.buffered -= len(taken)
        self.buffered_bytes -= taken_bytes
        return self.take_run(taken, token, filter_header), taken_bytes

    def _pop(self, most: int) -> tuple[list[Message], int]:
        run = self.buffer[0]
        if len(run) <= most:
            self.buffer.popleft()
            return run, self.sizes.popleft()
        head, self.buffer[0] = run[:most], run[most:]
        head_bytes = sum(map(len, head))
        self.sizes[0] -= head_bytes
        return head, head_bytes

    def take_run(self, run: list[Any], token: int, filter_header: str) -> Batch:
        """Make ``run`` (never buffered, or just taken from the buffer) the batch out."""
        messages = run
        if self.filters is not None:
            messages = [m for m in run if _passes(m, self.filters, filter_header)]
        self.batch = Batch(
            self.partition, token, self.confirmed, run[-1].offset() + 1, messages, self.high,
            self.holding,
        )  # fmt: skip
        return self.batch

    def add_run(self, run: list[Message], length: int, size: int, buffer_max: int) -> bool:
        """Buffer a run of ``size`` bytes; True if the partition must be paused now."""
        self.buffer.append(run)
        self.sizes.append(size)
        self.buffered += length
        self.buffered_bytes += size
        if self.buffered >= buffer_max and not self.paused:
            self.paused = True
            return True
        return False

    def drop_buffer(self) -> int:
        """Forget what is buffered (a rewind or a release); the bytes it held."""
        dropped = self.buffered_bytes
        self.buffer.clear()
        self.sizes.clear()
        self.buffered = self.buffered_bytes = 0
        return dropped


class ByteBudget:
    """Bytes of message values buffered by one consumer, against ``max_buffered_bytes``.

    Fetching stops while one more message of the typical size would pass the limit, and each
    ``consume()`` asks for no more messages than fit in what is left, so a fetch passes the
    limit only if its messages are on average larger than ``typical`` (docs/consumer.md,
    "Memory"). With nothing buffered a fetch is always allowed: a message bigger than the
    limit is delivered alone instead of blocking its partition.
    """

    __slots__ = ("_means", "_sample_bytes", "_sample_count", "limit", "peak", "typical", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        """The most ever buffered at once: for tests and diagnostics."""
        self.typical = 0
        """Bytes per message expected of the next fetch: 0 until a fetch is measured, then at
        least 1 (:meth:`saw`)."""
        self._means: deque[int] = deque(maxlen=_RECENT_FETCHES)
        # The running mean's sums, halved past _SAMPLE_MESSAGES so that it follows a change.
        self._sample_bytes = 0
        self._sample_count = 0

    def add(self, size: int) -> None:
        """``size`` bytes were buffered."""
        self.used += size
        self.peak = max(self.peak, self.used)

    def has_room(self) -> bool:
        """Whether a fetch may buffer more now."""
        return self.used == 0 or self.used + self.typical <= self.limit

    def fetch_count(self, batch_max: int) -> int:
        """How many messages one ``consume()`` may ask for: what fits, at most ``batch_max``, >= 1.

        A size not known yet counts as 1 byte: the limit left is honoured even then.
        """
        return max(1, min(batch_max, (self.limit - self.used) // (self.typical or 1)))

    def saw(self, count: int, size: int) -> None:
        """A fetch's ``count`` measured messages (more than 0) held ``size`` bytes of values.

        ``typical`` becomes the largest mean size of the last ``_RECENT_FETCHES`` measured
        fetches, or the mean over about the last ``_SAMPLE_MESSAGES`` messages if larger, and
        at least 1 byte. Means over whole fetches, not their end messages: a tombstone (0 bytes)
        or a small message there cannot turn the bound off. It uses only sums the caller has
        made already: another pass over every message would cost more than librdkafka takes to
        fetch it.
        """
        self._means.append(-(-size // count))
        self._sample_bytes += size
        self._sample_count += count
        if self._sample_count > _SAMPLE_MESSAGES:
            self._sample_bytes //= 2
            self._sample_count //= 2
        running = -(-self._sample_bytes // self._sample_count)
        self.typical = max(1, running, *self._means)


def why_nothing(states: Iterable[HeldPartition]) -> int:
    """Why no batch can be handed out: 406 nothing held, 408 all batches out, 407 no data.

    Of the partitions held only: one fetched ahead of its claim, or being released, is not.
    """
    held = [s for s in states if s.fetched_ahead is None and not s.releasing]
    if not held:
        return 406
    if all(state.batch is not None for state in held):
        return 408
    return 407


def _passes(message: Any, filters: frozenset[str], filter_header: str) -> bool:
    for name, value in message.headers() or ():
        if name == filter_header:
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            return text in filters
    return False


def split_runs(messages: list[Any], topics_assigned: set[str]) -> list[Run]:
    """Cut ``consume()``'s list (not empty) into runs of one partition, with C-level passes only.

    A Python loop over every message would cost more than librdkafka takes to fetch it.
    """
    if len(topics_assigned) == 1:
        # Only ever one topic, so no message (not even one left over from a released
        # partition) can be of another: the partition alone tells runs apart, at a third
        # of the cost of comparing (topic, partition) pairs.
        (topic,) = topics_assigned
        first = messages[0].partition()
        # Most lists hold one partition (librdkafka queues a fetch response's messages of a
        # partition together): one counting pass says so without building groups. A list that
        # ends in another partition is mixed for sure, and skips that pass: it was half the
        # cost of splitting such a list (28 against 15 us per 1,000 messages).
        last = messages[-1].partition()
        if last == first and countOf(map(Message.partition, messages), first) == len(messages):
            return [((topic, first), len(messages))]
        partitions = map(Message.partition, messages)
        return [((topic, number), len(list(group))) for number, group in groupby(partitions)]
    keys = zip(map(Message.topic, messages), map(Message.partition, messages), strict=True)
    return [(key, len(list(group))) for key, group in groupby(keys)]


class FetchErrors:
    """Drops error events from ``consume()``'s list; logs each distinct error once a minute.

    A broker that is away reports the same error on every ``consume()``. A refused login or
    ACL is also handed to ``refused`` (the failure the application's next call raises), as
    often as it is logged: nothing comes of the partition until someone acts.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        kafka: Mapping[str, Any] | None = None,
        refused: Callable[[ClientBalanceError], None] = lambda _error: None,
    ) -> None:
        self._kafka = kafka  # whose secrets librdkafka's words must not carry into the log
        self._refused = refused
        self._logged = OncePer(_ERROR_LOG_EVERY_S, clock)  # by (error, topic)

    def drop(
        self, messages: list[Any]
    ) -> tuple[list[Any], list[tuple[str | None, int | None, int | None]]]:
        """The messages without error events, and the partitions fetched out of range.

        The second list has (topic, partition, position) for each partition whose position is
        no longer in the log (retention deleted past it), or None for a truncated log; the
        messages of such a partition in the same list are left out too (the old leader's).
        End-of-partition events go silently.
        """
        kept, out_of_range, truncated = [], [], set()
        for message in messages:
            error = message.error()
            if error is None:
                kept.append(message)
            elif error.code() == KafkaError._AUTO_OFFSET_RESET:
                out_of_range.append((message.topic(), message.partition(), message.offset()))
                if message.offset() is None:  # a truncated log: see below
                    truncated.add((message.topic(), message.partition()))
            elif error.code() != KafkaError._PARTITION_EOF and self._log(
                scrub(str(error), self._kafka), message.topic()
            ):
                mapped = from_kafka_exception(
                    KafkaException(error), "fetching", kafka=self._kafka, operation="Read",
                    resource=message.topic(),
                )  # fmt: skip
                if is_access_denied(mapped):
                    self._refused(mapped)
        if truncated:  # the old leader's messages fetched before it: the new log may lack them
            kept = [m for m in kept if (m.topic(), m.partition()) not in truncated]
        return kept, out_of_range

    def _log(self, text: str, topic: str | None) -> bool:
        """Log the error unless it was logged for ``topic`` less than a minute ago; whether it was.

        Each error of each topic on its own clock: with one remembered, two errors that took
        turns were each new every time (a refusal raised on every call), and a second topic's
        refusal, worded alike, was never named.
        """
        if self._logged.admit((text, topic)) is None:
            return False
        _log.warning("fetch error", error=text, topic=topic)
        return True
