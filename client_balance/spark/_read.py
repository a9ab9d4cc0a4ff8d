"""A Spark task's read: its node's offset ranges from Kafka into Arrow record batches.

Runs on an executor, in Spark's Python worker, once per task. It is the data source's hot
path: everything here is paid per message, so no column is built by a Python loop. Each column
is one C call per message through ``map`` (a ``Message`` method) and one ``pa.array`` over the
list; topic, node, timestamps and headers are then made by Arrow itself (docs/spark.md,
Performance, has the profile this follows).
"""

from __future__ import annotations

import gc
from collections.abc import Generator
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema

from client_balance._kafka import read_ranges
from client_balance.keys import TopicPartition
from client_balance.spark._loss import report_loss
from client_balance.spark._partition import NodePartition, source_schema

__all__ = ["read_node"]

_IDLE_TIMEOUT_S = 60.0
# confluent-kafka's (timestamp type, milliseconds) tuples, read by Arrow in one call.
_STAMP = pa.struct([("type", pa.int32()), ("ms", pa.int64())])
# Arrow scalars, not Python ints: pyarrow.compute converts an int on every call, trying to
# import dateutil each time (30 µs a call where dateutil is missing).
_NO_TIMESTAMP = pa.scalar(0, pa.int32())
"""confluent_kafka.TIMESTAMP_NOT_AVAILABLE; CREATE_TIME is 1, LOG_APPEND_TIME 2."""
_ONE = pa.scalar(1, pa.int32())
_MICROS_PER_MS = pa.scalar(1000, pa.int64())
_NULL_MICROS = pa.scalar(None, pa.int64())
_ARROW_SCHEMAS = {
    headers: to_arrow_schema(source_schema(headers), timezone="UTC") for headers in (True, False)
}
"""The Arrow schema of a batch, by ``includeHeaders``: made once per Python worker."""


def read_node(partition: NodePartition) -> Generator[pa.RecordBatch, None, None]:
    """The rows of one node's ranges, as Arrow record batches of the source's schema.

    The cyclic garbage collector is paused while the task reads (and resumed, if it was running,
    when the read ends or is abandoned): every ``consume()`` allocates thousands of tracked
    ``Message`` objects, so the collector ran every few hundred of them and rescanned those
    still alive: 40% of a read's time, measured outside Spark. Nothing here makes a cycle.

    Offsets deleted since the read was planned raise ``DataLossError``, or with
    ``failOnDataLoss=false`` are skipped with a warning (``_loss``).
    """
    arrow_schema = _ARROW_SCHEMAS[partition.include_headers]
    wanted = {TopicPartition(t, p): (start, end) for t, p, start, end in partition.ranges}
    collecting = gc.isenabled()
    gc.disable()
    try:
        for messages in read_ranges(
            partition.kafka,
            wanted,
            batch_max_messages=partition.batch_max_messages,
            idle_timeout_s=_IDLE_TIMEOUT_S,
            on_data_loss=partial(report_loss, fail=partition.fail_on_data_loss),
        ):
            yield _to_arrow(messages, partition.node_id, arrow_schema)
    finally:
        if collecting:
            gc.enable()


def _to_arrow(messages: list[Any], node_id: int, schema: pa.Schema) -> pa.RecordBatch:
    """``messages`` (confluent-kafka ``Message``s, none of them an error) as one batch."""
    if not messages:
        return pa.RecordBatch.from_pylist([], schema=schema)
    kind = type(messages[0])  # the C type: its methods, called through map, skip a frame each
    count = len(messages)
    topics = list(map(kind.topic, messages))
    stamps = pa.array(list(map(kind.timestamp, messages)), _STAMP)
    stamp_types = stamps.field("type")
    micros = pc.multiply(stamps.field("ms"), _MICROS_PER_MS)
    missing = pc.equal(stamp_types, _NO_TIMESTAMP)
    if pc.any(missing).as_py():
        micros = pc.if_else(missing, _NULL_MICROS, micros)
    arrays = [
        pa.array(list(map(kind.key, messages)), pa.binary()),
        pa.array(list(map(kind.value, messages)), pa.binary()),
        # One topic per batch is the rule: a repeat instead of a string per row.
        pa.repeat(pa.scalar(topics[0], pa.string()), count)
        if topics.count(topics[0]) == count
        else pa.array(topics, pa.string()),
        pa.array(list(map(kind.partition, messages)), pa.int32()),
        pa.array(list(map(kind.offset, messages)), pa.int64()),
        micros.cast(schema.field("timestamp").type),
        # Kafka's types are confluent's minus one: 0 create time, 1 log-append, -1 none.
        pc.subtract(stamp_types, _ONE),
    ]
    if schema.names[len(arrays)] == "headers":  # includeHeaders=false: not even a map call
        arrays.append(_headers(list(map(kind.headers, messages)), schema.field("headers").type))
    arrays.append(pa.repeat(pa.scalar(node_id, pa.int32()), count))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _headers(headers: list[Any], kind: pa.ListType) -> pa.Array:
    """Each message's headers as a list, null when it has none (as Spark's Kafka source has it)."""
    if headers.count(None) == len(headers):  # the common case: an all-null column, no loop
        return pa.nulls(len(headers), kind)
    # An empty list is null too, as there: Spark's source makes a list only of headers it has.
    # Arrow reads the (key, value) tuples as structs.
    return pa.array([entries or None for entries in headers], kind)
