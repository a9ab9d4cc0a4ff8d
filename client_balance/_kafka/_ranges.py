"""One-off reads of offset ranges (a Spark task's share): no group, no commits, no buffers.

The reader fetches with ``auto.offset.reset=error``: a range whose start the log no longer has
(retention or ``delete_records`` ran after the read was planned) is reported as
:class:`~client_balance.errors.DataLossError` instead of silently read from the log's start. A
gap inside the log (a compacted record, a transaction marker) is fetched past as usual: the
broker answers a fetch inside the log with what follows, so only a start outside it is a loss.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from itertools import chain, groupby
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from client_balance._kafka._clients import LIBRDKAFKA_DEFAULTS, kafka_tp, reader_client
from client_balance._kafka._errors import (
    data_lost,
    from_kafka_exception,
    is_out_of_range,
    is_transient,
    timed_out,
)
from client_balance.errors import DataLossError
from client_balance.keys import TopicPartition

__all__ = ["read_ranges"]

_READ_WAIT_S = 0.1
_GONE_CHECK_S = 5.0
"""No message for this long: ask whether the unfinished ranges' topics still exist. librdkafka
says nothing of an assigned partition whose topic was deleted: the read sat out its whole idle
timeout, then failed as if the cluster had not answered."""
_WATERMARK_TIMEOUT_S = 30.0
"""Bound on asking a partition's watermarks after its start turned out to be gone."""

Left = dict[TopicPartition, tuple[int, int]]

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
    on_data_loss: Callable[[DataLossError], None] | None = None,
) -> Iterable[list[Message]]:
    """Read ``[start, end)`` of each partition once, in lists of up to ``batch_max_messages``.

    For one-off readers (a Spark task): a plain assign-only client of its own, no commits, no
    buffers beyond a list. Raises :class:`KafkaClientError` when no message arrives for
    ``idle_timeout_s`` while some range is unfinished (the cluster does not answer).

    Offsets of a range that the log no longer has are a :class:`DataLossError`, raised unless
    ``on_data_loss`` takes it: if that returns, the range goes on from the log's start (or ends,
    if nothing of it is left).
    """
    left = {tp: (start, end) for tp, (start, end) in ranges.items() if start < end}
    if not left:
        return
    # The fetching consumer's settings: with librdkafka's 1,000 ms fetch.queue.backoff.ms a
    # task reading a backlog sat idle most of each second (168k against 880k msg/s for four
    # partitions, docs/spark.md#performance). ``config`` (the kafka. options) overrides them,
    # but not auto.offset.reset: a start the log lost must be seen, never skipped silently.
    consumer = reader_client({**LIBRDKAFKA_DEFAULTS, **config, "auto.offset.reset": "error"})
    try:
        consumer.assign([kafka_tp(tp, start) for tp, (start, _) in left.items()])
        last_progress = next_check = time.monotonic()
        while left:
            # No more than the ranges still hold: consume() returns as soon as it has them,
            # instead of waiting out its timeout for a full batch at the end of every read.
            wanted = min(batch_max_messages, sum(end - start for start, end in left.values()))
            try:
                messages = consumer.consume(num_messages=wanted, timeout=_READ_WAIT_S)
            except KafkaException as error:
                raise from_kafka_exception(error, "reading offset ranges") from error
            gone: list[TopicPartition] = []
            kept = _within(messages, left, consumer, gone)
            if gone:
                _skip_lost(consumer, left, gone, on_data_loss)
                last_progress = time.monotonic()
            if not messages and _past_the_end(consumer, left):
                last_progress = time.monotonic()
            if kept:
                last_progress = time.monotonic()
                yield kept
                continue
            now = time.monotonic()
            idle_s = now - last_progress
            if left and idle_s > min(_GONE_CHECK_S, idle_timeout_s / 2) and now >= next_check:
                next_check = now + _GONE_CHECK_S
                if _skip_deleted(consumer, left, on_data_loss):
                    last_progress = now
            if left and time.monotonic() - last_progress > idle_timeout_s:
                unfinished = ", ".join(f"{tp}@{b[0]}..{b[1]}" for tp, b in sorted(left.items()))
                raise timed_out(f"reading {unfinished}", idle_timeout_s, "no message arrived")
    finally:
        consumer.close()


