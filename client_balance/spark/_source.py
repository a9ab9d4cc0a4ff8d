"""The ``client_balance`` PySpark data source: Spark tasks are the SDK's nodes.

It reads in batch (``spark.read``) and in Structured Streaming (``spark.readStream``).

On the driver, ``partitions()`` asks Kafka for each partition's range (its watermarks and the
group's committed offsets), resolves ``startingOffsets``/``endingOffsets`` into ``[start, end)``
per partition, and hands the partitions to ``sourceCount`` nodes with the chosen strategy, the
same one the SDK's workers use. Each task (``read()``, on an executor) reads its node's ranges
with a client of its own and yields Arrow record batches with exactly the schema's types
(``_read``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from client_balance import admin
from client_balance._secrets import MaskedConfig
from client_balance.keys import TopicPartition
from client_balance.spark._options import COMMITTED, EARLIEST, LATEST, SourceOptions, parse_options
from client_balance.spark._ownership import held_by_live_members, refuse_held
from client_balance.spark._read import read_node
from client_balance.strategies import Strategy, get_strategy
from client_balance.strategies._nodes import node_assignment, partition_counts
from client_balance.strategies._registry import adopt_strategies

__all__ = ["SCHEMA", "ClientBalanceDataSource", "NodePartition", "with_strategies"]

SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
        StructField("node_id", IntegerType()),
    ]
)
"""Spark's Kafka source columns, plus the node that read the row."""

_READER_GROUP = "__client_balance_spark_reader"
_OWNERSHIP_TIMEOUT_S = 30.0
"""Bound on reading the group's status view before a read is planned."""


@dataclass(frozen=True)
class NodePartition(InputPartition):
    """One node's share: everything its task needs, since it runs in another process."""

    node_id: int
    ranges: tuple[tuple[str, int, int, int], ...]
    """(topic, partition, start, end) with end exclusive."""
    kafka: Mapping[str, str]
    """The reader's librdkafka configuration: a :class:`MaskedConfig`, so the partition's repr
    (Spark logs and shows it) never shows a secret, while its pickle carries the real values."""
    batch_max_messages: int

    def __post_init__(self) -> None:
        if not isinstance(self.kafka, MaskedConfig):
            object.__setattr__(self, "kafka", MaskedConfig(self.kafka))


