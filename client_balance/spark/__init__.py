"""PySpark data source ``client_balance`` (extra ``client-balance[spark]``).

    from client_balance.spark import register
    register(spark)
    df = (spark.read.format("client_balance")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("topics", "orders,stock").option("group.id", "pipeline")
          .option("sourceCount", 4).load())

Each Spark task is one node of ``sourceCount`` (by default the session's default parallelism,
read by ``register``); the partitions go to nodes by ``strategy``, as they would to the SDK's
worker processes. A strategy registered with ``register_strategy`` before ``register(spark)``
goes along to Spark's Python workers; a ``module:attr`` reference or an entry point is found
there by name. The only module that imports pyspark.

``kafka_connector_jars()`` fetches Spark's own Kafka connector (``format("kafka")``) with Maven,
to compare this source with it (the equivalence tests and the Spark bench).
"""

from __future__ import annotations

from typing import Any

from client_balance.spark._connector import kafka_connector_jars
from client_balance.spark._options import SourceOptions, parse_options
from client_balance.spark._source import (
    SCHEMA,
    ClientBalanceDataSource,
    NodePartition,
    with_strategies,
)
from client_balance.strategies._registry import registered_strategies

__all__ = [
    "SCHEMA",
    "ClientBalanceDataSource",
    "NodePartition",
    "SourceOptions",
    "kafka_connector_jars",
    "parse_options",
    "register",
]


def register(spark: Any) -> None:
    """Make ``spark.read.format("client_balance")`` available in this session.

    The strategies registered in this process so far go along: register yours first. So does
    the session's default parallelism, read here on the driver: it is the number of nodes of a
    read without ``sourceCount``. On a cluster, register once the executors have joined.
    """
    # Spark Connect has no SparkContext (its sessions raise an AttributeError for it): the
    # planning process then falls back to its own CPU count.
    context = getattr(spark, "sparkContext", None)
    parallelism = None if context is None else int(context.defaultParallelism)
    spark.dataSource.register(
        with_strategies(registered_strategies(), default_parallelism=parallelism)
    )
