"""The ``client_balance`` PySpark data source: Spark tasks are the SDK's nodes.

It reads in batch (``spark.read``) and in Structured Streaming (``spark.readStream``).

On the driver, ``partitions()`` asks Kafka for each partition's range (its watermarks and the
group's committed offsets), resolves the starting and ending options into ``[start, end)`` per
partition, and hands the partitions to ``sourceCount`` nodes with the chosen strategy, the
same one the SDK's workers use (``_plan``). Each task (``read()``, on an executor) reads its
node's ranges with a client of its own and yields Arrow record batches with exactly the
schema's types (``_read``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from client_balance import admin
from client_balance._logging import get_logger
from client_balance.errors import ConfigError, KafkaClientError
from client_balance.keys import TopicPartition
from client_balance.spark._options import SourceOptions, include_headers, parse_options
from client_balance.spark._ownership import held_by_live_members, refuse_held
from client_balance.spark._partition import SCHEMA, NodePartition, source_schema
from client_balance.spark._plan import (
    Bounds,
    StreamOffset,
    batch_ranges,
    batch_start,
    cut,
    existing_offsets,
    node_partitions,
    offset_json,
    parse_offset_json,
    partition_offsets,
    stream_bases,
    stream_ranges,
    stream_starts,
    with_batch_start,
)
from client_balance.spark._read import read_node
from client_balance.spark._registration import QueryMembership, leave_on_terminate
from client_balance.strategies import Strategy
from client_balance.strategies._registry import adopt_strategies

__all__ = ["SCHEMA", "ClientBalanceDataSource", "NodePartition", "with_strategies"]

_OWNERSHIP_TIMEOUT_S = 30.0
"""Bound on reading the group's status view before a read is planned."""
_UNKNOWN_TOPIC_OR_PART = 3
"""Kafka's answer to a commit naming a partition it does not have (its topic was deleted)."""
_log = get_logger("spark")


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
        """Spark's Kafka source schema plus ``node_id``; ``headers`` unless includeHeaders=false."""
        return source_schema(include_headers(self.options))

    def _refuse_another(self, schema: StructType) -> None:
        """Refuse a user's ``.schema(...)``, as Spark's own source does.

        The rows are built for this source's schema: another failed only in a task, once data
        came, and an empty read passed.
        """
        if schema != self.schema():
            raise ConfigError(
                "a schema given with .schema(...) is not allowed: this source's rows have its "
                f"own ({self.schema().simpleString()}); drop .schema(...) and select or cast"
            )

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader; the options are checked here, on the driver."""
        self._refuse_another(schema)
        adopt_strategies(self.strategies)
        return _BatchReader(
            parse_options(self.options, default_source_count=self.default_parallelism)
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 - Spark's name
        """The micro-batch reader."""
        self._refuse_another(schema)
        adopt_strategies(self.strategies)
        return _StreamReader(
            parse_options(
                self.options, default_source_count=self.default_parallelism, streaming=True
            )
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
        ranges = batch_ranges(options, partition_offsets(options))
        _refuse_live_holders(options, ranges)
        return node_partitions(ranges, options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, NodePartition)  # noqa: S101 - partitions() made it
        return read_node(partition)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches; offsets are ``{"topic": {"partition": next offset}}`` in sorted order.

    ``commit(end)`` comes one micro-batch late (Spark calls it while planning the next batch),
    so the Kafka group's offsets are also committed when Spark asks for the latest offset: it
    then starts from the end of a batch that is done. Spark's checkpoint stays the source of
    truth; the group's offsets are for the workers and the operator view.

    ``SupportsTriggerAvailableNow``: without it Spark wraps the reader and asks for everything
    available once, which ignores ``maxOffsetsPerTrigger``.
    """

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        # Made by the first _hold(), in the process that serves the query: Spark also builds
        # this reader in planning processes and pickles it with its read function.
        self._membership: QueryMembership | None = None
        self._dropped: set[TopicPartition] = set()
        """Partitions left out of a commit as gone, logged once (``_existing``)."""
        self._initial: dict[str, dict[str, int]] | None = None
        """This process's answer to ``initialOffset()``: Spark asks twice and must hear one."""
        self._target: dict[TopicPartition, int] | None = None
        """``availableNow``: the high watermarks when the run began; no batch ends past them."""

    def _offsets(self, *, started: bool = False) -> Bounds:
        # Once the stream has read a topic, its deletion is data loss, not a wrong option.
        return partition_offsets(self._options, skip_missing=started)

    def initialOffset(self) -> dict[str, dict[str, int]]:  # noqa: N802 - Spark's name
        """Where a query without a checkpoint starts: ``startingOffsets`` or a timestamp.

        Asked once: Spark asks again to run the first batch, and ``latest`` would have moved.
        """
        if self._initial is None:
            found = self._offsets()
            starts = stream_starts(self._options, found)
            self._hold(starts, found)
            self._initial = offset_json(starts)
        return self._initial

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        """``availableNow``: read what there is now, in micro-batches of the read limit."""
        self._target = {tp: high for tp, (_, high, _) in self._offsets(started=True).items()}

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 - Spark's name
        """``maxOffsetsPerTrigger`` messages per micro-batch, or everything available."""
        most = self._options.max_offsets_per_trigger
        return ReadAllAvailable() if most is None else ReadMaxRows(most)

    def latestOffset(  # noqa: N802 - Spark's name
        self, start: StreamOffset | None, limit: ReadLimit
    ) -> dict[str, Any]:
        """The next batch's end: high watermarks (new partitions and topics too), cut to the limit.

        The limit is shared in proportion to each partition's backlog, counted from where the
        log starts (``stream_bases``: a start the log lost is data loss). Spark calls this once
        the previous batch is done, so that batch's end (``start``) is committed here. The first
        batch's end also keeps its start (``BATCH_START``), which Spark's checkpoint does not;
        with nothing new, ``start`` comes back as it is, so that Spark sees no new data.
        """
        first = parse_offset_json(start or {})
        found = self._offsets(started=bool(first))
        # Held first: a restarted query refused for a live member's partitions must not have
        # committed over that member's position.
        self._hold(first, found)
        if first:
            self._commit(first, found)  # before the loss checks: that batch is done either way
        bases = stream_bases(self._options, first, found)
        highs = {tp: high for tp, (_, high, _) in found.items()}
        if self._target is not None:
            highs = _within(highs, self._target, first)
        if isinstance(limit, ReadMaxRows):
            highs = cut(bases, highs, limit.max_rows)
        if start is not None and start == self._initial:
            return with_batch_start(offset_json(highs), start)
        if start is not None and highs == first:
            return dict(start)
        return offset_json(highs)

    def partitions(self, start: StreamOffset, end: StreamOffset) -> list[NodePartition]:
        """The nodes' shares of ``[start, end)``; a partition new in ``end`` starts at 0."""
        first = parse_offset_json(batch_start(start, end))
        ranges = stream_ranges(self._options, first, parse_offset_json(end))
        if all(begin >= stop for begin, stop in ranges.values()):
            return []
        return node_partitions(ranges, self._options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, NodePartition)  # noqa: S101 - partitions() made it
        return read_node(partition)

    def commit(self, end: StreamOffset) -> None:
        """Everything before ``end`` is processed: commit it to the Kafka group."""
        done = parse_offset_json(end)
        self._commit(done)
        if self._membership is not None:
            self._membership.hold(done, {})

    def stop(self) -> None:
        """The query stopped: leave the group (if Spark lets it: ``_registration``)."""
        if self._membership is not None:
            self._membership.leave()

    def _hold(self, positions: dict[TopicPartition, int], found: Bounds) -> None:
        """Hold every partition of the query's topics, standing at ``positions``.

        A query of a group is one of its members (``_registration``), unless it reads what the
        members hold, read-only.
        """
        options = self._options
        if options.group_id is None or options.read_held_partitions:
            return
        if self._membership is None:
            nodes = options.source_count or options.default_source_count or 0
            self._membership = QueryMembership(options, source_count=nodes)
            leave_on_terminate(self._membership)
        highs = {tp: high for tp, (_, high, _) in found.items()}
        self._membership.hold(positions, highs)

    def _commit(self, offsets: dict[TopicPartition, int], found: Bounds | None = None) -> None:
        """Commit ``offsets`` to the group, less the partitions Kafka no longer has.

        Kafka answers a partition of a deleted topic with UNKNOWN_TOPIC_OR_PART, which fails
        the call, and Spark would commit the same offsets again after every restart: it is
        left out, and said so once. Without ``found`` (Spark's ``commit()``) Kafka is asked
        which partitions exist only when it refuses a commit so, not on every micro-batch.
        """
        options = self._options
        if not options.commit_to_kafka or options.group_id is None:
            return
        wanted = offsets if found is None else self._existing(offsets, found)
        try:
            admin.commit_offsets(
                options.bootstrap_servers, options.group_id, wanted, kafka=options.kafka
            )
        except KafkaClientError as error:
            if error.kafka_code != _UNKNOWN_TOPIC_OR_PART:
                raise
            fewer = self._existing(wanted, existing_offsets(options, wanted))
            if fewer == wanted:
                raise
            admin.commit_offsets(
                options.bootstrap_servers, options.group_id, fewer, kafka=options.kafka
            )

    def _existing(
        self, offsets: dict[TopicPartition, int], found: Bounds
    ) -> dict[TopicPartition, int]:
        """``offsets`` of partitions in ``found`` whose log reaches them; the rest logged once.

        A log that ends below the offset is a re-created topic's (``stream_bases``): the
        stream's offset means nothing in it.
        """
        kept = {tp: at for tp, at in offsets.items() if tp in found and at <= found[tp][1]}
        dropped = sorted(set(offsets) - set(kept) - self._dropped)
        if dropped:
            self._dropped.update(dropped)
            _log.warning(
                "not committing partitions that are gone from Kafka or were re-created",
                group_id=self._options.group_id,
                partitions=[str(tp) for tp in dropped],
            )
        return kept


def _within(
    highs: Mapping[TopicPartition, int],
    target: Mapping[TopicPartition, int],
    first: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """``highs`` no further than ``target``; a partition ``target`` lacks stays where it is.

    A partition that appeared after the target was taken is left out, or, if the stream
    already has it, kept at its offset: dropping it from the end would make a later batch read
    it again from offset 0. One whose start is past the target (Spark takes the target before
    the initial offsets: ``latest`` moved meanwhile) ends where it starts, not below it, which
    read as a re-created topic. A high below the start still does.
    """
    return {
        tp: min(high, max(target[tp], first.get(tp, 0))) if tp in target else first[tp]
        for tp, high in highs.items()
        if tp in target or tp in first
    }


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
