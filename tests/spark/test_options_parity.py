"""The options shared with Spark's Kafka source, in Spark ``local[2]`` against the real broker.

failOnDataLoss, assign, subscribePattern, the timestamp options, includeHeaders and
minPartitions, each on a small topic of its own in one session.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from client_balance import DataLossError
from client_balance.admin import commit_offsets, create_topics
from client_balance.keys import TopicPartition
from client_balance.spark import NodePartition
from client_balance.spark._read import read_node

pytestmark = [pytest.mark.spark, pytest.mark.integration]

DAY_MS = 86_400_000


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    partitions: int,
    stamp_ms: Callable[[int], int] | None = None,
) -> None:
    """``count`` messages round robin, value = number, with ``stamp_ms(number)`` if given."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for number in range(count):
        producer.produce(
            topic, str(number).encode(), partition=number % partitions,
            headers=[("n", str(number).encode())],
            timestamp=stamp_ms(number) if stamp_ms else 0,
        )  # fmt: skip
    assert producer.flush(30) == 0


def read(spark: Any, bootstrap: str, **options: object) -> Any:
    """A batch DataFrame of the source with ``options``."""
    reader = spark.read.format("client_balance").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def delete_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """Delete the records of ``topic``'s ``partition`` below ``offset`` (the low watermark)."""
    client = AdminClient({"bootstrap.servers": bootstrap})
    asked = KafkaTopicPartition(topic, partition, offset)
    for future in client.delete_records([asked]).values():
        future.result(30)


def offsets_of(rows: list[Any]) -> list[tuple[int, int]]:
    """(partition, offset) of each row, sorted."""
    return sorted((row.partition, row.offset) for row in rows)


