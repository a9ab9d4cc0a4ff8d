"""A stream whose topic is deleted, or deleted and re-created, in Spark ``local[2]``, real broker.

Each query runs to the end of what is there, stops, and is started again from its checkpoint
after the topic changed, as Spark's own Kafka source is tested for the same data loss.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from client_balance import ClientBalanceError
from client_balance.admin import create_topics, partition_offsets
from client_balance.keys import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def produce(bootstrap: str, topic: str, numbers: range, partitions: int) -> None:
    """Messages whose values are ``numbers``, round robin over ``partitions``."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for number in numbers:
        producer.produce(topic, str(number).encode(), partition=number % partitions)
    assert producer.flush(30) == 0


def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` and wait until the cluster's metadata no longer lists it."""
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 30
    while topic in client.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} still listed 30 s after its deletion"
        time.sleep(0.2)


def recreate_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` again once the broker has finished deleting the old one."""
    deadline = time.monotonic() + 60
    while True:
        try:
            create_topics(bootstrap, {topic: partitions})
            return
        except ClientBalanceError:  # the deletion is not complete on the broker yet
            assert time.monotonic() < deadline, f"{topic} could not be created again in 60 s"
            time.sleep(0.5)


def two_topics(bootstrap: str, prefix: str) -> tuple[str, str]:
    """Topics ``prefix`` a (values 0-9) and b (100-109), one partition each."""
    a, b = f"{prefix}a", f"{prefix}b"
    create_topics(bootstrap, {a: 1, b: 1})
    produce(bootstrap, a, range(10), partitions=1)
    produce(bootstrap, b, range(100, 110), partitions=1)
    return a, b


def run_stream(
    spark: Any, bootstrap: str, tmp_path: Path, **options: str
) -> Callable[..., list[int]]:
    """``run(failOnDataLoss, done=None)``: the stream to its end, then every value it wrote.

    ``done`` is waited for before the query stops: Spark asks for the latest offset, and so the
    source commits the last batch to the group, only on the trigger after that batch.
    """

    def run(fail_on_data_loss: str, done: Callable[[], bool] | None = None) -> list[int]:
        reader = spark.readStream.format("client_balance")
        options_now = {"kafka.bootstrap.servers": bootstrap, "startingOffsets": "earliest",
                       "failOnDataLoss": fail_on_data_loss, **options}  # fmt: skip
        for key, value in options_now.items():
            reader = reader.option(key, value)
        query = (
            reader.load().selectExpr("CAST(value AS STRING) AS value")
            .writeStream.format("parquet").option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="200 milliseconds").start()
        )  # fmt: skip
        try:
            query.processAllAvailable()
            deadline = time.monotonic() + 30
            while done is not None and not done():
                assert time.monotonic() < deadline, "not done within 30 s of the last batch"
                time.sleep(0.2)
        finally:
            query.stop()
        return sorted(int(row.value) for row in spark.read.parquet(str(tmp_path / "out")).collect())

    return run


@pytest.mark.timeout(300)
def test_a_pattern_stream_reports_a_deleted_topic_then_goes_on_without_it(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Topic b deleted: failOnDataLoss=true names b:0; false reads on and commits a:0 only."""
    prefix = f"gone-{uuid.uuid4().hex[:8]}-"
    a, b = two_topics(kafka_bootstrap, prefix)
    group = f"gone-{uuid.uuid4().hex[:8]}"
    run = run_stream(
        spark, kafka_bootstrap, tmp_path, subscribePattern=re.escape(prefix) + "[ab]",
        **{"group.id": group},
    )  # fmt: skip
    assert run("true") == [*range(10), *range(100, 110)]
    delete_topic(kafka_bootstrap, b)
    produce(kafka_bootstrap, a, range(10, 20), partitions=1)
    with pytest.raises(Exception, match=re.escape(f"{b}:0 at offset 10; messages")):
        run("true")

    def committed_to_the_end() -> bool:
        return partition_offsets(kafka_bootstrap, group, [a])[TopicPartition(a, 0)][2] == 20

    assert run("false", committed_to_the_end) == [*range(20), *range(100, 110)]


@pytest.mark.timeout(300)
def test_a_re_created_topic_fails_the_stream_unless_told_then_is_read_anew(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """High watermarks under the checkpoint: true names both offsets; false reads the new log."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, range(40), partitions=2)
    run = run_stream(
        spark, kafka_bootstrap, tmp_path, topics=topic, sourceCount="2", minPartitions="4"
    )
    assert run("true") == list(range(40))
    delete_topic(kafka_bootstrap, topic)
    recreate_topic(kafka_bootstrap, topic, partitions=2)
    produce(kafka_bootstrap, topic, range(100, 106), partitions=2)  # 3 each: under 20
    with pytest.raises(Exception, match=re.escape("ends at offset 3, below offset 20")) as raised:
        run("true")
    assert f"topic '{topic}', partition 0" in str(raised.value)
    assert run("false") == [*range(40), *range(100, 106)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("naming", ["topics", "assign"])
def test_a_named_topic_deleted_under_a_stream_is_data_loss_not_a_config_error(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, naming: str
) -> None:
    """topics/assign name b, b deleted: true names b:0 as gone; false reads on with a only."""
    prefix = f"named-{uuid.uuid4().hex[:8]}-"
    a, b = two_topics(kafka_bootstrap, prefix)
    given = (
        {"topics": f"{a},{b}"} if naming == "topics" else {"assign": f'{{"{a}": [0], "{b}": [0]}}'}
    )
    run = run_stream(spark, kafka_bootstrap, tmp_path, **given)
    assert run("true") == [*range(10), *range(100, 110)]
    delete_topic(kafka_bootstrap, b)
    produce(kafka_bootstrap, a, range(10, 20), partitions=1)
    with pytest.raises(Exception, match=re.escape(f"{b}:0 at offset 10; messages")):
        run("true")
    assert run("false") == [*range(20), *range(100, 110)]
