"""Decoding a batch's keys and values as it is handed out (docs/deserializers.md).

``Decoder.of`` resolves the deserializers of the settings and ``start()`` once; it is None when
both are ``"bytes"``, so an undecoded batch costs nothing. Otherwise each message of a batch
becomes a :class:`DecodedMessage`: the decoded key and value, the confluent-kafka message
untouched beneath them (``raw_value()``, ``message``). A message that does not decode fails the
whole batch with :class:`DeserializationError`; ``_launch`` treats that batch as rolled back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from client_balance._deserializers import (
    Deserializer,
    avro_reader,
    check_deserializer,
    deserializer_name,
    read_json,
    read_str,
)
from client_balance._kafka import (
    MessageDecoder,
    is_confluent_deserializer,
    registry_avro,
    registry_unavailable,
    wrap_deserializer,
)
from client_balance._settings_decoding import check_avro_source
from client_balance.errors import DeserializationError
from client_balance.settings import ClientBalanceSettings

__all__ = ["DecodedMessage", "Decoder"]

_BUILT_IN: dict[str, Callable[[bytes | None], Any]] = {"str": read_str, "json": read_json}


class DecodedMessage:
    """A message with its key and value decoded; the rest is the confluent-kafka message's.

    ``key()`` and ``value()`` are the decoded objects (the raw bytes where that side's
    deserializer is ``"bytes"``), ``raw_key()`` and ``raw_value()`` the bytes as fetched, and
    ``message`` the confluent-kafka ``Message`` itself. ``topic()``, ``partition()``,
    ``offset()``, ``timestamp()``, ``headers()`` and any other method are the message's.
    """

    __slots__ = ("_key", "_message", "_value")

    def __init__(self, message: Any, key: Any, value: Any) -> None:
        self._message = message
        self._key = key
        self._value = value

    @property
    def message(self) -> Any:
        """The confluent-kafka ``Message`` as fetched (never modified)."""
        return self._message

    def key(self) -> Any:
        """The decoded key."""
        return self._key

    def value(self) -> Any:
        """The decoded value."""
        return self._value

    def raw_key(self) -> bytes | None:
        """The key's bytes as fetched."""
        return self._message.key()  # type: ignore[no-any-return]  # confluent-kafka is untyped

    def raw_value(self) -> bytes | None:
        """The value's bytes as fetched."""
        return self._message.value()  # type: ignore[no-any-return]  # confluent-kafka is untyped

    def topic(self) -> str:
        """The message's topic."""
        return self._message.topic()  # type: ignore[no-any-return]  # confluent-kafka is untyped

    def partition(self) -> int:
        """The message's partition."""
        return self._message.partition()  # type: ignore[no-any-return]  # untyped

    def offset(self) -> int:
        """The message's offset."""
        return self._message.offset()  # type: ignore[no-any-return]  # confluent-kafka is untyped

    def timestamp(self) -> tuple[int, int]:
        """(timestamp type, milliseconds), as confluent-kafka gives it."""
        return self._message.timestamp()  # type: ignore[no-any-return]  # untyped

    def headers(self) -> list[tuple[str, bytes]] | None:
        """The message's headers."""
        return self._message.headers()  # type: ignore[no-any-return]  # untyped

    def __len__(self) -> int:
        return len(self._message)

    def __getattr__(self, name: str) -> Any:
        # Only for what is not defined above (error(), latency(), leader_epoch() ...). Private
        # names are not passed on: copy and pickle ask for them before _message is set.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._message, name)

    def __repr__(self) -> str:
        # No key or value: either may be personal data, and a repr ends up in logs.
        message = self._message
        return (
            f"DecodedMessage(topic={message.topic()!r}, partition={message.partition()}, "
            f"offset={message.offset()})"
        )