def test_data_loss_fails_the_read_naming_partition_and_range(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """The group's start under the log start: the read fails naming t:0 and [10, 40)."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 200, partitions=2)
    group = f"loss-{uuid.uuid4().hex[:8]}"
    commit_offsets(kafka_bootstrap, group, {TopicPartition(topic, 0): 10})
    delete_before(kafka_bootstrap, topic, 0, 40)
    with pytest.raises(Exception, match=re.escape(f"offsets [10, 40) of {topic}:0 are gone")):
        read(spark, kafka_bootstrap, topics=topic, **{"group.id": group}).collect()
    rows = read(
        spark, kafka_bootstrap, topics=topic, failOnDataLoss="false", **{"group.id": group}
    ).collect()
    assert offsets_of(rows) == [(0, o) for o in range(40, 100)] + [(1, o) for o in range(100)]


def test_a_task_finds_records_deleted_after_planning(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """A range planned before delete_records: the task raises, or reads on with the flag off."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 100, partitions=1)
    planned = NodePartition(
        node_id=0, ranges=((topic, 0, 5, 80),), batch_max_messages=50,
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": "parity-task"},
    )  # fmt: skip
    delete_before(kafka_bootstrap, topic, 0, 30)
    with pytest.raises(DataLossError) as raised:
        list(read_node(planned))
    assert (raised.value.partition, raised.value.lost_from, raised.value.lost_to) == (
        f"{topic}:0", 5, 30,
    )  # fmt: skip
    lenient = replace(planned, fail_on_data_loss=False)
    offsets = [o for batch in read_node(lenient) for o in batch.column("offset").to_pylist()]
    assert offsets == list(range(30, 80))


@pytest.mark.timeout(300)
def test_a_micro_batch_start_the_log_lost_fails_the_stream_unless_told(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """A restart from a checkpoint whose offsets retention passed: fails, or reads on."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 50, partitions=1)

    def run(fail_on_data_loss: str) -> Any:
        frame = (
            spark.readStream.format("client_balance")
            .option("kafka.bootstrap.servers", kafka_bootstrap).option("topics", topic)
            .option("startingOffsets", "earliest").option("failOnDataLoss", fail_on_data_loss)
            .load()
        )  # fmt: skip
        return (
            frame.select("offset").writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint")).start()
        )  # fmt: skip

    query = run("true")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    produce(kafka_bootstrap, topic, 50, partitions=1)
    delete_before(kafka_bootstrap, topic, 0, 70)
    query = run("true")
    try:
        with pytest.raises(Exception, match=re.escape(f"offsets [50, 70) of {topic}:0")):
            query.processAllAvailable()
    finally:
        query.stop()
    query = run("false")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(row.offset for row in rows) == [*range(50), *range(70, 100)]


def test_a_partition_left_out_of_offset_json_is_read_from_earliest_to_latest(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Offset JSON naming partition 0 only: partition 1 is read whole, from earliest to latest."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 100, partitions=2)
    rows = read(
        spark, kafka_bootstrap, topics=topic, startingOffsets=f'{{"{topic}": {{"0": 3}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 5}}}}',
    ).collect()  # fmt: skip
    assert offsets_of(rows) == [(0, 3), (0, 4)] + [(1, o) for o in range(50)]


def test_aborted_transactions_are_not_read_as_read_committed_reads(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Read with isolation.level read_committed: records of an aborted transaction are left out."""
    topic = new_topic(partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": topic})
    producer.init_transactions(30)
    for numbers, commit in ((range(5), True), (range(5, 8), False), (range(8, 10), True)):
        producer.begin_transaction()
        for number in numbers:
            producer.produce(topic, str(number).encode(), partition=0)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    rows = read(spark, kafka_bootstrap, topics=topic, startingOffsets="earliest").collect()
    assert sorted(int(row.value) for row in rows) == [0, 1, 2, 3, 4, 8, 9]  # never 5, 6, 7


def test_assign_reads_exactly_the_named_partitions(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """assign={"t": [0, 2]} reads those two partitions whole; an unknown one is refused."""
    topic = new_topic(partitions=3)
    produce(kafka_bootstrap, topic, 300, partitions=3)
    rows = read(
        spark, kafka_bootstrap, assign=f'{{"{topic}": [2, 0]}}', startingOffsets="earliest"
    ).collect()
    assert offsets_of(rows) == [(p, o) for p in (0, 2) for o in range(100)]
    with pytest.raises(Exception, match=re.escape(f"does not have: {topic}:7")):
        read(
            spark, kafka_bootstrap, assign=f'{{"{topic}": [7]}}', startingOffsets="earliest"
        ).collect()


@pytest.mark.timeout(300)
def test_a_pattern_reads_matching_topics_and_a_stream_finds_new_ones(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """subscribePattern: whole names only, batch and stream; a topic made later joins the stream."""
    prefix = f"pattern-{uuid.uuid4().hex[:8]}-"
    create_topics(kafka_bootstrap, {f"{prefix}a": 2, f"{prefix}b": 1, f"x{prefix}a": 1})
    for topic in (f"{prefix}a", f"{prefix}b", f"x{prefix}a"):
        produce(kafka_bootstrap, topic, 20, partitions=1)
    pattern = re.escape(prefix) + "[a-z]"
    rows = read(
        spark, kafka_bootstrap, subscribePattern=pattern, startingOffsets="earliest"
    ).collect()
    assert sorted({row.topic for row in rows}) == [f"{prefix}a", f"{prefix}b"]
    assert len(rows) == 40
    frame = (
        spark.readStream.format("client_balance")
        .option("kafka.bootstrap.servers", kafka_bootstrap).option("subscribePattern", pattern)
        .option("startingOffsets", "earliest").load()
    )  # fmt: skip
    query = (
        frame.writeStream.format("memory").queryName("by_pattern")
        .option("checkpointLocation", str(tmp_path / "checkpoint")).start()
    )  # fmt: skip
    counts: dict[str, int] = {}
    try:
        query.processAllAvailable()
        create_topics(kafka_bootstrap, {f"{prefix}c": 1})
        produce(kafka_bootstrap, f"{prefix}c", 15, partitions=1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            query.processAllAvailable()
            found = spark.sql("SELECT topic, count(*) AS n FROM by_pattern GROUP BY topic")
            counts = {row.topic: row.n for row in found.collect()}
            if f"{prefix}c" in counts:
                break
    finally:
        query.stop()
    assert counts == {f"{prefix}a": 20, f"{prefix}b": 20, f"{prefix}c": 15}


def test_timestamps_choose_where_a_read_starts_and_ends(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Start and end by timestamp, one for all or per partition; none later means the end."""
    topic = new_topic(partitions=2)
    base = (int(time.time() * 1000) - DAY_MS) // 1000 * 1000
    # Message n is at base + n seconds, so partition p's offset o is message 2 * o + p.
    produce(kafka_bootstrap, topic, 200, partitions=2, stamp_ms=lambda n: base + n * 1000)
    common = {"topics": topic, "startingOffsets": "earliest"}
    rows = read(spark, kafka_bootstrap, startingTimestamp=base + 100_000, **common).collect()
    assert offsets_of(rows) == [(p, o) for p in (0, 1) for o in range(50, 100)]
    by_partition = f'{{"{topic}": {{"0": {base + 20_000}, "1": {base + 999_000}}}}}'
    ending = f'{{"{topic}": {{"0": {base + 60_000}}}}}'
    rows = read(
        spark, kafka_bootstrap, startingOffsetsByTimestamp=by_partition,
        endingOffsetsByTimestamp=ending, **common,
    ).collect()  # fmt: skip
    # Partition 0 from message 20 (offset 10) to before message 60 (offset 30); partition 1's
    # start is later than its last message: it starts at its end, and has no ending stamp.
    assert offsets_of(rows) == [(0, o) for o in range(10, 30)]
    rows = read(spark, kafka_bootstrap, endingTimestamp=base + 10_000, **common).collect()
    assert offsets_of(rows) == [(p, o) for p in (0, 1) for o in range(5)]
    assert {round(row.timestamp.timestamp() * 1000) for row in rows} == {
        base + n * 1000 for n in range(10)
    }


def test_include_headers_false_drops_the_column(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """includeHeaders=false: no headers column, every other column and row as before."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 100, partitions=2)
    frame = read(
        spark, kafka_bootstrap, topics=topic, startingOffsets="earliest", includeHeaders="false"
    )
    assert "headers" not in frame.columns
    assert frame.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                             "timestampType", "node_id"]  # fmt: skip
    rows = frame.collect()
    assert sorted(int(row.value) for row in rows) == list(range(100))
    with_headers = read(spark, kafka_bootstrap, topics=topic, startingOffsets="earliest")
    assert "headers" in with_headers.columns


def test_min_partitions_makes_more_tasks_than_nodes_reading_each_offset_once(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Two nodes, minPartitions=6: six Spark tasks, node ids 0 and 1, every offset once."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 400, partitions=2)
    frame = read(
        spark, kafka_bootstrap, topics=topic, startingOffsets="earliest", sourceCount=2,
        minPartitions=6,
    )  # fmt: skip
    assert frame.rdd.getNumPartitions() == 6
    rows = frame.collect()
    assert offsets_of(rows) == [(p, o) for p in (0, 1) for o in range(200)]
    assert sorted({row.node_id for row in rows}) == [0, 1]
