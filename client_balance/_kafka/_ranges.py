"""One-off reads of offset ranges (a Spark task's share): no group, no commits, no buffers."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message

from client_balance._kafka._clients import kafka_tp, reader_client
from client_balance._kafka._errors import from_kafka_exception, timed_out
from client_balance.keys import TopicPartition

__all__ = ["read_ranges"]

_READ_WAIT_S = 0.1


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
    consumer = reader_client(config)
    try:
        consumer.assign([kafka_tp(tp, start) for tp, (start, _) in left.items()])
        last_progress = time.monotonic()
        while left:
            try:
                messages = consumer.consume(num_messages=batch_max_messages, timeout=_READ_WAIT_S)
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
            consumer.incremental_unassign([kafka_tp(key)])
    return kept


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
