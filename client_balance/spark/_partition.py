"""What the driver hands a Spark task: the schema of the rows and a node's share of the read.

Apart from ``_source`` so that the planning (``_plan``) and the task's read (``_read``) can
name them without importing the data source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition
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

from client_balance._secrets import MaskedConfig

__all__ = ["SCHEMA", "SCHEMA_WITHOUT_HEADERS", "NodePartition", "source_schema"]

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
"""Spark's Kafka source columns (with ``includeHeaders=true``), plus the node that read the row."""
SCHEMA_WITHOUT_HEADERS = StructType([field for field in SCHEMA if field.name != "headers"])
"""The schema with ``includeHeaders=false``."""


def source_schema(include_headers: bool) -> StructType:
    """The rows' schema, with or without the ``headers`` column."""
    return SCHEMA if include_headers else SCHEMA_WITHOUT_HEADERS


@dataclass(frozen=True)
class NodePartition(InputPartition):
    """One Spark task's share: everything it needs, since it runs in another process.

    A node's share is one task, or several with ``minPartitions`` (each with the node's id).
    """

    node_id: int
    ranges: tuple[tuple[str, int, int, int], ...]
    """(topic, partition, start, end) with end exclusive."""
    kafka: Mapping[str, str]
    """The reader's librdkafka configuration: a :class:`MaskedConfig`, so the partition's repr
    (Spark logs and shows it) never shows a secret, while its pickle carries the real values."""
    batch_max_messages: int
    include_headers: bool = True
    """Build the ``headers`` column (the schema has it)."""
    fail_on_data_loss: bool = True
    """Offsets gone before the task read them raise; else the task reads on, with a warning."""

    def __post_init__(self) -> None:
        if not isinstance(self.kafka, MaskedConfig):
            object.__setattr__(self, "kafka", MaskedConfig(self.kafka))