def _raise_lasting(errors: list[KafkaError | None]) -> None:
    """Raise the first error event that is no passing state of the cluster.

    librdkafka reports a batch it skipped (a CRC that does not match, with ``check.crcs``) or
    a fetch refused (no Read ACL) as error events among the messages: dropped with the rest,
    the first left a gap without a word, the second looked like a cluster that sends nothing.
    An offset out of range is the caller's (data loss); the end of a partition says nothing.
    """
    for error in errors:
        if error is None or is_out_of_range(error) or error.code() == KafkaError._PARTITION_EOF:
            continue
        raised = from_kafka_exception(KafkaException(error), "reading offset ranges")
        if not is_transient(raised):
            raise raised


def _within(
    messages: list[Message], left: Left, consumer: Consumer, gone: list[TopicPartition]
) -> list[Message]:
    """The messages inside their ranges; finished ranges leave ``left``, the others move on.

    Partitions whose next offset the log no longer has (an out-of-range error) go to ``gone``.

    A range read to its end (or past it) is dropped and unassigned; any other now starts after
    its last message read, so ``left`` says how many messages can still come. Works on runs
    (consecutive messages of one partition, which ``consume()`` returns in offset order), not
    message by message: the per-message work is four C calls through ``map`` and ``groupby``,
    and a list is copied only when something is dropped.
    """
    errors = list(map(_error, messages))
    # any(), not count(None): comparing a KafkaError with None raises inside confluent-kafka.
    if any(errors):  # rare: error events come inside the list
        _raise_lasting(errors)
        gone += sorted(
            {
                TopicPartition(message.topic() or "", message.partition() or 0)
                for message, error in zip(messages, errors, strict=True)
                if error is not None and is_out_of_range(error)
            }
        )
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


def _skip_lost(
    consumer: Consumer,
    left: Left,
    gone: list[TopicPartition],
    on_data_loss: Callable[[DataLossError], None] | None,
) -> None:
    """Report the lost offsets of ``gone``'s ranges and go on from what the log still has.

    A start below the log's start lost ``[start, low)``; a start at or past its end (the log
    was truncated, or deleted up to its end) lost the whole rest of the range.
    """
    for tp in gone:
        if tp not in left:
            continue  # finished meanwhile: nothing of it was to be read
        start, end = left[tp]
        try:
            low, high = consumer.get_watermark_offsets(kafka_tp(tp), timeout=_WATERMARK_TIMEOUT_S)
        except KafkaException as error:
            raise from_kafka_exception(error, f"reading the watermarks of {tp}") from error
        resume = low if start < low else (end if start >= high else start)
        if resume > start:
            lost = data_lost(tp, start, min(resume, end), f"reading {tp} from offset {start}")
            if on_data_loss is None:
                raise lost
            on_data_loss(lost)
        # Fetching stopped at the error: assign the partition again where its data starts.
        consumer.incremental_unassign([kafka_tp(tp)])
        if resume >= end:
            del left[tp]
            continue
        left[tp] = (resume, end)
        consumer.incremental_assign([kafka_tp(tp, resume)])


def _skip_deleted(
    consumer: Consumer, left: Left, on_data_loss: Callable[[DataLossError], None] | None
) -> bool:
    """Report and drop the ranges of topics deleted since the read was planned; True if any.

    Their unread offsets are lost, as Spark's source has it: :class:`DataLossError`, raised
    unless ``on_data_loss`` takes it (``failOnDataLoss=false``: a deleted topic left behind).
    """
    deleted: list[TopicPartition] = []
    for topic in sorted({tp.topic for tp in left}):
        try:
            found = consumer.list_topics(topic, timeout=_GONE_CHECK_S).topics.get(topic)
        except KafkaException:  # no answer says nothing: the idle timeout decides
            continue
        gone = found is None or (found.error is not None and found.error.code() in _GONE_CODES)
        # Made anew with fewer partitions: those past its count are gone too (a partition of
        # a topic that answers with an error says nothing: its metadata may lag).
        fewer = found is not None and found.error is None
        deleted += sorted(
            tp for tp in left
            if tp.topic == topic and (gone or (fewer and tp.partition not in found.partitions))
        )  # fmt: skip
    for tp in deleted:
        start, end = left.pop(tp)
        consumer.incremental_unassign([kafka_tp(tp)])
        lost = DataLossError(
            f"reading {tp} from offset {start}: its topic was deleted, and offsets "
            f"[{start}, {end}) of it with it ({end - start} messages not read)",
            partition=str(tp), lost_from=start, lost_to=end,
        )  # fmt: skip
        if on_data_loss is None:
            raise lost
        on_data_loss(lost)
    return bool(deleted)


_GONE_CODES = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})


def _past_the_end(consumer: Consumer, left: Left) -> bool:
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
