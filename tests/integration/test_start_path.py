"""The clients start() opens before the status topic is checked, and what they may not do."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance._kafka import admin_client, group_client, producer_client, read_committed
from client_balance.errors import KafkaClientError
from client_balance.keys import TopicPartition
from client_balance.membership import StatusWriter, ensure_status_topic
from client_balance.membership._keys import member_key
from client_balance.membership._log import open_status_topic
from tests.integration.workers import produce


def test_the_status_writer_never_creates_a_topic_by_asking_for_it(kafka_bootstrap: str) -> None:
    """The writer connects before the topic is ensured: its metadata request must not create it.

    librdkafka's producer creates a missing topic on a metadata request by default, with the
    broker's settings: a status topic neither compacted nor stamped with log-append time.
    """
    topic = f"status-never-made-{uuid.uuid4().hex[:8]}"
    producer = producer_client(kafka_bootstrap)
    producer.list_topics(topic, timeout=10)
    found = admin_client(kafka_bootstrap).list_topics(topic, timeout=10).topics.get(topic)
    assert found is None or not found.partitions


def test_a_status_topic_created_at_start_is_written_and_read_back(kafka_bootstrap: str) -> None:
    """Writer and reader made before the topic existed are made anew once it is created."""
    topic = f"status-fresh-{uuid.uuid4().hex[:8]}"
    group = f"group-{uuid.uuid4().hex[:8]}"
    writer, reader = open_status_topic(
        kafka_bootstrap, topic, group, kafka={}, timeout_s=10.0, secret=None,
        on_change=lambda: None, allow_single_replica=False, partitions=1,
    )  # fmt: skip
    try:
        ((offset, _),) = writer.write([(member_key(group, "me"), None)])
        assert reader.wait_applied(offset, timeout_s=10.0)
    finally:
        writer.close()
        reader.close()


def test_a_closed_status_writer_refuses_writes_and_closes_once(kafka_bootstrap: str) -> None:
    """close() ends the producer (not only flushes it); a later write is a KafkaClientError."""
    topic = f"status-closed-{uuid.uuid4().hex[:8]}"
    ensure_status_topic(kafka_bootstrap, topic, kafka={}, timeout_s=30.0)
    writer = StatusWriter(kafka_bootstrap, topic, 0, kafka={}, timeout_s=10.0)
    writer.write([(member_key("g", "me"), None)])
    writer.close()
    writer.close()
    with pytest.raises(KafkaClientError, match="the writer is closed") as refused:
        writer.write([(member_key("g", "me"), None)])
    assert refused.value.kafka_name == "STOPPED"


def test_committed_offsets_come_from_a_second_reader_when_the_consumer_cannot_answer(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """A consumer that finds no group coordinator in time gives way to a new one, on a real broker.

    Here the first consumer has no broker to reach at all; in a start it is one whose first
    coordinator lookup was lost with its bootstrap connection (docs/benchmarks.md).
    """
    group = f"group-{uuid.uuid4().hex[:8]}"
    topic = new_topic(partitions=2)
    committer = group_client(kafka_bootstrap, group)
    try:
        committer.commit(offsets=[KafkaTopicPartition(topic, 0, 42)], asynchronous=False)
    finally:
        committer.close()
    stranded = group_client("127.0.0.1:1", group, overrides={"log_level": 0})
    try:
        answer = read_committed(
            stranded, [TopicPartition(topic, 0), TopicPartition(topic, 1)], 10.0,
            second_reader=lambda: group_client(kafka_bootstrap, group),
        )  # fmt: skip
    finally:
        stranded.close()
    assert answer == {TopicPartition(topic, 0): 42, TopicPartition(topic, 1): None}


_START_IMPORTS = """
import json, sys
from client_balance import ClientBalanceConsumer, ClientBalanceSettings
bootstrap, topic, group = sys.argv[1:]
before = set(sys.modules)
settings = ClientBalanceSettings(
    bootstrap_servers=bootstrap, group_id=group, start_position="earliest"
)
with ClientBalanceConsumer(settings) as consumer:
    consumer.start([topic], source_count=1, node_id=0)
    result = consumer.get_message(timeout_s=30.0)
    imported = sorted(set(sys.modules) - before)
    consumer.confirm(result.confirm_context)
print(json.dumps(imported))
"""


def test_a_start_imports_no_module_on_the_way_to_its_first_message(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Every module a start needs is imported with the SDK: none costs the first message its load.

    In a fresh interpreter, as a worker starts. The first assignment used to import the UTF-16
    codec that orders members as Java does (``strategies._base``).
    """
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 10, 2)
    group = f"group-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [sys.executable, "-c", _START_IMPORTS, kafka_bootstrap, topic, group],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
