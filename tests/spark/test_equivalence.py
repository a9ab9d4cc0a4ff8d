"""The ``client_balance`` source returns the rows of Spark's own Kafka source, row by row.

Spark's source is ``format("kafka")`` of ``spark-sql-kafka-0-10_2.13`` 4.2.0 with
``includeHeaders=true``, fetched by ``client_balance.spark.kafka_connector_jars`` (Maven
Central only, once into the cache; if Maven cannot fetch it the tests fail saying why). Both
sources read the same topics and offsets in the same session; the columns key, value, topic,
partition, offset, timestamp, timestampType and headers are compared row by row, sorted by
(topic, partition, offset), on ``local[2]`` and on the standalone cluster of
``tests/spark/standalone.py`` (where the connector reaches the executors by ``ADD JAR``).

Nothing is normalised: a message without headers has ``headers`` null in both (ours gave an
empty array until this test found it;
``test_a_message_without_headers_has_null_headers_in_both_sources`` pins it).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from confluent_kafka import Producer

from client_balance import ClientBalanceError
from client_balance.spark import kafka_connector_jars, register
from tests.spark.standalone import ClusterError, session_on

pytestmark = [pytest.mark.spark, pytest.mark.integration]

CONNECTOR = "4.2.0"
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")
Headers = list[tuple[str, bytes | None]]
Row = tuple[bytes | None, bytes | None, str, int, int, datetime, int, Headers | None]
Produced = list[tuple[str, str | bytes | None]] | None
"""Headers as confluent-kafka's producer takes them."""

KEYS: list[bytes | None] = [None, b"", b"key", b"\x00\xfe\xff"]
VALUES: list[bytes | None] = [None, b"", b"value", bytes(range(256)), "ünïcode".encode()]
HEADERS: list[Produced] = [
    None,
    [],  # an empty list: no headers on the wire either
    [("h", b"v")],
    # Several: a repeated key (order kept), a null value, a non-ASCII key, binary bytes.
    [("a", b"1"), ("nothing", None), ("a", b"2"), ("ключ", b"\x00\xff"), ("e", b"")],
]
CREATE_TIME_MS = 1_600_000_000_000
"""Explicit CreateTime timestamps start here (2020); librdkafka reads 0 as "now"."""
KEEP = {"retention.ms": "-1"}
"""Topic config: records stamped in 2020 are past the default 7-day retention, and the broker's
retention check (30 s after it starts, then every 5 minutes) would delete them mid-test."""


@pytest.fixture(scope="module")
def connector_jars() -> list[str]:
    """Spark's Kafka connector 4.2.0 and its dependencies, fetched once; fails if it cannot."""
    try:
        return kafka_connector_jars(CONNECTOR)
    except ClientBalanceError as error:
        pytest.fail(f"Spark's Kafka connector {CONNECTOR} is needed: {error}", pytrace=False)


def _local_session(jars: list[str]) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    jvm_running = SparkContext._gateway is not None  # an earlier module's session started it
    session = (
        SparkSession.builder.master("local[2]").appName("client-balance-equivalence")
        .config("spark.jars", ",".join(jars)).config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2").getOrCreate()
    )  # fmt: skip
    if jvm_running:
        # spark.jars joins the driver's classpath only when it launches the JVM.
        _add_jars(session, jars)
    register(session)
    return session


def _add_jars(session: Any, jars: list[str]) -> None:
    """``ADD JAR``: the driver's class loader, and every executor from its next task on."""
    for jar in jars:
        session.sql(f"ADD JAR '{jar}'")


@pytest.fixture(scope="module", params=["local[2]", "standalone"])
def spark(request: pytest.FixtureRequest, connector_jars: list[str]) -> Iterator[Any]:
    """One session at a time, with Spark's Kafka source and ours: local[2], then the cluster."""
    if request.param == "standalone":
        cluster = request.getfixturevalue("standalone_cluster")
        try:
            session = session_on(cluster, "client-balance-equivalence")
        except ClusterError as error:
            pytest.fail(str(error), pytrace=False)
        _add_jars(session, connector_jars)  # session_on builds its session without spark.jars
    else:
        session = _local_session(connector_jars)
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def created_at(number: int) -> int:
    """The CreateTime of message ``number``: 1 ms after the epoch, then back and forth in 2020."""
    return CREATE_TIME_MS + (number * 7_919) % 100_000 if number else 1


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    """Round robin; keys, values and headers cycle through every kind, explicit timestamps."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for number in range(partitions * per_partition):
        producer.produce(
            topic, VALUES[number % len(VALUES)], key=KEYS[number // 3 % len(KEYS)],
            partition=number % partitions, headers=HEADERS[number % len(HEADERS)],
            timestamp=created_at(number),
        )  # fmt: skip
    assert producer.flush(30) == 0


def sparks(spark: Any, bootstrap: str, topics: str, start: str, end: str) -> list[Row]:
    """Spark's own Kafka source, headers included."""
    frame = (
        spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topics).option("includeHeaders", "true")
        .option("startingOffsets", start).option("endingOffsets", end).load()
    )  # fmt: skip
    return collected(frame)


def ours(spark: Any, bootstrap: str, topics: str, start: str, end: str) -> list[Row]:
    """The client_balance source, without a group."""
    frame = (
        spark.read.format("client_balance").option("kafka.bootstrap.servers", bootstrap)
        .option("topics", topics).option("startingOffsets", start)
        .option("endingOffsets", end).load()
    )  # fmt: skip
    return collected(frame)


