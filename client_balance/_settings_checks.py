"""Checks behind ``ClientBalanceSettings``: brokers, group id, ``kafka`` values, buffer bound.

Kept apart from the model so that the one rule that matters most here, no secret in any
message, is read in one place (with ``_settings_model._problem``, which never echoes a
``kafka`` value or a secret field's).
"""

from __future__ import annotations

import math
import re
from typing import Any

from client_balance._secrets import (
    CALLBACK_KEYS,
    SecretStr,
    is_secret_key,
    is_secret_value,
    reveal,
)
from client_balance._settings_model import text

__all__ = [
    "MIN_SECRET_CHARS",
    "check_buffered_bytes",
    "check_group_id",
    "check_servers",
    "check_status_secret",
    "kafka_values",
]

MIN_SECRET_CHARS = 16
"""A shorter secret could be guessed offline from any signed record, which every reader sees."""

# The only librdkafka 2.16 properties of type float (rd_kafka_conf_properties_show): any other
# reads str(value) up to its first non-digit, so 100.7 became 100 and 1e20 became 1.
_FLOAT_PROPERTIES = frozenset({"linger.ms", "queue.buffering.max.ms"})
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s:,\[\]]+):(\d{1,5})")
_KAFKA_MAX_GROUP_ID_LENGTH = 255

_MIN_BUFFERED_BYTES = 64 * 1024
_MAX_BUFFERED_BYTES = 64 * 1024**3  # a typo in units, not a real bound, above this


def check_servers(value: Any) -> str:
    """``bootstrap_servers``: a comma-separated list of host:port, with no credentials."""
    servers = text(value)
    # No host name holds "@": one here is a pasted URL's user:password@, and the error (which
    # _problem masks the same way) must not repeat a password that a comma may have split.
    if "@" in servers:
        raise ValueError(
            "credentials (user:password@) do not belong in bootstrap_servers; give host:port "
            "pairs, and the SASL credentials in kafka (sasl.username, sasl.password)"
        )
    parts = [part.strip() for part in servers.split(",")]
    for server in parts:
        match = _HOST_PORT.fullmatch(server)
        if match is None or not 0 < int(match.group(2)) < 65536:  # noqa: PLR2004 - TCP ports
            raise ValueError(
                f"{server!r} is not host:port; give a comma-separated list such as "
                "'127.0.0.1:9092,broker2:9092'"
            )
    return ",".join(parts)


def check_group_id(value: Any) -> str:
    """``group_id``: not blank, and at most Kafka's 255 characters."""
    group = text(value)
    if not group.strip():
        raise ValueError("group_id must not be blank")
    if len(group) > _KAFKA_MAX_GROUP_ID_LENGTH:
        raise ValueError(f"group_id is {len(group)} characters; at most 255 are allowed")
    return group


def check_status_secret(value: Any) -> Any:
    """``status_secret``: None, or at least :data:`MIN_SECRET_CHARS` characters (never shown)."""
    if value is None:
        return None
    length = len(str(reveal(value)))
    if length < MIN_SECRET_CHARS:
        raise ValueError(
            f"status_secret has {length} characters; use at least {MIN_SECRET_CHARS} (random "
            "ones): the status topic's signatures are readable by anyone who reads the topic, "
            "and a short secret can be guessed from them"
        )
    return value


def check_buffered_bytes(value: int) -> int:
    """``max_buffered_bytes``: 64 KiB to 64 GiB."""
    if not _MIN_BUFFERED_BYTES <= value <= _MAX_BUFFERED_BYTES:
        raise ValueError(
            f"give {_MIN_BUFFERED_BYTES:,} (64 KiB) to {_MAX_BUFFERED_BYTES:,} (64 GiB) bytes"
        )
    return value


def kafka_values(value: Any) -> dict[str, object]:
    """The ``kafka`` dict checked: secrets as ``SecretStr``, callbacks only where allowed."""
    if not isinstance(value, dict):
        raise ValueError(f"give a dict of librdkafka properties, got {type(value).__name__}")
    checked: dict[str, object] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"librdkafka property names are non-empty strings: {key!r}")
        # A wrong value is named by its type only: a callback's may be what belonged inside
        # it (a token), a partial or a dict may hold one.
        if key in CALLBACK_KEYS:
            if not callable(item) and not (key == "logger" and hasattr(item, "log")):
                raise ValueError(
                    f"{key} holds a {type(item).__name__}; {key} takes a callable, "
                    "set in code (it cannot come from CLIENT_BALANCE_KAFKA)"
                )
            checked[key] = item
        elif is_secret_value(item):
            checked[key] = item
        elif not isinstance(item, str | int | float | bool):
            raise ValueError(
                f"{key} holds a {type(item).__name__}; librdkafka properties take str, "
                f"int, float or bool values (callbacks only for {sorted(CALLBACK_KEYS)})"
            )
        else:  # a secret goes into a SecretStr before anything can print it
            plain = _number(key, item) if isinstance(item, float) else item
            checked[key] = SecretStr(str(plain)) if is_secret_key(key) else plain
    return checked


def _number(key: str, value: float) -> float | int:
    """A float as librdkafka reads it: whole, except for its few float properties."""
    if not math.isfinite(value):
        raise ValueError(f"{key} holds a float that is not finite; give a whole number")
    if key in _FLOAT_PROPERTIES:
        return value
    if not value.is_integer():
        raise ValueError(
            f"{key} holds a number with a fraction; librdkafka takes whole numbers here (it "
            f"would read only the digits before the point); fractions only for "
            f"{sorted(_FLOAT_PROPERTIES)}"
        )
    return int(value)
