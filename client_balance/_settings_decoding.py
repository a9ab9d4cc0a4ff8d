"""The deserializer settings of ``ClientBalanceSettings`` (docs/deserializers.md).

A base class of the settings model, so that decoding's knobs and their checks have one home
and the model stays readable.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from client_balance._deserializers import (
    Deserializer,
    check_avro_schema,
    check_deserializer,
    check_registry_url,
)
from client_balance._secrets import SecretStr
from client_balance._settings_model import SettingsModel, optional, secret, setting, text
from client_balance.errors import ConfigError

__all__ = ["AvroSchema", "DecodingSettings", "check_avro_source"]

AvroSchema = dict[str, Any] | list[Any] | str
"""An Avro schema: a dict (a record), a list (a union) or its JSON text."""


def _deserializer(field: str) -> Any:
    return lambda value: check_deserializer(field, value)


def _avro_schema(field: str) -> Any:
    def schema(value: Any) -> AvroSchema:
        if isinstance(value, tuple | set | frozenset):
            value = list(value)
        if not isinstance(value, dict | list | str):
            raise ValueError(f"give a dict, a list or JSON text, got {type(value).__name__}")
        return check_avro_schema(field, value)

    return optional(schema)


class DecodingSettings(SettingsModel):
    """How the keys and values of the messages handed out are decoded."""

    key_deserializer: Deserializer = setting(
        _deserializer("key_deserializer"),
        default="bytes",
        description="'bytes' (no decoding), 'str', 'json', 'avro', or a callable "
        "(bytes | None) -> object; start(key_deserializer=...) overrides it.",
    )
    value_deserializer: Deserializer = setting(
        _deserializer("value_deserializer"),
        default="bytes",
        description="As key_deserializer, for the values.",
    )
    key_avro_schema: AvroSchema | None = setting(
        _avro_schema("key_avro_schema"),
        default=None,
        env="json or text",
        description="The writer's schema of schemaless Avro keys (the reader's schema with a "
        "Schema Registry).",
    )
    value_avro_schema: AvroSchema | None = setting(
        _avro_schema("value_avro_schema"),
        default=None,
        env="json or text",
        description="As key_avro_schema, for the values.",
    )
    schema_registry_url: str | None = setting(
        optional(lambda value: check_registry_url(text(value))),
        default=None,
        in_errors="nothing",  # refused for holding credentials: never echoed
        description="A Confluent Schema Registry: 'avro' then reads its framed records "
        "(confluent-kafka's AvroDeserializer). No credentials in the URL.",
    )
    schema_registry_basic_auth: SecretStr | None = setting(
        optional(secret),
        default=None,
        shown=False,
        in_errors="nothing",
        description="'user:password' for the Schema Registry (basic.auth.user.info).",
    )

    def _check_across_fields(self) -> Iterable[ValueError | ConfigError]:
        for field in ("key", "value"):
            try:
                check_avro_source(self, field, getattr(self, f"{field}_deserializer"))
            except ConfigError as error:
                yield error


def check_avro_source(settings: DecodingSettings, field: str, deserializer: object) -> None:
    """``ConfigError`` unless an ``"avro"`` deserializer has a schema or a Schema Registry."""
    if deserializer != "avro" or settings.schema_registry_url is not None:
        return
    if getattr(settings, f"{field}_avro_schema") is None:
        raise ConfigError(
            f"{field}_deserializer='avro' needs {field}_avro_schema (the writer's schema of "
            "schemaless records) or schema_registry_url (records framed by a Schema Registry)"
        )
