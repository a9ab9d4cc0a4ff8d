"""value_deserializer="avro" against a real Schema Registry (Apicurio's Confluent API).

confluent-kafka's own SchemaRegistryClient and AvroSerializer register and frame the records,
over HTTP, as a producing application would; the consumer reads them through its own client.
"""

from __future__ import annotations

import contextlib
import json
import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from client_balance import ClientBalanceConsumer, DeserializationError, NoMessageError
from tests.integration.schema_registry import LocalSchemaRegistry, RegistryUnavailableError
from tests.integration.test_consumer import committed_offset
from tests.integration.test_deserializers import ORDER, produce, take

pytestmark = pytest.mark.integration

# A later version of ORDER: a field with a default, so records of either read as the other.
ORDER_V2 = {**ORDER, "fields": [*ORDER["fields"], {"name": "note", "type": "string",
                                                   "default": ""}]}  # fmt: skip
UNKNOWN_SCHEMA_ID = 2**31 - 1


@pytest.fixture(scope="module")
def registry(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalSchemaRegistry]:
    """A real registry for this module, on the session broker; fails (never skips) without one."""
    started = LocalSchemaRegistry(kafka_bootstrap, tmp_path_factory.mktemp("registry"))
    try:
        started.start()
    except RegistryUnavailableError as error:
        pytest.fail(f"these tests need a real Schema Registry, and none started: {error}", False)
    try:
        yield started
    finally:
        started.stop()
        # Its topics keep everything forever: not left behind on a cluster given to the tests.
        deleting = AdminClient({"bootstrap.servers": kafka_bootstrap}).delete_topics(started.topics)
        for future in deleting.values():
            with contextlib.suppress(KafkaException):  # one it never created
                future.result(timeout=30)


def framed(registry: LocalSchemaRegistry, topic: str, schema: dict[str, Any],
           records: list[dict[str, Any]]) -> list[tuple[bytes | None, bytes]]:  # fmt: skip
    """``records`` as confluent-kafka's AvroSerializer frames them for ``topic``'s values.

    The schema is registered first, explicitly, under the topic's subject; the serializer then
    finds it there (it registers nothing itself).
    """
    client = SchemaRegistryClient({"url": registry.url})
    schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(schema), "AVRO"))
    serializer = AvroSerializer(client, json.dumps(schema), conf={"auto.register.schemas": False})
    context = SerializationContext(topic, MessageField.VALUE)
    framing = b"\0" + struct.pack(">I", schema_id)  # the magic byte, then the id
    values: list[tuple[bytes | None, bytes]] = []
    for record in records:
        value = serializer(record, context)
        assert isinstance(value, bytes)
        assert value.startswith(framing)
        values.append((None, value))
    return values


def test_records_framed_by_the_registry_decode_to_what_was_produced(
    registry: LocalSchemaRegistry,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """The consumer fetches the writer's schema by id from the registry and decodes each record.

    With value_avro_schema as the reader's schema, records are resolved to it (a new field
    with a default appears).
    """
    topic = new_topic()
    records = [{"id": i, "item": f"item-{i}"} for i in range(6)]
    produced = framed(registry, topic, ORDER, records)
    produce(kafka_bootstrap, topic, produced)
    settings = {"value_deserializer": "avro", "schema_registry_url": registry.url}
    consumer = make_consumer(**settings)
    consumer.start([topic], source_count=1, node_id=0)
    taken = take(consumer, 6)
    assert [m.value() for m in taken] == records
    assert [m.raw_value() for m in taken] == [value for _, value in produced]
    resolving = make_consumer(**settings, value_avro_schema=ORDER_V2)
    resolving.start([topic], source_count=1, node_id=0)
    assert [m.value() for m in take(resolving, 6)] == [{**r, "note": ""} for r in records]


def test_an_unknown_schema_id_is_poison_for_the_redelivery_policy(
    registry: LocalSchemaRegistry,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """A record framed with an id the registry never gave is the data's fault (its 404).

    Under "skip" with max_redeliveries=1: one DeserializationError (not retriable), then the
    batch is skipped and committed past, and the records after it decode.
    """
    topic = new_topic()
    good = framed(registry, topic, ORDER, [{"id": 1, "item": "a"}, {"id": 3, "item": "c"}])
    bogus = b"\0" + struct.pack(">I", UNKNOWN_SCHEMA_ID) + good[0][1][5:]
    produce(kafka_bootstrap, topic, [good[0], (None, bogus), good[1]])
    consumer = make_consumer(
        value_deserializer="avro", schema_registry_url=registry.url, batch_max_messages=1,
        max_redeliveries=1, redelivery_policy="skip",
    )  # fmt: skip
    consumer.start([topic], source_count=1, node_id=0)
    assert [m.value() for m in take(consumer, 1)] == [{"id": 1, "item": "a"}]
    with pytest.raises(DeserializationError) as caught:
        consumer.get_message(timeout_s=30)
    error = caught.value
    assert (error.offset, error.field, error.retriable) == (1, "value", False)
    assert isinstance(error.__cause__, SchemaRegistryError)
    assert error.__cause__.http_status_code == 404
    assert [m.value() for m in take(consumer, 1)] == [{"id": 3, "item": "c"}]
    assert committed_offset(kafka_bootstrap, consumer.settings.group_id, topic) == 3
    with pytest.raises(NoMessageError):
        consumer.get_message(timeout_s=0.5)


def test_a_registry_stopped_mid_way_rolls_the_batch_back_uncounted(
    registry: LocalSchemaRegistry,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """A registry that is down fails the batch as retriable, at every delivery, never counted.

    The record's schema is one the consumer has not fetched yet. Even max_redeliveries=0 under
    "skip" (which skips a counted failure at once) does not skip it. Started again on the same
    port, the registry answers and the same record decodes.
    """
    topic = new_topic()
    produce(kafka_bootstrap, topic, framed(registry, topic, ORDER, [{"id": 1, "item": "a"}]))
    consumer = make_consumer(
        value_deserializer="avro", schema_registry_url=registry.url, batch_max_messages=1,
        max_redeliveries=0, redelivery_policy="skip",
    )  # fmt: skip
    consumer.start([topic], source_count=1, node_id=0)
    assert [m.value() for m in take(consumer, 1)] == [{"id": 1, "item": "a"}]
    later = {"id": 2, "item": "b", "note": "v2"}
    produce(kafka_bootstrap, topic, framed(registry, topic, ORDER_V2, [later]))
    registry.stop()
    try:
        for _ in range(2):
            with pytest.raises(DeserializationError, match="did not answer") as caught:
                consumer.get_message(timeout_s=30)
            assert (caught.value.offset, caught.value.retriable) == (1, True)
        assert committed_offset(kafka_bootstrap, consumer.settings.group_id, topic) == 1
    finally:
        registry.start()
    assert [m.value() for m in take(consumer, 1)] == [later]
    assert committed_offset(kafka_bootstrap, consumer.settings.group_id, topic) == 2
