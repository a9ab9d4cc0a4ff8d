"""The built-in deserializers by name, and the checks of ``key_/value_deserializer``.

Pure: no Kafka. A deserializer is a name (``DESERIALIZER_NAMES``) or a callable taking the raw
``bytes`` (``None`` for a null key or a tombstone) and returning the decoded object. The Schema
Registry's deserializers live in ``_kafka/_schema_registry.py``; the per-batch decoding in
``consumer/_decode.py``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

from client_balance._secrets import before_last_at_masked
from client_balance.errors import ConfigError

__all__ = [
    "DESERIALIZER_NAMES",
    "Deserializer",
    "avro_reader",
    "check_avro_schema",
    "check_deserializer",
    "check_registry_url",
    "deserializer_name",
    "read_json",
    "read_str",
]

Deserializer = str | Callable[[bytes | None], Any]
"""What ``key_deserializer``/``value_deserializer`` take: a name, or a callable."""

DESERIALIZER_NAMES = ("bytes", "str", "json", "avro")
"""``bytes``: no decoding; ``str``: UTF-8; ``json``; ``avro``: schemaless or the registry's."""


def check_deserializer(field: str, value: object) -> Deserializer:
    """``value`` if it is a known name or a callable; else ``ConfigError`` naming both."""
    if callable(value):
        return value
    if isinstance(value, str) and value in DESERIALIZER_NAMES:
        return value
    allowed = ", ".join(repr(name) for name in DESERIALIZER_NAMES)
    raise ConfigError(
        f"{field}={value!r} is not a deserializer: give one of {allowed}, or a callable "
        "taking the raw bytes (or None) and returning the decoded object"
    )


def deserializer_name(value: Deserializer) -> str:
    """A name for messages and logs: the built-in name, or the callable's qualified name."""
    if isinstance(value, str):
        return value
    return str(getattr(value, "__qualname__", None) or type(value).__qualname__)


def check_avro_schema(field: str, schema: object) -> dict[str, Any] | str | list[Any]:
    """The schema (a dict, a list or a JSON string) once fastavro has parsed it."""
    parse_avro_schema(field, schema)
    return schema  # type: ignore[return-value]  # parse_avro_schema refused anything else


def parse_avro_schema(field: str, schema: object) -> Any:
    """Fastavro's parsed form of an Avro schema given as a dict, a list or a JSON string."""
    fastavro = _fastavro(field)
    if isinstance(schema, str):
        text = schema
        try:
            schema = json.loads(text)
        except ValueError:
            schema = text.strip()  # a bare name such as "long" or "string"
    if not isinstance(schema, dict | list | str):
        raise ConfigError(
            f"{field} must be an Avro schema as a dict or a JSON string, not "
            f"{type(schema).__name__}"
        )
    try:
        return fastavro.parse_schema(schema)
    except Exception as error:  # fastavro raises several types for a bad schema
        raise ConfigError(f"{field} is not a valid Avro schema: {error}") from None


def avro_reader(field: str, schema: object) -> Callable[[bytes | None], Any]:
    """Schemaless Avro (no framing) with ``schema`` as the writer's schema."""
    parsed = parse_avro_schema(field, schema)
    reader = _fastavro(field).schemaless_reader

    def read(data: bytes | None) -> Any:
        if data is None:
            return None
        stream = io.BytesIO(data)
        record = reader(stream, parsed, None)
        left = len(data) - stream.tell()
        if left:  # a record of another schema, or Schema Registry framing, read as this one
            raise ValueError(f"{left} bytes left after the Avro record: another schema?")
        return record

    return read


def read_str(data: bytes | None) -> str | None:
    """UTF-8 text."""
    return None if data is None else data.decode("utf-8")


def read_json(data: bytes | None) -> Any:
    """One JSON document (UTF-8)."""
    return None if data is None else json.loads(data)


def check_registry_url(url: str) -> str:
    """A Schema Registry URL list: http(s) (or confluent's ``mock://``), no credentials in it."""
    for part in url.split(","):
        scheme, _, rest = part.strip().partition("://")
        if scheme not in ("http", "https", "mock") or not rest:
            raise ConfigError(
                f"schema_registry_url: {before_last_at_masked(part.strip())!r} is not an http:// "
                "or https:// URL (mock:// names confluent-kafka's in-memory registry, for tests)"
            )
        if "@" in rest:  # anywhere: a password with a raw "/" puts it past the host
            raise ConfigError(
                "schema_registry_url must not hold credentials (they would show in every "
                "repr); give them as schema_registry_basic_auth='user:password'"
            )
    return url


def _fastavro(field: str) -> Any:
    try:
        import fastavro  # noqa: PLC0415 - an optional extra, needed only for Avro
    except ImportError:
        raise ConfigError(f"{field}: Avro needs fastavro; install client-balance[avro]") from None
    return fastavro