class Decoder:
    """Decodes batches with the key and value deserializers of one ``start()``."""

    def __init__(
        self,
        key: MessageDecoder | None,
        value: MessageDecoder | None,
        names: tuple[str, str],
        registry: tuple[bool, bool] = (False, False),
    ) -> None:
        self._key = key
        self._value = value
        self._names = {"key": names[0], "value": names[1]}
        # Only a side that asks a Schema Registry can fail for want of it: an OSError of a
        # plain callable (gzip.BadGzipFile) is the data's fault, and must meet the policy.
        self._registry = {"key": registry[0], "value": registry[1]}

    @classmethod
    def of(
        cls,
        settings: ClientBalanceSettings,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
    ) -> Decoder | None:
        """The decoder of these settings and ``start()``'s overrides; None: nothing to decode.

        Raises :class:`ConfigError` for a bad name, an ``"avro"`` without a schema or a
        registry, or a missing optional package.
        """
        key = _chosen(settings, "key", key_deserializer)
        value = _chosen(settings, "value", value_deserializer)
        if key == "bytes" and value == "bytes":
            return None
        key_side, key_registry = _side(settings, "key", key)
        value_side, value_registry = _side(settings, "value", value)
        return cls(
            key_side,
            value_side,
            (deserializer_name(key), deserializer_name(value)),
            (key_registry, value_registry),
        )

    def decode(self, messages: list[Any]) -> list[DecodedMessage]:
        """Every message decoded; :class:`DeserializationError` names the first that is not."""
        key_of, value_of = self._key, self._value
        decoded = []
        field, message = "key", None
        try:
            for message in messages:
                field = "key"
                raw = message.key()
                key = raw if key_of is None else key_of(raw, message)
                field = "value"
                raw = message.value()
                decoded.append(
                    DecodedMessage(
                        message, key, raw if value_of is None else value_of(raw, message)
                    )
                )
        except Exception as error:  # whatever a deserializer raises: the batch is rolled back
            raise self._failure(message, field, error) from error
        return decoded

    def _failure(self, message: Any, field: str, error: Exception) -> DeserializationError:
        name = self._names[field]
        retriable = self._registry[field] and registry_unavailable(error)
        where = f"{message.topic()}:{message.partition()} at offset {message.offset()}"
        why = (
            "the Schema Registry did not answer as it should; the batch comes again, not "
            "counted as a rollback"
            if retriable
            else "the batch is rolled back"
        )
        return DeserializationError(
            f"the {field} of {where} does not decode with {name!r} ({type(error).__name__}: see "
            f"the cause); {why}",
            topic=message.topic(),
            partition=message.partition(),
            offset=message.offset(),
            field=field,
            deserializer=name,
            retriable=retriable,
        )


def _chosen(settings: ClientBalanceSettings, field: str, given: Deserializer | None) -> Any:
    chosen = getattr(settings, f"{field}_deserializer") if given is None else given
    chosen = check_deserializer(f"{field}_deserializer", chosen)
    check_avro_source(settings, field, chosen)
    return chosen


def _side(
    settings: ClientBalanceSettings, field: str, deserializer: Deserializer
) -> tuple[MessageDecoder | None, bool]:
    """The side's decoder, and whether it may ask a Schema Registry."""
    if deserializer == "bytes":
        return None, False
    if isinstance(deserializer, str) and deserializer in _BUILT_IN:
        return _plain(_BUILT_IN[deserializer]), False
    if deserializer == "avro":
        schema = getattr(settings, f"{field}_avro_schema")
        if settings.schema_registry_url is None:
            return _plain(avro_reader(f"{field}_avro_schema", schema)), False
        auth = settings.schema_registry_basic_auth
        secret = None if auth is None else auth.get_secret_value()
        timeout_s = settings.request_timeout_s
        return registry_avro(settings.schema_registry_url, secret, schema, field, timeout_s), True
    if is_confluent_deserializer(deserializer):
        # confluent-kafka's own deserializers are the ones built over a registry client.
        decoder = wrap_deserializer(deserializer, field)  # type: ignore[arg-type]  # checked
        return decoder, True
    return _plain(deserializer), False  # type: ignore[arg-type]  # check_deserializer: a callable


def _plain(read: Callable[[bytes | None], Any]) -> MessageDecoder:
    def decode(data: bytes | None, _message: Any) -> Any:
        return read(data)

    return decode
