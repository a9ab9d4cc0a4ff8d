"""Planning a read on the driver: which partitions, which offsets, and which Spark tasks.

The options name the partitions (``topics``, ``subscribePattern`` or ``assign``); Kafka answers
each one's watermarks and the group's committed offset; ``startingOffsets``/``endingOffsets``,
or the timestamps that win over them, become ``[start, end)`` per partition, checked for data
loss (``failOnDataLoss``); the strategy hands the partitions to the nodes, and ``minPartitions``
may cut a node's share into several tasks (``_split``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from client_balance import admin
from client_balance._kafka import data_lost, offsets_for_timestamps
from client_balance.errors import ConfigError
from client_balance.keys import TopicPartition
from client_balance.spark._loss import report_gone, report_loss, report_reset
from client_balance.spark._offset_checks import refuse_reversed, refuse_unknown
from client_balance.spark._option_values import COMMITTED, EARLIEST, LATEST, Offsets
from client_balance.spark._options import SourceOptions
from client_balance.spark._partition import NodePartition
from client_balance.spark._split import split_shares
from client_balance.strategies import get_strategy
from client_balance.strategies._nodes import node_assignment, partition_counts

__all__ = [
    "BATCH_START",
    "READER_GROUP",
    "Bounds",
    "batch_ranges",
    "batch_start",
    "cut",
    "existing_offsets",
    "node_partitions",
    "offset_json",
    "parse_offset_json",
    "partition_offsets",
    "stream_bases",
    "stream_ranges",
    "stream_starts",
    "with_batch_start",
]

READER_GROUP = "__client_balance_spark_reader"
"""The group of a read without ``group.id``: its offsets are read, never committed."""
_SHOWN = 5  # partitions named in an error; the count says how many more

Bounds = Mapping[TopicPartition, tuple[int, int, int | None]]
"""Partition -> (low watermark, high watermark, the group's committed offset or None)."""


def partition_offsets(options: SourceOptions, *, skip_missing: bool = False) -> Bounds:
    """(low, high, committed) of every partition the options read, as Kafka answers now.

    A pattern is matched against the cluster's topics on every call, so a streaming query
    finds the topics created since its last micro-batch. A topic or partition that ``topics``
    or ``assign`` names and the cluster lacks is a ``ConfigError``, unless ``skip_missing``:
    a stream past its start leaves it out, and the planner counts what it had read of it as
    data loss (``stream_bases``), as for a pattern.
    """
    servers, kafka = options.bootstrap_servers, options.kafka
    group = options.group_id or READER_GROUP
    if options.subscribe_pattern is not None:
        return admin.partition_offsets(
            servers,
            group,
            [],
            kafka=kafka,
            skip_missing=True,  # a topic deleted between the listing and the offsets
            matching=_matcher(options.subscribe_pattern),
        )
    if options.assign is None:
        topics = list(options.topics)
        return admin.partition_offsets(
            servers, group, topics, kafka=kafka, skip_missing=skip_missing
        )
    topics = sorted({tp.topic for tp in options.assign})
    found = admin.partition_offsets(servers, group, topics, kafka=kafka, skip_missing=True)
    # ConfigError, not PartitionNotFoundError: the option is wrong, as for a missing topic
    # (PartitionNotFoundError is a consumer call's answer about one partition key).
    missing = [tp for tp in options.assign if tp not in found]
    if missing and not skip_missing:
        shown = ", ".join(map(str, missing[:_SHOWN]))
        more = f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        raise ConfigError(
            f"assign names partitions the cluster does not have: {shown}{more}; use partitions "
            "of existing topics"
        )
    return {tp: found[tp] for tp in options.assign if tp in found}


def existing_offsets(options: SourceOptions, partitions: Iterable[TopicPartition]) -> Bounds:
    """(low, high, committed) of those of ``partitions`` that Kafka has now; none is an error."""
    topics = sorted({tp.topic for tp in partitions})
    group = options.group_id or READER_GROUP
    return admin.partition_offsets(
        options.bootstrap_servers, group, topics, kafka=options.kafka, skip_missing=True
    )


def _matcher(pattern: str) -> Callable[[str], bool]:
    compiled = re.compile(pattern)

    def matches(topic: str) -> bool:
        # Internal topics (__consumer_offsets, the status topic) are never a read's data.
        return not topic.startswith("__") and compiled.fullmatch(topic) is not None

    return matches


def batch_ranges(options: SourceOptions, bounds: Bounds) -> dict[TopicPartition, tuple[int, int]]:
    """``[start, end)`` of every partition, clamped into its log, data loss reported.

    Offset JSON naming what the read does not have, and an end before its start, are
    ``ConfigError``s (``_offset_checks``).
    """
    _refuse_unknown(options, bounds, starting=True)
    _refuse_unknown(options, bounds, starting=False)
    starts = _timed(options, options.starting_times, bounds, starting=True)
    ends = _timed(options, options.ending_times, bounds, starting=False)
    ranges = {}
    for tp, (low, high, _) in sorted(bounds.items()):
        start = starts[tp] if starts else _pick(options.starting, tp, bounds[tp], starting=True)
        end = ends[tp] if ends else _pick(options.ending, tp, bounds[tp], starting=False)
        refuse_reversed(tp, start, end, high)
        end = min(end, high)
        _check_loss(options, tp, start, min(low, end), "planning the read")
        start = min(max(start, low), high)
        ranges[tp] = (start, max(start, end))
    return ranges


def stream_starts(options: SourceOptions, bounds: Bounds) -> dict[TopicPartition, int]:
    """Where a new streaming query starts in each partition, data loss reported.

    The JSON is checked against the partitions there are now, when it is applied: a stream
    restarted from its checkpoint never applies it again. A partition named for a topic not
    created yet is refused, as Spark's own source asserts it at a query's start.
    """
    _refuse_unknown(options, bounds, starting=True)
    starts = _timed(options, options.starting_times, bounds, starting=True)
    answer = {}
    for tp, (low, high, _) in sorted(bounds.items()):
        start = starts[tp] if starts else _pick(options.starting, tp, bounds[tp], starting=True)
        _check_loss(options, tp, start, low, "starting the streaming query")
        answer[tp] = min(max(start, low), high)
    return answer


def stream_bases(
    options: SourceOptions, first: Mapping[TopicPartition, int], bounds: Bounds
) -> dict[TopicPartition, int]:
    """Where the next micro-batch's data starts: ``first`` (0: a new partition), or the log's.

    Data loss, as Spark's own Kafka source counts it: a partition of ``first`` that Kafka no
    longer has (its topic deleted), one whose log ends below its offset in ``first`` (the topic
    deleted and re-created, or the log truncated), and a start below the log's start. With
    ``failOnDataLoss=true`` each raises here, while planning. Without it a warning says so: the
    gone partition is left behind, the re-created one is read again from its log start
    (``stream_ranges``), and the task that reads a lost start warns as it reads on.
    """
    gone = {tp: offset for tp, offset in first.items() if tp not in bounds}
    if gone:
        report_gone(gone, fail=options.fail_on_data_loss)
    bases = {}
    for tp, (low, high, _) in sorted(bounds.items()):
        start = first.get(tp, 0)
        if start > high:
            report_reset(tp, start, high, low=low, fail=options.fail_on_data_loss)
            start = low
        if options.fail_on_data_loss:
            _check_loss(options, tp, start, low, "planning the next micro-batch")
        bases[tp] = max(start, low)
    return bases


def stream_ranges(
    options: SourceOptions, first: Mapping[TopicPartition, int], last: Mapping[TopicPartition, int]
) -> dict[TopicPartition, tuple[int, int]]:
    """``[start, end)`` of a micro-batch from its start and end offsets: never reversed.

    A partition new in ``last`` starts at 0; one only in ``first`` is gone from Kafka, and so
    from the batch. One that ends below its start is one whose log went back: ``stream_bases``
    warned and the batch reads it again from offset 0 (the task reports what of that the log no
    longer has). With ``failOnDataLoss=true`` it raises, as Spark's planning of a micro-batch
    does: ``stream_bases`` refused such an end, so it comes from a run without the flag.
    """
    ranges = {}
    for tp, end in sorted(last.items()):
        start = first.get(tp, 0)
        if start > end:
            if options.fail_on_data_loss:
                report_reset(tp, start, end, low=None, fail=True)
            start = 0
        ranges[tp] = (start, end)
    return ranges


def _refuse_unknown(options: SourceOptions, bounds: Bounds, *, starting: bool) -> None:
    """Refuse offset or timestamp JSON of one side naming partitions ``bounds`` lacks."""
    side = "starting" if starting else "ending"
    left_out = "to start at the earliest" if starting else "to end at the latest"
    chosen = options.starting if starting else options.ending
    times = options.starting_times if starting else options.ending_times
    refuse_unknown(f"{side}Offsets", chosen, bounds, left_out=left_out)
    refuse_unknown(f"{side}OffsetsByTimestamp", times, bounds, left_out=left_out)


def _check_loss(
    options: SourceOptions, tp: TopicPartition, start: int, lost_to: int, doing: str
) -> None:
    if start < lost_to:
        report_loss(data_lost(tp, start, lost_to, doing), fail=options.fail_on_data_loss)


def _timed(
    options: SourceOptions, times: Offsets | None, bounds: Bounds, *, starting: bool
) -> dict[TopicPartition, int]:
    """The offsets of the timestamps ``times``; empty without them.

    A partition without a timestamp starts at the earliest or ends at the latest offset; a
    timestamp no message reaches resolves to the end (``startingOffsetsByTimestampStrategy=
    error`` refuses it for a start, as Spark's default does).
    """
    if times is None:
        return {}
    stamps = {tp: stamp for tp in sorted(bounds) if (stamp := _chosen(times, tp)) is not None}
    found = offsets_for_timestamps(
        options.bootstrap_servers, options.group_id or READER_GROUP, stamps, kafka=options.kafka
    )
    answer = {}
    for tp, (low, high, _) in sorted(bounds.items()):
        if tp not in stamps:
            answer[tp] = low if starting else high
            continue
        offset = found.get(tp)
        if offset is None and starting and options.by_timestamp_strategy == "error":
            raise ConfigError(
                f"startingOffsetsByTimestampStrategy=error: {tp} has no message at or after "
                f"{stamps[tp]} ms; use startingOffsetsByTimestampStrategy=latest to start such a "
                "partition at its end"
            )
        answer[tp] = high if offset is None else offset
    return answer


def _chosen(chosen: Offsets, tp: TopicPartition) -> int | None:
    """``chosen``'s value for ``tp``: the one for every partition, or its own (None: none)."""
    if isinstance(chosen, int):
        return chosen
    return chosen.get(tp.topic, {}).get(tp.partition)


def _pick(
    chosen: Offsets, tp: TopicPartition, bound: tuple[int, int, int | None], *, starting: bool
) -> int:
    """The offset ``chosen`` asks for, not clamped: below the log's start is data loss.

    A partition ``chosen`` leaves out starts at the earliest offset, or ends at the latest
    (docs/spark.md), as with the timestamp options (``_timed``).
    """
    low, high, committed = bound
    offset = _chosen(chosen, tp)
    if offset is None:
        return low if starting else high
    if offset == EARLIEST:
        return low
    if offset == LATEST:
        return high
    if offset == COMMITTED:
        return low if committed is None else committed
    return offset


def cut(
    first: Mapping[TopicPartition, int], highs: dict[TopicPartition, int], most: int
) -> dict[TopicPartition, int]:
    """Ends that take about ``most`` messages, shared in proportion to each backlog.

    As Spark's own source (``KafkaMicroBatchStream.rateLimit``): a share below one is rounded
    up to one, so that a small backlog is never starved by a big one (it would wait for as long
    as that lasts), and the batch may exceed ``most`` by up to one message per such partition.
    The rest of ``most`` that rounding down leaves goes to the biggest backlogs first.
    """
    backlog = {tp: max(high - first.get(tp, 0), 0) for tp, high in highs.items()}
    total = sum(backlog.values())
    if total <= most:
        return highs
    share = {tp: max(most * size // total, min(size, 1)) for tp, size in backlog.items()}
    left = most - sum(share.values())
    for tp in sorted(backlog, key=lambda tp: (-backlog[tp], tp)):  # the remainder, biggest first
        if left <= 0:
            break
        if share[tp] < backlog[tp]:
            share[tp] += 1
            left -= 1
    return {tp: first.get(tp, 0) + share[tp] for tp in highs}


def offset_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's offset of a stream: ``{"topic": {"partition": offset}}``."""
    # Spark compares offsets as JSON strings: build them in one order, always.
    answer: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        answer.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return answer


BATCH_START = "$start"
"""Key of the first micro-batch's end offset that keeps where that batch starts.

Spark's checkpoint holds each batch's end only; batch 0's start is ``initialOffset()``, which
Spark asks again to run the batch and again after a restart, and which for ``latest`` (or the
group's offsets) answers further on once the topic has moved: messages would be skipped, or the
start would lie past the end. ``$`` is not legal in a topic name, so no topic can clash.
"""

StreamOffset = Mapping[str, Any]
"""One of Spark's stream offsets as JSON gives it: :func:`offset_json`, maybe with a start."""


def with_batch_start(end: StreamOffset, start: StreamOffset) -> dict[str, Any]:
    """``end`` that also keeps ``start`` (under :data:`BATCH_START`), as the first batch's."""
    return {**end, BATCH_START: offset_json(parse_offset_json(start))}


def batch_start(start: StreamOffset, end: StreamOffset) -> StreamOffset:
    """Where the micro-batch ``[start, end)`` starts: the start ``end`` keeps, else ``start``."""
    kept: StreamOffset | None = end.get(BATCH_START)
    return start if kept is None else kept


def parse_offset_json(offsets: StreamOffset) -> dict[TopicPartition, int]:
    """The partitions' offsets of one of Spark's stream offsets (:func:`offset_json`)."""
    return {
        TopicPartition(topic, int(number)): int(offset)
        for topic, per_partition in offsets.items()
        if topic != BATCH_START
        for number, offset in per_partition.items()
    }


def node_partitions(
    ranges: Mapping[TopicPartition, tuple[int, int]], options: SourceOptions
) -> list[NodePartition]:
    """The Spark tasks of a read: each node's share by the strategy, cut by ``minPartitions``."""
    counts = partition_counts(ranges)
    shares = node_assignment(get_strategy(options.strategy), counts, options.nodes(len(ranges)))
    config = options.kafka_config(READER_GROUP)
    per_node = [
        [(tp.topic, tp.partition, *ranges[tp]) for tp in sorted(share) if tp in ranges]
        for share in shares
    ]
    return [
        NodePartition(
            node_id=node,
            ranges=tuple(task),
            kafka=config,
            batch_max_messages=options.batch_max_messages,
            include_headers=options.include_headers,
            fail_on_data_loss=options.fail_on_data_loss,
        )
        for node, task in split_shares(per_node, options.min_partitions)
    ]
