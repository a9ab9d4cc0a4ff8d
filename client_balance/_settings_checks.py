"""Checks behind ``ClientBalanceSettings``: the ``kafka`` values, and errors in plain words.

Kept apart from the model so that the one rule that matters most here, no secret in any
message, is read in one place.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, SecretStr, ValidationError

from client_balance._secrets import CALLBACK_KEYS, is_secret_key

__all__ = ["BufferedBytes", "describe", "kafka_values"]

_MIN_BUFFERED_BYTES = 64 * 1024
_MAX_BUFFERED_BYTES = 64 * 1024**3  # a typo in units, not a real bound, above this


def _check_buffered_bytes(value: int) -> int:
    if not _MIN_BUFFERED_BYTES <= value <= _MAX_BUFFERED_BYTES:
        raise ValueError(
            f"give {_MIN_BUFFERED_BYTES:,} (64 KiB) to {_MAX_BUFFERED_BYTES:,} (64 GiB) bytes"
        )
    return value


BufferedBytes = Annotated[int, AfterValidator(_check_buffered_bytes)]
"""``max_buffered_bytes``: 64 KiB to 64 GiB."""

# The registry's URL may be refused for holding credentials: never echo it.
_SECRET_FIELDS = frozenset({"status_secret", "schema_registry_basic_auth", "schema_registry_url"})


def kafka_values(value: dict[Any, Any]) -> dict[str, object]:
    """The ``kafka`` dict checked: secrets as ``SecretStr``, callbacks only where allowed."""
    checked: dict[str, object] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"librdkafka property names are non-empty strings: {key!r}")
        shown = "its value" if is_secret_key(key) else repr(item)
        if key in CALLBACK_KEYS:
            if not callable(item) and not (key == "logger" and hasattr(item, "log")):
                raise ValueError(
                    f"{key}={shown} is a {type(item).__name__}; {key} takes a callable, "
                    "set in code (it cannot come from CLIENT_BALANCE_KAFKA)"
                )
            checked[key] = item
        elif isinstance(item, SecretStr):
            checked[key] = item
        elif not isinstance(item, str | int | float | bool):
            raise ValueError(
                f"{key}={shown} is a {type(item).__name__}; librdkafka properties take str, "
                f"int, float or bool values (callbacks only for {sorted(CALLBACK_KEYS)})"
            )
        else:  # a secret goes into a SecretStr before anything can print it
            checked[key] = SecretStr(str(item)) if is_secret_key(key) else item
    return checked


def describe(error: ValidationError) -> str:
    """A settings validation error as one message naming each field (never a secret)."""
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "settings"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "missing":
            env = f"CLIENT_BALANCE_{where.upper()}"
            problems.append(f"{where} is required (pass {where}=... or set {env})")
        elif item["type"] == "extra_forbidden":
            problems.append(f"{where} is not a setting of ClientBalanceSettings")
        elif not item["loc"]:  # a check across fields: its message names the values
            problems.append(message)
        elif item["loc"][0] == "kafka":  # librdkafka values may be secrets: name the keys only
            keys = sorted(item["input"]) if isinstance(item.get("input"), dict) else "..."
            problems.append(f"kafka (keys {keys}) is not allowed: {message}")
        elif item["loc"][0] in _SECRET_FIELDS:
            problems.append(f"{where} is not allowed: {message}")
        else:
            problems.append(f"{where}={item.get('input')!r} is not allowed: {message}")
    return "invalid ClientBalanceSettings: " + "; ".join(problems)
