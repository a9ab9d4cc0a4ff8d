"""confluent-kafka's deserializers as decoders of the consumer's messages.

A decoder here is ``(raw bytes or None, message) -> object``: the message gives the topic and
headers that confluent-kafka's ``SerializationContext`` carries. ``registry_avro`` builds the
Schema Registry's ``AvroDeserializer`` (5-byte framing: magic byte, schema id);
``wrap_deserializer`` adapts a ``confluent_kafka.serialization.Deserializer`` the application
built itself. Which of their failures are the registry's rather than the data's:
``_errors.registry_unavailable``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from confluent_kafka import Message
from confluent_kafka.serialization import Deserializer, MessageField, SerializationContext

from client_balance.errors import ConfigError

__all__ = ["MessageDecoder", "is_confluent_deserializer", "registry_avro", "wrap_deserializer"]

MessageDecoder = Callable[[bytes | None, Any], Any]
"""Decodes one side of a message: (raw bytes or None, the confluent-kafka message) -> object."""

_FIELDS = {"key": MessageField.KEY, "value": MessageField.VALUE}


def is_confluent_deserializer(candidate: object) -> bool:
    """Whether ``candidate`` is a confluent-kafka ``Deserializer`` (it wants a context)."""
    return isinstance(candidate, Deserializer)


def wrap_deserializer(deserializer: Callable[..., Any], field: str) -> MessageDecoder:
    """A confluent-kafka deserializer, called with the message's ``SerializationContext``."""
    kind = _FIELDS[field]

    def decode(data: bytes | None, message: Message) -> Any:
        topic = message.topic() or ""  # a fetched message always has one
        return deserializer(data, SerializationContext(topic, kind, message.headers()))

    return decode


def registry_avro(
    url: str,
    basic_auth: str | None,
    reader_schema: object | None,
    field: str,
    timeout_s: float,
) -> MessageDecoder:
    """The Schema Registry's ``AvroDeserializer`` for ``field``; ``reader_schema`` is optional.

    No request is made here: the registry is first asked for a schema id when a message needs
    it (and each id once: the client caches them). Each request waits at most ``timeout_s``.
    """
    try:
        from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: PLC0415 - optional extra
        from confluent_kafka.schema_registry.avro import AvroDeserializer  # noqa: PLC0415 - optional extra
    except ImportError as error:
        raise ConfigError(
            f"{field}_deserializer='avro' with schema_registry_url needs confluent-kafka's "
            f"Schema Registry client; install client-balance[schema-registry] ({error.name} "
            "is missing)"
        ) from None
    # confluent-kafka waits forever by default: a registry that accepts the connection and
    # never answers would hang get_message() with no error to act on.
    config: dict[str, Any] = {"url": url, "timeout": timeout_s}
    if basic_auth is not None:  # confluent-kafka 2.16 refuses basic.auth.credentials.source
        config["basic.auth.user.info"] = basic_auth
    # new_client gives confluent-kafka's in-memory registry for a mock:// URL (tests).
    client = SchemaRegistryClient.new_client(config)
    schema_str = None
    if reader_schema is not None:
        schema_str = reader_schema if isinstance(reader_schema, str) else json.dumps(reader_schema)
    return wrap_deserializer(AvroDeserializer(client, schema_str=schema_str), field)