def collected(frame: Any) -> list[Row]:
    """The compared columns as tuples, sorted by (topic, partition, offset)."""
    rows: list[Row] = []
    for row in frame.select(*COLUMNS).collect():
        headers = None if row.headers is None else [(h.key, h.value) for h in row.headers]
        rows.append((
            row.key, row.value, row.topic, row.partition, row.offset, row.timestamp,
            row.timestampType, headers,
        ))  # fmt: skip
    return sorted(rows, key=lambda row: (row[2], row[3], row[4]))


def assert_same_rows(got: list[Row], expected: list[Row]) -> None:
    """Row by row, saying which (topic, partition, offset) differ."""
    mine = {row[2:5]: row for row in got}
    theirs = {row[2:5]: row for row in expected}
    missing = sorted(theirs.keys() - mine.keys())
    extra = sorted(mine.keys() - theirs.keys())
    changed = [(mine[at], theirs[at]) for at in sorted(mine.keys() & theirs.keys())
               if mine[at] != theirs[at]]  # fmt: skip
    assert (missing, extra, changed[:5]) == ([], [], []), (
        f"ours lacks {missing[:10]}, has extra {extra[:10]}, {len(changed)} rows differ "
        f"(ours, Spark's): {changed[:5]}"
    )
    assert len(got) == len(expected) == len(mine)


def assert_covers_every_kind(rows: list[Row]) -> None:
    """The rows hold each kind of key, value and header list the comparison is about."""
    keys, values = {row[0] for row in rows}, {row[1] for row in rows}
    assert {None, b""} <= keys
    assert {None, b""} <= values
    headers = [row[7] or [] for row in rows]
    assert {0, 1} <= {len(h) for h in headers}
    assert max(len(h) for h in headers) >= 3
    assert any(value is None for h in headers for _, value in h)
    assert any(len({key for key, _ in h}) < len(h) for h in headers)


def millis(stamp: datetime) -> int:
    """Milliseconds since the epoch of a timestamp collected from Spark (local, naive)."""
    return round(stamp.timestamp() * 1000)


def test_the_columns_have_the_types_of_sparks_kafka_source(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Both schemas have the same names, types and nullability; ours adds node_id."""
    topic = new_topic(partitions=1)
    theirs = (
        spark.read.format("kafka").option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic).option("includeHeaders", "true").load()
    )  # fmt: skip
    mine = (
        spark.read.format("client_balance").option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topics", topic).option("startingOffsets", "earliest").load()
    )  # fmt: skip
    assert mine.schema.fields == [*theirs.schema.fields, mine.schema["node_id"]]


def test_earliest_to_latest_returns_sparks_rows(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Three partitions, every kind of key, value and headers, CreateTime: the same rows."""
    topic = new_topic(partitions=3, config=KEEP)
    produce(kafka_bootstrap, topic, partitions=3, per_partition=30)
    expected = sparks(spark, kafka_bootstrap, topic, "earliest", "latest")
    assert len(expected) == 90
    assert_covers_every_kind(expected)
    assert {row[6] for row in expected} == {0}  # CreateTime
    stamps = sorted(millis(row[5]) for row in expected)
    assert stamps == sorted(map(created_at, range(90)))  # the explicit timestamps, not the broker's
    assert_same_rows(ours(spark, kafka_bootstrap, topic, "earliest", "latest"), expected)


def test_a_log_append_time_topic_returns_sparks_rows(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """message.timestamp.type=LogAppendTime: timestampType 1 and the broker's time, the same."""
    topic = new_topic(partitions=2, config={"message.timestamp.type": "LogAppendTime"})
    produce(kafka_bootstrap, topic, partitions=2, per_partition=20)
    expected = sparks(spark, kafka_bootstrap, topic, "earliest", "latest")
    assert len(expected) == 40
    assert_covers_every_kind(expected)
    assert {row[6] for row in expected} == {1}  # LogAppendTime
    assert min(millis(row[5]) for row in expected) > CREATE_TIME_MS + 100_000  # the broker's
    got = ours(spark, kafka_bootstrap, topic, "earliest", "latest")
    assert_same_rows(got, expected)


def test_per_partition_offsets_json_returns_sparks_rows(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """The same JSON start and end per partition of two topics (-2, -1, empty): the same rows."""
    created = new_topic(partitions=3, config=KEEP)
    appended = new_topic(partitions=2, config={"message.timestamp.type": "LogAppendTime"})
    produce(kafka_bootstrap, created, partitions=3, per_partition=24)
    produce(kafka_bootstrap, appended, partitions=2, per_partition=10)
    start = json.dumps({created: {"0": 5, "1": -2, "2": 24}, appended: {"0": 3, "1": -2}})
    end = json.dumps({created: {"0": 17, "1": 9, "2": -1}, appended: {"0": -1, "1": 4}})
    expected = sparks(spark, kafka_bootstrap, f"{created},{appended}", start, end)
    ranges = {(created, 0): range(5, 17), (created, 1): range(9), (appended, 0): range(3, 10),
              (appended, 1): range(4)}  # fmt: skip
    assert [row[2:5] for row in expected] == sorted(
        (topic, partition, offset) for (topic, partition), span in ranges.items() for offset in span
    )
    assert_covers_every_kind(expected)
    got = ours(spark, kafka_bootstrap, f"{created},{appended}", start, end)
    assert_same_rows(got, expected)


def test_a_message_without_headers_has_null_headers_in_both_sources(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """No headers (produced as None or []) are null in both sources, not an empty array."""
    topic = new_topic(partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    cases: list[Produced] = [None, [], [("h", b"v")]]
    for headers in cases:
        producer.produce(topic, b"v", headers=headers)
    assert producer.flush(30) == 0
    expected = sparks(spark, kafka_bootstrap, topic, "earliest", "latest")
    got = ours(spark, kafka_bootstrap, topic, "earliest", "latest")
    assert [row[7] for row in expected] == [None, None, [("h", b"v")]]
    assert got == expected
