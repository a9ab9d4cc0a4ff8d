"""The ``client_balance`` data source in Spark ``local[2]`` against the real broker."""

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
from confluent_kafka.cimpl import NewPartitions  # admin re-exports it without __all__

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, ConfigError
from client_balance.admin import partition_offsets
from client_balance.keys import TopicPartition
from client_balance.spark import parse_options, register
from client_balance.strategies import (
    Member,
    get_strategy,
    register_strategy,
    unregister_strategy,
)
from client_balance.strategies._nodes import node_share

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    """``count`` messages round robin, value = number, every tenth with a header."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for number in range(count):
        headers: list[tuple[str, str | bytes | None]] | None = (
            [("type", b"paid")] if number % 10 == 0 else None
        )
        producer.produce(
            topic, str(number).encode(), key=f"k{number}".encode(),
            partition=number % partitions, headers=headers,
        )  # fmt: skip
    assert producer.flush(30) == 0


def read(spark: Any, bootstrap: str, topic: str, **options: object) -> Any:
    """A batch DataFrame of the source."""
    reader = spark.read.format("client_balance")
    reader = reader.option("kafka.bootstrap.servers", bootstrap).option("topics", topic)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def test_batch_read_returns_every_message_once_with_kafka_columns(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Every message once, Spark Kafka columns plus node_id, partitions placed by the strategy."""
    topic = new_topic(partitions=5)
    produce(kafka_bootstrap, topic, 2_000, partitions=5)
    frame = read(spark, kafka_bootstrap, topic, startingOffsets="earliest", sourceCount=3)
    rows = frame.collect()
    assert len(rows) == 2_000
    assert {int(row.value) for row in rows} == set(range(2_000))
    assert len({(row.partition, row.offset) for row in rows}) == 2_000
    first = min(rows, key=lambda row: int(row.value))
    assert (first.key, first.topic, first.partition, first.offset) == (b"k0", topic, 0, 0)
    assert first.timestampType == 0  # CreateTime, as Spark's Kafka source numbers it
    assert first.timestamp is not None
    assert [(h.key, h.value) for h in first.headers] == [("type", b"paid")]
    for row in rows:
        share = node_share(get_strategy("modulo"), {topic: 5}, 3, row.node_id)
        assert TopicPartition(topic, row.partition) in share


