"""The deserializer settings of ``ClientBalanceSettings`` (docs/deserializers.md).

A base class of the settings model, so that decoding's knobs and their checks have one home
and the model stays readable.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings

from client_balance._deserializers import (
    Deserializer,
    check_avro_schema,
    check_deserializer,
    check_registry_url,
)
from client_balance.errors import ConfigError

__all__ = ["DecodingSettings", "check_avro_source"]

AvroSchema = dict[str, Any] | list[Any] | str
"""An Avro schema: a dict (a record), a list (a union) or its JSON text."""


class DecodingSettings(BaseSettings):
    """How the keys and values of the messages handed out are decoded."""

    key_deserializer: Deserializer = Field(
        default="bytes",
        description="'bytes' (no decoding), 'str', 'json', 'avro', or a callable "
        "(bytes | None) -> object; start(key_deserializer=...) overrides it.",
    )
    value_deserializer: Deserializer = Field(
        default="bytes",
        description="As key_deserializer, for the values.",
    )
    key_avro_schema: AvroSchema | None = Field(
        default=None,
        description="The writer's schema of schemaless Avro keys (the reader's schema with a "
        "Schema Registry).",
    )
    value_avro_schema: AvroSchema | None = Field(
        default=None, description="As key_avro_schema, for the values."
    )
    schema_registry_url: str | None = Field(
        default=None,
        description="A Confluent Schema Registry: 'avro' then reads its framed records "
        "(confluent-kafka's AvroDeserializer). No credentials in the URL.",
    )
    schema_registry_basic_auth: SecretStr | None = Field(
        default=None,
        repr=False,
        description="'user:password' for the Schema Registry (basic.auth.user.info).",
    )

    @field_validator("key_deserializer", "value_deserializer", mode="before")
    @classmethod
    def _check_deserializer(cls, value: object, info: Any) -> Deserializer:
        try:
            return check_deserializer(info.field_name, value)
        except ConfigError as error:
            raise ValueError(str(error)) from None

    @field_validator("key_avro_schema", "value_avro_schema")
    @classmethod
    def _check_avro_schema(cls, value: AvroSchema | None, info: Any) -> AvroSchema | None:
        if value is None:
            return None
        try:
            return check_avro_schema(info.field_name, value)
        except ConfigError as error:
            raise ValueError(str(error)) from None

    @field_validator("schema_registry_url")
    @classmethod
    def _check_registry_url(cls, value: str | None) -> str | None:
        try:
            return None if value is None else check_registry_url(value)
        except ConfigError as error:
            raise ValueError(str(error)) from None

    @model_validator(mode="after")
    def _check_avro_sources(self) -> DecodingSettings:
        for field in ("key", "value"):
            try:
                check_avro_source(self, field, getattr(self, f"{field}_deserializer"))
            except ConfigError as error:
                raise ValueError(str(error)) from None
        return self


def check_avro_source(settings: DecodingSettings, field: str, deserializer: object) -> None:
    """``ConfigError`` unless an ``"avro"`` deserializer has a schema or a Schema Registry."""
    if deserializer != "avro" or settings.schema_registry_url is not None:
        return
    if getattr(settings, f"{field}_avro_schema") is None:
        raise ConfigError(
            f"{field}_deserializer='avro' needs {field}_avro_schema (the writer's schema of "
            "schemaless records) or schema_registry_url (records framed by a Schema Registry)"
        )