class ClientBalanceDataSource(DataSource):
    """``spark.read.format("client_balance")``: Kafka through client-balanced nodes.

    Spark plans the read in Python worker processes of its own, with no SparkContext, so a
    strategy registered in the driver's process is unknown there, and so is the cluster's
    default parallelism: :func:`with_strategies` makes a subclass that carries both along
    (``client_balance.spark.register`` uses it).
    """

    strategies: ClassVar[Mapping[str, Strategy]] = {}
    """Strategies registered where the source was registered, by name."""
    default_parallelism: ClassVar[int | None] = None
    """The registering session's default parallelism: the nodes without ``sourceCount``."""

    @classmethod
    def name(cls) -> str:
        """The format name (never ``kafka``: Spark's own source would shadow it)."""
        return "client_balance"

    def schema(self) -> StructType:
        """Spark's Kafka source schema plus ``node_id``."""
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader; the options are checked here, on the driver."""
        adopt_strategies(self.strategies)
        return _BatchReader(
            parse_options(self.options, default_source_count=self.default_parallelism)
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 - Spark's name
        """The micro-batch reader."""
        adopt_strategies(self.strategies)
        return _StreamReader(
            parse_options(self.options, default_source_count=self.default_parallelism)
        )


def with_strategies(
    strategies: Mapping[str, Strategy], *, default_parallelism: int | None = None
) -> type[ClientBalanceDataSource]:
    """The data source, carrying what the processes where Spark plans the read cannot know.

    ``strategies`` (registered in the driver) and ``default_parallelism`` (the session's)
    become class attributes. Spark pickles the class it registers (by value when it is made
    here, as this one is), and them with it: the rules need not be importable in those processes.
    """
    if not strategies and default_parallelism is None:
        return ClientBalanceDataSource
    return type(
        ClientBalanceDataSource.__name__,
        (ClientBalanceDataSource,),
        {
            "strategies": dict(strategies),
            "default_parallelism": default_parallelism,
            "__doc__": ClientBalanceDataSource.__doc__,
        },
    )


class _BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self._options = options

    def partitions(self) -> list[NodePartition]:
        options = self._options
        offsets = _partition_offsets(options)
        ranges = {
            tp: _range(tp, low, high, committed, options)
            for tp, (low, high, committed) in offsets.items()
        }
        _refuse_live_holders(options, ranges)
        return _node_partitions(ranges, options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, NodePartition)  # noqa: S101 - partitions() made it
        return read_node(partition)


class _StreamReader(DataSourceStreamReader):
    """Micro-batches; offsets are ``{"topic": {"partition": next offset}}`` in sorted order.

    ``commit(end)`` comes one micro-batch late (Spark calls it while planning the next batch),
    so the Kafka group's offsets are also committed when Spark asks for the latest offset: it
    then starts from the end of a batch that is done. Spark's checkpoint stays the source of
    truth; the group's offsets are for the workers and the operator view.
    """

    def __init__(self, options: SourceOptions) -> None:
        self._options = options

    def _offsets(self) -> dict[TopicPartition, tuple[int, int, int | None]]:
        return _partition_offsets(self._options)

    def initialOffset(self) -> dict[str, dict[str, int]]:  # noqa: N802 - Spark's name
        """Where a query without a checkpoint starts: ``startingOffsets``."""
        found = self._offsets()
        _refuse_live_holders(self._options, found)
        return _offset_json(
            {tp: _pick(self._options.starting, tp, *bounds) for tp, bounds in found.items()}
        )

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 - Spark's name
        """``maxOffsetsPerTrigger`` messages per micro-batch, or everything available."""
        most = self._options.max_offsets_per_trigger
        return ReadAllAvailable() if most is None else ReadMaxRows(most)

    def latestOffset(  # noqa: N802 - Spark's name
        self, start: dict[str, dict[str, int]] | None, limit: ReadLimit
    ) -> dict[str, dict[str, int]]:
        """The next batch's end: high watermarks (new partitions too), cut to the read limit.

        The limit is shared in proportion to each partition's backlog. Spark calls this once
        the previous batch is done, so that batch's end (``start``) is committed here.
        """
        first = _parse_offset_json(start or {})
        if first:
            self._commit(first)
        highs = {tp: high for tp, (_, high, _) in self._offsets().items()}
        if isinstance(limit, ReadMaxRows):
            highs = _cut(first, highs, limit.max_rows)
        return _offset_json(highs)

    def partitions(
        self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]
    ) -> list[NodePartition]:
        """The nodes' shares of ``[start, end)``; a partition new in ``end`` starts at 0."""
        first, last = _parse_offset_json(start), _parse_offset_json(end)
        ranges = {tp: (first.get(tp, 0), stop) for tp, stop in last.items()}
        if all(begin >= stop for begin, stop in ranges.values()):
            return []
        return _node_partitions(ranges, self._options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, NodePartition)  # noqa: S101 - partitions() made it
        return read_node(partition)

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Everything before ``end`` is processed: commit it to the Kafka group."""
        self._commit(_parse_offset_json(end))

    def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        options = self._options
        if options.commit_to_kafka and options.group_id is not None:
            admin.commit_offsets(
                options.bootstrap_servers, options.group_id, offsets, kafka=options.kafka
            )


def _refuse_live_holders(options: SourceOptions, partitions: Iterable[TopicPartition]) -> None:
    """Refuse to read what live SDK members of the group hold (``_ownership``), unless told."""
    if options.group_id is None or options.read_held_partitions:
        return
    held = held_by_live_members(
        partitions,
        bootstrap_servers=options.bootstrap_servers,
        group_id=options.group_id,
        kafka=options.kafka,
        status_topic=options.status_topic,
        timeout_s=_OWNERSHIP_TIMEOUT_S,
    )
    refuse_held(held, options.group_id)


def _cut(
    first: dict[TopicPartition, int], highs: dict[TopicPartition, int], most: int
) -> dict[TopicPartition, int]:
    """Ends that take at most ``most`` messages, shared in proportion to each backlog."""
    backlog = {tp: max(high - first.get(tp, 0), 0) for tp, high in highs.items()}
    total = sum(backlog.values())
    if total <= most:
        return highs
    share = {tp: most * size // total for tp, size in backlog.items()}
    left = most - sum(share.values())
    for tp in sorted(backlog, key=lambda tp: (-backlog[tp], tp)):  # the remainder, biggest first
        if left <= 0:
            break
        if share[tp] < backlog[tp]:
            share[tp] += 1
            left -= 1
    return {tp: first.get(tp, 0) + share[tp] for tp in highs}


def _partition_offsets(options: SourceOptions) -> dict[TopicPartition, tuple[int, int, int | None]]:
    """(low, high, committed) of every partition of the options' topics."""
    return admin.partition_offsets(
        options.bootstrap_servers,
        options.group_id or _READER_GROUP,
        list(options.topics),
        kafka=options.kafka,
    )


def _offset_json(offsets: dict[TopicPartition, int]) -> dict[str, dict[str, int]]:
    # Spark compares offsets as JSON strings: build them in one order, always.
    answer: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        answer.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return answer


def _parse_offset_json(offsets: dict[str, dict[str, int]]) -> dict[TopicPartition, int]:
    return {
        TopicPartition(topic, int(number)): int(offset)
        for topic, per_partition in offsets.items()
        for number, offset in per_partition.items()
    }


def _node_partitions(
    ranges: dict[TopicPartition, tuple[int, int]], options: SourceOptions
) -> list[NodePartition]:
    counts = partition_counts(ranges)
    shares = node_assignment(get_strategy(options.strategy), counts, options.nodes(len(ranges)))
    config = options.kafka_config(_READER_GROUP)
    return [
        NodePartition(
            node_id=node,
            ranges=tuple(
                (tp.topic, tp.partition, *ranges[tp]) for tp in sorted(share) if tp in ranges
            ),
            kafka=config,
            batch_max_messages=options.batch_max_messages,
        )
        for node, share in enumerate(shares)
    ]


def _range(
    tp: TopicPartition, low: int, high: int, committed: int | None, options: SourceOptions
) -> tuple[int, int]:
    start = _pick(options.starting, tp, low, high, committed)
    end = _pick(options.ending, tp, low, high, committed) if options.ending != LATEST else high
    return start, max(start, end)


def _pick(
    chosen: dict[str, dict[int, int]] | int,
    tp: TopicPartition,
    low: int,
    high: int,
    committed: int | None,
) -> int:
    offset = (
        chosen if isinstance(chosen, int) else chosen.get(tp.topic, {}).get(tp.partition, EARLIEST)
    )
    if offset == EARLIEST:
        return low
    if offset == LATEST:
        return high
    if offset == COMMITTED:
        return low if committed is None else min(max(committed, low), high)
    return min(max(offset, low), high)
