"""One-off reads of offset ranges (a Spark task's share): no group, no commits, no buffers."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from itertools import chain, groupby
from typing import Any, cast

from confluent_kafka import Consumer, KafkaException, Message

from client_balance._kafka._clients import LIBRDKAFKA_DEFAULTS, kafka_tp, reader_client
from client_balance._kafka._errors import from_kafka_exception, timed_out
from client_balance.keys import TopicPartition

__all__ = ["read_ranges"]

_READ_WAIT_S = 0.1

# Per-message calls through the method descriptors: ``map`` runs them without a Python frame.
_error, _topic, _partition, _offset = (
    Message.error,
    Message.topic,
    Message.partition,
    Message.offset,
)


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
    # The fetching consumer's settings: with librdkafka's 1,000 ms fetch.queue.backoff.ms a
    # task reading a backlog sat idle most of each second (168k against 880k msg/s for four
    # partitions, docs/spark.md#performance). ``config`` (the kafka. options) overrides them.
    consumer = reader_client({**LIBRDKAFKA_DEFAULTS, **config})
    try:
        consumer.assign([kafka_tp(tp, start) for tp, (start, _) in left.items()])
        last_progress = time.monotonic()
        while left:
            # No more than the ranges still hold: consume() returns as soon as it has them,
            # instead of waiting out its timeout for a full batch at the end of every read.
            wanted = min(batch_max_messages, sum(end - start for start, end in left.values()))
            try:
                messages = consumer.consume(num_messages=wanted, timeout=_READ_WAIT_S)
            except KafkaException as error:
                raise from_kafka_exception(error, "reading offset ranges") from error
            kept = _within(messages, left, consumer)
            if not messages and _past_the_end(consumer, left):
                last_progress = time.monotonic()
            if kept:
                last_progress = time.monotonic()
                yield kept
            elif left and time.monotonic() - last_progress > idle_timeout_s:
                unfinished = ", ".join(f"{tp}@{b[0]}..{b[1]}" for tp, b in sorted(left.items()))
                raise timed_out(f"reading {unfinished}", idle_timeout_s, "no message arrived")
    finally:
        consumer.close()


def _within(
    messages: list[Message], left: dict[TopicPartition, tuple[int, int]], consumer: Consumer
) -> list[Message]:
    """The messages inside their ranges; finished ranges leave ``left``, the others move on.

    A range read to its end (or past it) is dropped and unassigned; any other now starts after
    its last message read, so ``left`` says how many messages can still come. Works on runs
    (consecutive messages of one partition, which ``consume()`` returns in offset order), not
    message by message: the per-message work is four C calls through ``map`` and ``groupby``,
    and a list is copied only when something is dropped.
    """
    errors = list(map(_error, messages))
    # any(), not count(None): comparing a KafkaError with None raises inside confluent-kafka.
    if any(errors):  # rare: error events come inside the list
        messages = [
            message
            for message, error in zip(messages, errors, strict=True)
            if error is None and message.offset() is not None
        ]
    if not messages:
        return messages
    # A message without an error always has its offset (>= 0): no None left to check for.
    offsets = cast("list[int]", list(map(_offset, messages)))
    partitions = list(map(_partition, messages))
    topics = list(map(_topic, messages))
    one_topic = topics.count(topics[0]) == len(topics)
    runs = groupby(partitions) if one_topic else groupby(zip(topics, partitions, strict=True))
    kept: list[tuple[int, int]] = []  # [first, stop) of the messages to keep
    first = 0
    for _, run in runs:
        stop = first + len(list(run))
        key = TopicPartition(topics[first] or "", partitions[first] or 0)
        bounds = left.get(key)
        if bounds is not None:
            end = bounds[1]
            cut = stop
            if offsets[stop - 1] >= end:  # the range ends inside this run: its last one
                cut = first
                while cut < stop and offsets[cut] < end:
                    cut += 1
            if cut > first:
                kept.append((first, cut))
            if offsets[stop - 1] + 1 >= end:  # read to the end, or past it (a gap at the end)
                del left[key]
                consumer.incremental_unassign([kafka_tp(key)])
            else:
                left[key] = (offsets[stop - 1] + 1, end)
        first = stop
    if sum(stop - begin for begin, stop in kept) == len(messages):
        return messages
    return list(chain.from_iterable(messages[begin:stop] for begin, stop in kept))


def _past_the_end(consumer: Consumer, left: dict[TopicPartition, tuple[int, int]]) -> bool:
    """Drop ranges whose position passed their end without a message at ``end - 1``.

    The end may be a transaction marker or a compacted-away record. True if any was dropped.
    """
    positions = consumer.position([kafka_tp(tp) for tp in left])
    dropped = False
    for position in positions:
        key = TopicPartition(position.topic, position.partition)
        if key in left and position.offset >= left[key][1]:
            del left[key]
            dropped = True
    return dropped
