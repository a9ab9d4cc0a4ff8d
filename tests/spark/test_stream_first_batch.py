"""A streaming query's first micro-batch, failed and run again from the checkpoint, in Spark."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from tests.spark.test_source import produce_numbers

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.mark.timeout(300)
def test_a_query_that_failed_in_its_first_batch_restarts_without_loss(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """startingOffsets=latest, the sink fails batch 0, restart: every later message, once."""
    topic = new_topic(partitions=2)
    checkpoint = tmp_path / "checkpoint"
    produce_numbers(kafka_bootstrap, topic, range(100), partitions=2)  # before `latest`
    seen: list[int] = []

    def start(sink: Callable[[Any, int], None]) -> Any:
        frame = (
            spark.readStream.format("client_balance")
            .option("kafka.bootstrap.servers", kafka_bootstrap).option("topics", topic)
            .option("startingOffsets", "latest").option("sourceCount", 2).load()
        )  # fmt: skip
        return (
            frame.selectExpr("CAST(value AS STRING) AS value").writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(checkpoint)).start()
        )  # fmt: skip

    def failing(batch: Any, batch_id: int) -> None:
        raise RuntimeError(f"the sink is down in batch {batch_id}")

    def keeping(batch: Any, batch_id: int) -> None:
        seen.extend(int(row.value) for row in batch.collect())

    query = start(failing)
    with pytest.raises(StreamingQueryException, match="the sink is down in batch 0"):
        query.awaitTermination(120)
    assert not list((checkpoint / "commits").glob("[0-9]*"))  # batch 0 planned, never done
    time.sleep(0.5)
    produce_numbers(kafka_bootstrap, topic, range(100, 200), partitions=2)
    query = start(keeping)
    try:
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    assert sorted(seen) == list(range(100, 200))