def test_committed_start_reads_exactly_what_the_workers_left(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """After a worker confirmed part of the topic, startingOffsets=committed reads the rest."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 1_000, partitions=2)
    group = f"spark-{uuid.uuid4().hex[:8]}"
    settings = ClientBalanceSettings(
        bootstrap_servers=kafka_bootstrap, group_id=group, start_position="earliest",
        batch_max_messages=100, commit="sync",
    )  # fmt: skip
    seen: set[int] = set()
    with ClientBalanceConsumer(settings) as consumer:
        consumer.start([topic], source_count=1, node_id=0)
        while len(seen) < 300:
            batch = consumer.get_message(timeout_s=10)
            seen.update(int(m.value() or b"") for m in batch.messages)
            consumer.confirm(batch.confirm_context)
    rest = {
        int(row.value)
        for row in read(spark, kafka_bootstrap, topic, **{"group.id": group}).collect()
    }
    assert rest == set(range(1_000)) - seen
    assert not rest & seen


def test_ending_offsets_bound_the_read(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Per-partition JSON start and end offsets read exactly [start, end)."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 200, partitions=2)
    frame = read(
        spark, kafka_bootstrap, topic,
        startingOffsets=f'{{"{topic}": {{"0": 10, "1": -2}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 20, "1": 5}}}}',
    )  # fmt: skip
    got = sorted((row.partition, row.offset) for row in frame.collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "kafka.bootstrap.servers is required"),
        ({"kafka.bootstrap.servers": "h:1"}, "topics is required"),
        ({"kafka.bootstrap.servers": "h:1", "topics": "t"}, "group.id is required"),
        ({"kafka.bootstrap.servers": "h:1", "topics": "t", "startingOffsets": "soon"},
         "startingOffsets='soon' is not allowed"),
        ({"kafka.bootstrap.servers": "h:1", "topics": "t", "startingOffsets": "earliest",
          "sourceCount": "0"}, "sourceCount='0' is not allowed"),
        ({"kafka.bootstrap.servers": "h:1", "topics": "t", "startingOffsets": "earliest",
          "strategy": "fastest"}, "fastest"),
        ({"kafka.bootstrap.servers": "h:1", "topics": "t", "startingOffsets": "earliest",
          "strategy": "no_such_pkg:rule"}, "module 'no_such_pkg' cannot be imported"),
        ({"kafka.bootstrap.servers": "h:1", "topics": "t", "startingOffsets": "earliest",
          "kafka.group.id": "g"}, "kafka.group.id is not allowed"),
        ({"kafka.bootstrap.servers": "h:1", "topics": "t", "endingOffsets": "earliest",
          "startingOffsets": "earliest"}, "endingOffsets='earliest' is not allowed"),
    ],
)  # fmt: skip
def test_bad_options_name_the_option(options: dict[str, str], message: str) -> None:
    """Missing or contradictory options raise ConfigError naming the option."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_options(options)


def test_bad_options_surface_through_spark(spark: Any, kafka_bootstrap: str) -> None:
    """Through Spark the same message reaches the user when the read is planned."""
    # Spark wraps the ConfigError in an error of its own; the message survives.
    with pytest.raises(Exception, match=r"group\.id is required"):
        read(spark, kafka_bootstrap, "orders").collect()


def test_a_rule_named_by_reference_places_the_partitions(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """With strategy=module:attr, Spark's workers import the rule; each node reads its share."""
    topic = new_topic(partitions=4)
    produce(kafka_bootstrap, topic, 400, partitions=4)
    options = {"startingOffsets": "earliest", "sourceCount": 2}
    rule = "tests.custom_rules:reversed_range"
    rows = read(spark, kafka_bootstrap, topic, strategy=rule, **options).collect()
    assert len(rows) == 400
    # reversed_range: the last node takes the first run of partitions, unlike every built-in.
    assert {(row.node_id, row.partition) for row in rows} == {(1, 0), (1, 1), (0, 2), (0, 3)}


def test_a_rule_registered_before_register_goes_to_the_workers(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """A rule registered in the driver, even one no worker could import, is carried along."""
    first, second = sorted([new_topic(partitions=2), new_topic(partitions=2)])
    for topic in (first, second):
        produce(kafka_bootstrap, topic, 100, partitions=2)

    def last_node_first(
        partitions: dict[str, int], members: list[Member]
    ) -> dict[str, list[TopicPartition]]:
        # Defined here, so Spark can only have it by value: whole topics, last node first.
        owners = members[::-1]
        return {
            member.id: [TopicPartition(topic, n) for index, topic in enumerate(sorted(partitions))
                        if index % len(owners) == position for n in range(partitions[topic])]
            for position, member in enumerate(owners)
        }  # fmt: skip

    register_strategy("last-node-first", last_node_first)
    try:
        register(spark)
        rows = read(
            spark, kafka_bootstrap, f"{first},{second}", strategy="last-node-first",
            startingOffsets="earliest", sourceCount=2,
        ).collect()  # fmt: skip
    finally:
        unregister_strategy("last-node-first")
        register(spark)
    assert len(rows) == 200
    assert {(row.node_id, row.topic) for row in rows} == {(1, first), (0, second)}


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``condition`` every 0.2 s, or fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s} s: {what}")
        time.sleep(0.2)


@pytest.mark.timeout(300)
def test_stream_delivers_every_message_once_across_restarts_and_commits(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """A growing topic, a partition added, a restart: each message once, offsets committed."""
    topic = new_topic(partitions=2)
    group = f"stream-{uuid.uuid4().hex[:8]}"
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"

    def run(more: Callable[[], None]) -> None:
        frame = (
            spark.readStream.format("client_balance")
            .option("kafka.bootstrap.servers", kafka_bootstrap).option("topics", topic)
            .option("group.id", group).option("startingOffsets", "earliest")
            .option("sourceCount", 2).load()
        )  # fmt: skip
        query = (
            frame.selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
            .writeStream.format("parquet").option("path", str(output))
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="500 milliseconds").start()
        )  # fmt: skip
        try:
            query.processAllAvailable()
            more()
            query.processAllAvailable()
            found = partition_offsets(kafka_bootstrap, group, [topic])
            highs = {tp: high for tp, (_, high, _) in found.items()}

            def committed_at_end() -> bool:
                answer = partition_offsets(kafka_bootstrap, group, [topic])
                return all(answer[tp][2] == high for tp, high in highs.items())

            wait_for(committed_at_end, 30, "the group's offsets committed up to the end")
        finally:
            query.stop()

    produce_numbers(kafka_bootstrap, topic, range(300), partitions=2)
    run(lambda: produce_numbers(kafka_bootstrap, topic, range(300, 500), partitions=2))

    def grow() -> None:
        client = AdminClient({"bootstrap.servers": kafka_bootstrap})  # kept until it answers
        client.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
        produce_numbers(kafka_bootstrap, topic, range(500, 800), partitions=3)

    run(grow)
    values = [int(row.value) for row in spark.read.parquet(str(output)).collect()]
    assert sorted(values) == list(range(800))


def produce_numbers(bootstrap: str, topic: str, numbers: range, partitions: int) -> None:
    """Messages whose values are ``numbers``, round robin over ``partitions``."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for number in numbers:
        producer.produce(topic, str(number).encode(), partition=number % partitions)
    assert producer.flush(30) == 0


@pytest.mark.timeout(300)
def test_max_offsets_per_trigger_bounds_each_micro_batch(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """maxOffsetsPerTrigger=100 over 1,000 messages: every batch at most 100 rows, all read."""
    topic = new_topic(partitions=3)
    produce(kafka_bootstrap, topic, 1_000, partitions=3)
    frame = (
        spark.readStream.format("client_balance")
        .option("kafka.bootstrap.servers", kafka_bootstrap).option("topics", topic)
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 100).load()
    )  # fmt: skip
    query = (
        frame.writeStream.format("memory").queryName("bounded")
        .option("checkpointLocation", str(tmp_path / "checkpoint")).start()
    )  # fmt: skip
    try:
        query.processAllAvailable()
        rows = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert sum(rows) == 1_000
    assert max(rows) <= 100
    distinct = spark.sql("SELECT count(DISTINCT partition, offset) AS n FROM bounded").first()
    assert distinct.n == 1_000


@pytest.mark.timeout(300)
def test_available_now_keeps_max_offsets_per_trigger_and_commits_the_end(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """availableNow, maxOffsetsPerTrigger=20, 100 messages: five batches of 20, each once."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 100, partitions=2)
    group, name = f"an-{uuid.uuid4().hex[:8]}", f"an_{uuid.uuid4().hex[:8]}"
    frame = (
        spark.readStream.format("client_balance")
        .option("kafka.bootstrap.servers", kafka_bootstrap).option("topics", topic)
        .option("group.id", group).option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 20).load()
    )  # fmt: skip
    query = (
        frame.writeStream.format("memory").queryName(name)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    try:
        assert query.awaitTermination(180)
        assert query.exception() is None
        rows = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert rows == [20] * 5  # Spark used to ask for everything once: one batch of 100
    offsets = spark.table(name).select("partition", "offset").distinct().count()
    assert offsets == 100
    found = partition_offsets(kafka_bootstrap, group, [topic])
    assert [committed for _, _, committed in found.values()] == [50, 50]  # asked after the last


def test_a_read_refuses_partitions_live_workers_hold_unless_told(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """A read of a group whose live worker holds a partition names it; readHeldPartitions reads."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 20, partitions=2)
    group = f"spark-owned-{uuid.uuid4().hex[:8]}"
    settings = ClientBalanceSettings(
        bootstrap_servers=kafka_bootstrap, group_id=group, reconcile_interval_s=1.0
    )
    options = {"group.id": group, "startingOffsets": "earliest"}
    with ClientBalanceConsumer(settings) as worker:
        worker.start([topic], -1, 0, pinned=[f"{topic}:0"])
        deadline = time.monotonic() + 30
        while not worker.registered_partitions() and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(Exception, match=re.escape(worker.consumer_id)):
            read(spark, kafka_bootstrap, topic, **options).collect()
        rows = read(spark, kafka_bootstrap, topic, readHeldPartitions="true", **options).collect()
        assert len(rows) == 20
        found = partition_offsets(kafka_bootstrap, group, [topic])
    assert found[TopicPartition(topic, 1)][2] is None  # the read committed nothing
