"""Checks behind ``ClientBalanceSettings``: the ``kafka`` values, and the buffer bound.

Kept apart from the model so that the one rule that matters most here, no secret in any
message, is read in one place (with ``_settings_model._problem``, which never echoes a
``kafka`` value or a secret field's).
"""

from __future__ import annotations

from typing import Any

from client_balance._secrets import CALLBACK_KEYS, SecretStr, is_secret_key, is_secret_value

__all__ = ["check_buffered_bytes", "kafka_values"]

_MIN_BUFFERED_BYTES = 64 * 1024
_MAX_BUFFERED_BYTES = 64 * 1024**3  # a typo in units, not a real bound, above this


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
            checked[key] = SecretStr(str(item)) if is_secret_key(key) else item
    return checked
