"""Per-partition state of the fetcher: buffered runs of messages and the one batch out.

Pure bookkeeping, no Kafka calls: the fetcher holds its lock around every use.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, NamedTuple

from client_balance._kafka import KafkaError, Message
from client_balance._logging import get_logger
from client_balance.keys import TopicPartition

__all__ = ["Batch", "FetchErrors", "HeldPartition", "Positions", "split_runs", "why_nothing"]

_log = get_logger("fetch")
_ERROR_LOG_EVERY_S = 60.0

Run = tuple[tuple[str | None, int | None], int]
"""((topic, partition), length) of consecutive messages of one partition."""


@dataclass(slots=True)
class Batch:
    """One batch handed out: messages (filters applied), its range, and its token."""

    partition: TopicPartition
    token: int
    start: int
    end: int
    messages: list[Message]
    high: int | None


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
    buffered: int = 0
    batch: Batch | None = None
    paused: bool = False
    releasing: bool = False
    rewinding: bool = False
    high: int | None = None
    updated_s: float = field(default_factory=time.time)
    lost_to_retention: int = 0
    """Offsets retention deleted before they were delivered (see ``_retention``)."""
    announced: bool = True
    """False from ``hold`` until ``announce``: its ``on_assigned`` hook has not run yet."""

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

    def hand_out(self, batch_max: int, token: int, filter_header: str) -> Batch:
        """Take up to ``batch_max`` buffered messages as the batch out (filters applied)."""
        buffer = self.buffer
        taken: list[Any] = []
        need = batch_max
        while need and buffer:
            run = buffer[0]
            if len(run) <= need:
                taken += buffer.popleft()
                need -= len(run)
            else:
                taken += run[:need]
                buffer[0] = run[need:]
                need = 0
        self.buffered -= len(taken)
        end = taken[-1].offset() + 1
        messages = taken
        if self.filters is not None:
            messages = [m for m in taken if _passes(m, self.filters, filter_header)]
        self.batch = Batch(self.partition, token, self.confirmed, end, messages, self.high)
        return self.batch

    def add_run(self, run: list[Message], length: int, buffer_max: int) -> bool:
        """Buffer a run of fetched messages; True if the partition must be paused now."""
        self.buffer.append(run)
        self.buffered += length
        if self.buffered >= buffer_max and not self.paused:
            self.paused = True
            return True
        return False

    def drop_buffer(self) -> None:
        """Forget what is buffered (a rewind or a release)."""
        self.buffer.clear()
        self.buffered = 0


def why_nothing(states: Collection[HeldPartition]) -> int:
    """Why no batch can be handed out: 406 nothing held, 408 all batches out, 407 no data."""
    if not states:
        return 406
    if all(state.batch is not None for state in states):
        return 408
    return 407


def _passes(message: Any, filters: frozenset[str], filter_header: str) -> bool:
    for name, value in message.headers() or ():
        if name == filter_header:
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            return text in filters
    return False


def split_runs(messages: list[Any], topics_assigned: set[str]) -> list[Run]:
    """Cut ``consume()``'s list into runs of one partition, with C-level passes only.

    A Python loop over every message would cost more than librdkafka takes to fetch it.
    """
    if len(topics_assigned) == 1:
        # Only ever one topic, so no message (not even one left over from a released
        # partition) can be of another: the partition alone tells runs apart, at a third
        # of the cost of comparing (topic, partition) pairs.
        (topic,) = topics_assigned
        partitions = map(Message.partition, messages)
        return [((topic, number), len(list(group))) for number, group in groupby(partitions)]
    keys = zip(map(Message.topic, messages), map(Message.partition, messages), strict=True)
    return [(key, len(list(group))) for key, group in groupby(keys)]


class FetchErrors:
    """Drops error events from ``consume()``'s list; logs each distinct error once a minute.

    A broker that is away reports the same error on every ``consume()``.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last = ""
        self._last_s = 0.0

    def drop(
        self, messages: list[Any]
    ) -> tuple[list[Any], list[tuple[str | None, int | None, int | None]]]:
        """The messages without error events, and the partitions fetched out of range.

        The second list has (topic, partition, position) for each partition whose position is
        no longer in the log (retention deleted past it). End-of-partition events go silently.
        """
        kept, out_of_range = [], []
        for message in messages:
            error = message.error()
            if error is None:
                kept.append(message)
            elif error.code() == KafkaError._AUTO_OFFSET_RESET:
                out_of_range.append((message.topic(), message.partition(), message.offset()))
            elif error.code() != KafkaError._PARTITION_EOF:
                self._log(str(error), message.topic())
        return kept, out_of_range

    def _log(self, text: str, topic: str | None) -> None:
        now = self._clock()
        if self._last != text or now - self._last_s > _ERROR_LOG_EVERY_S:
            self._last, self._last_s = text, now
            _log.warning("fetch error", error=text, topic=topic)
