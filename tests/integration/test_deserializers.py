"""Deserializers against the real broker: decoded batches, raw bytes, poison values."""

from __future__ import annotations

import gzip
import io
import json
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import fastavro
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance import (
    ClientBalanceConsumer,
    DecodedMessage,
    DeserializationError,
    NoMessageError,
    RedeliveryLimitError,
)
from client_balance import admin as cluster
from tests.integration.test_consumer import committed_offset
from tests.integration.workers import REPO, wait_until

pytestmark = pytest.mark.integration

ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
POISON = b"{not json"


def produce(bootstrap: str, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
    """Write (key, value) records to partition 0 of ``topic``, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value in records:
        producer.produce(topic, value, key, partition=0)
    assert producer.flush(30) == 0


def take(consumer: ClientBalanceConsumer, count: int) -> list[DecodedMessage]:
    """``count`` messages from confirmed batches (each batch confirmed as it comes)."""
    taken: list[DecodedMessage] = []
    while len(taken) < count:
        batch = consumer.get_message(timeout_s=30)
        taken.extend(batch.messages)  # type: ignore[arg-type]  # decoding is configured
        consumer.confirm(batch.confirm_context)
    return taken


def json_records(values: Sequence[object]) -> list[tuple[bytes | None, bytes]]:
    """Keys ``k0, k1 ...`` with each value as JSON (bytes given are written as they are)."""
    return [
        (f"k{i}".encode(), v if isinstance(v, bytes) else json.dumps(v).encode())
        for i, v in enumerate(values)
    ]


def test_json_values_and_str_keys_are_decoded_and_raw_bytes_stay_reachable(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """batches() hands out DecodedMessages: json values, str keys, the raw bytes beneath."""
    topic = new_topic()
    produce(kafka_bootstrap, topic, json_records([{"n": i} for i in range(12)]))
    consumer = make_consumer(value_deserializer="json", key_deserializer="str")
    consumer.start([topic], source_count=1, node_id=0)
    seen: list[DecodedMessage] = []
    for batch in consumer.batches(timeout_s=1.0):
        seen.extend(batch.messages)  # type: ignore[arg-type]  # decoding is configured
        batch.confirm()
        if len(seen) >= 12:
            break
    assert [m.value() for m in seen] == [{"n": i} for i in range(12)]
    assert [m.key() for m in seen] == [f"k{i}" for i in range(12)]
    assert all(isinstance(m, DecodedMessage) for m in seen)
    assert seen[3].raw_value() == b'{"n": 3}'
    assert seen[3].raw_key() == b"k3"
    assert seen[3].message.value() == b'{"n": 3}'
    assert [m.offset() for m in seen] == list(range(12))
    assert seen[0].topic() == topic


def test_avro_values_with_a_schema_are_decoded(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """Schemaless Avro written by fastavro comes out as dicts, read with value_avro_schema."""
    topic = new_topic()
    parsed = fastavro.parse_schema(ORDER)
    records = []
    for i in range(5):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, {"id": i, "item": f"item-{i}"})
        records.append((None, out.getvalue()))
    produce(kafka_bootstrap, topic, records)
    consumer = make_consumer(value_deserializer="avro", value_avro_schema=json.dumps(ORDER))
    consumer.start([topic], source_count=1, node_id=0)
    taken = take(consumer, 5)
    assert [m.value() for m in taken] == [{"id": i, "item": f"item-{i}"} for i in range(5)]
    assert [m.key() for m in taken] == [None] * 5


def test_a_callable_given_to_start_wins_over_the_settings(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """start(value_deserializer=callable) decodes with the callable, not the settings' json."""
    topic = new_topic()
    produce(kafka_bootstrap, topic, [(None, b"3,4"), (None, b"5")])
    consumer = make_consumer(value_deserializer="json")
    consumer.start(
        [topic], source_count=1, node_id=0,
        value_deserializer=lambda data: [int(part) for part in (data or b"").split(b",")],
    )  # fmt: skip
    assert [m.value() for m in take(consumer, 2)] == [[3, 4], [5]]


def test_a_poison_value_under_raise_gives_deserialization_then_the_limit_error(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """Each failed decode is a counted rollback: DeserializationError, then RedeliveryLimitError.

    Nothing of the batch is confirmed: the group's offset stays before it.
    """
    topic = new_topic()
    produce(kafka_bootstrap, topic, json_records([1, 2, POISON, 4]))
    consumer = make_consumer(value_deserializer="json", batch_max_messages=1, max_redeliveries=1)
    consumer.start([topic], source_count=1, node_id=0)
    assert [m.value() for m in take(consumer, 2)] == [1, 2]
    with pytest.raises(DeserializationError) as first:
        consumer.get_message(timeout_s=30)
    error = first.value
    assert (error.topic, error.partition, error.offset, error.field) == (topic, 0, 2, "value")
    assert "not json" not in str(error)
    for _ in range(2):  # over the limit: raised at every delivery, the batch rolled back each time
        with pytest.raises(RedeliveryLimitError) as limit:
            consumer.get_message(timeout_s=30)
        assert (limit.value.offset, limit.value.key) == (2, f"1:{topic}:0")
        assert isinstance(limit.value.__cause__, DeserializationError)
    assert committed_offset(kafka_bootstrap, consumer.settings.group_id, topic) == 2


def test_a_poison_value_under_skip_is_skipped_once_over_the_limit(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """With max_redeliveries=1: one DeserializationError, then the batch is skipped, committed."""
    topic = new_topic()
    produce(kafka_bootstrap, topic, json_records([1, POISON, 3, 4]))
    consumer = make_consumer(
        value_deserializer="json", batch_max_messages=1, max_redeliveries=1,
        redelivery_policy="skip",
    )  # fmt: skip
    consumer.start([topic], source_count=1, node_id=0)
    assert [m.value() for m in take(consumer, 1)] == [1]
    with pytest.raises(DeserializationError):
        consumer.get_message(timeout_s=30)
    assert [m.value() for m in take(consumer, 2)] == [3, 4]
    assert committed_offset(kafka_bootstrap, consumer.settings.group_id, topic) == 4
    with pytest.raises(NoMessageError):
        consumer.get_message(timeout_s=0.5)


def gunzip_json(data: bytes | None) -> Any:
    """A callable deserializer whose poison raises an OSError (gzip.BadGzipFile)."""
    return None if data is None else json.loads(gzip.decompress(data))


def test_an_oserror_of_a_callable_deserializer_is_poison_not_a_registry_outage(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """gzip.BadGzipFile from a callable counts as a rollback: max_redeliveries=0 + skip skips it."""
    topic = new_topic()
    values = [gzip.compress(b'{"n": 1}'), b"not gzip at all", gzip.compress(b'{"n": 3}')]
    produce(kafka_bootstrap, topic, [(None, value) for value in values])
    consumer = make_consumer(
        value_deserializer=gunzip_json, batch_max_messages=1, max_redeliveries=0,
        redelivery_policy="skip",
    )  # fmt: skip
    consumer.start([topic], source_count=1, node_id=0)
    assert [m.value() for m in take(consumer, 2)] == [{"n": 1}, {"n": 3}]
    assert committed_offset(kafka_bootstrap, consumer.settings.group_id, topic) == 3


def test_a_poison_value_under_dead_letter_is_produced_raw_and_never_raised(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """With max_redeliveries=0 the undecodable batch goes, as fetched, to dead_letter_topic."""
    topic, dead_letters = new_topic(), new_topic()
    produce(kafka_bootstrap, topic, json_records([1, POISON, 3]))
    consumer = make_consumer(
        value_deserializer="json", key_deserializer="str", batch_max_messages=1,
        max_redeliveries=0, redelivery_policy="dead-letter", dead_letter_topic=dead_letters,
    )  # fmt: skip
    consumer.start([topic], source_count=1, node_id=0)
    assert [m.value() for m in take(consumer, 2)] == [1, 3]
    reader = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "dlq-reader"})
    moved: list[Any] = []
    try:
        reader.assign([KafkaTopicPartition(dead_letters, 0, 0)])

        def read_dead_letters() -> bool:
            moved.extend(reader.consume(10, 0.5))
            return bool(moved)

        wait_until(read_dead_letters, 30, "the dead letter")
    finally:
        reader.close()
    assert [(m.key(), m.value()) for m in moved] == [(b"k1", POISON)]
    headers = dict(moved[0].headers() or [])
    assert (headers["client_balance.topic"], headers["client_balance.offset"]) == (
        topic.encode(),
        b"1",
    )


@pytest.mark.parametrize("number", [0, 1])
def test_the_doc_examples_run(kafka_bootstrap: str, tmp_path: Path, number: int) -> None:
    """docs/deserializers.md's first two examples (JSON, Avro) run and print what they say."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs/deserializers.md").read_text(), re.S)
    code = blocks[number]
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    cluster.create_topics(kafka_bootstrap, {topic: 1})
    code = code.replace("127.0.0.1:9092", kafka_bootstrap).replace('"orders"', f'"{topic}"')
    code = re.sub(r'group_id="([^"]+)"', rf'group_id="\1-{topic}"', code)
    (tmp_path / "example.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "example.py"],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    expected = re.findall(r"# (.*)$", code.strip().splitlines()[-2])[0]
    assert done.stdout.strip() == expected
