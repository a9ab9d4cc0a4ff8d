"""Parsers of the data source's option values, each refusing a bad value by name.

Every parser takes the option's name as Spark spells it (for the message) and its text, and
raises :class:`~client_balance.errors.ConfigError` naming the option, the value (cut short: an
option may be megabytes of JSON) and what is allowed. None of them sees a ``kafka.`` option.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from client_balance.errors import ConfigError
from client_balance.keys import TopicPartition, check_topic_name

__all__ = [
    "COMMITTED",
    "EARLIEST",
    "LATEST",
    "MAX_LONG",
    "NAMED",
    "Offsets",
    "assigned_partitions",
    "flag",
    "offsets",
    "pattern",
    "positive_int",
    "refuse_earliest_ending",
    "shown",
    "timestamp",
    "timestamps",
    "uses_committed",
    "whole_number",
]

EARLIEST, LATEST, COMMITTED = -2, -1, -3
NAMED: Final = {"earliest": EARLIEST, "latest": LATEST, "committed": COMMITTED}
MAX_LONG: Final = 2**63 - 1
"""Kafka offsets, timestamps and Spark's read limits are Java longs."""
_MAX_PARTITION: Final = 2**31 - 1
_SHOWN_CHARS: Final = 80

Offsets = dict[str, dict[int, int]] | int
"""One value for every partition, or per topic -> partition -> value."""


def shown(value: str) -> str:
    """``value``'s repr for a message, cut short: an option may be megabytes of JSON."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else f"{text[: _SHOWN_CHARS - 5]}...{text[-2:]}"


def whole_number(text: str, most: int) -> int | None:
    """``text`` as a number from 0 to ``most`` in ASCII digits, else None."""
    text = text.strip()
    if not (text.isascii() and text.isdecimal()) or len(text) > len(str(most)):
        return None
    number = int(text)
    return number if number <= most else None


def positive_int(name: str, value: str | None, default: int | None, most: int) -> int | None:
    """A whole number from 1 to ``most``; ``default`` when the option is not given."""
    if value is None:
        return default
    number = whole_number(value, most)
    if number is None or number < 1:
        raise ConfigError(
            f"{name}={shown(value)} is not allowed; use a whole number from 1 to {most}"
        )
    return number


def flag(name: str, value: str | None, *, default: bool) -> bool:
    """``true`` or ``false`` (any case)."""
    if value is None:
        return default
    if value.strip().lower() in {"true", "false"}:
        return value.strip().lower() == "true"
    raise ConfigError(f"{name}={shown(value)} is not allowed; use true or false")


def _json_object(name: str, value: str, example: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):  # RecursionError: thousands of nested brackets
        parsed = None
    if not isinstance(parsed, dict) or not parsed:
        raise ConfigError(f"{name}={shown(value)} is not allowed; use JSON such as {example}")
    return parsed


def _partition(name: str, topic: str, number: object) -> int:
    text = number if isinstance(number, str) else ""
    partition = whole_number(text, _MAX_PARTITION)
    if partition is None:
        shown_number = shown(number) if isinstance(number, str) else type(number).__name__
        raise ConfigError(
            f"{name}: {shown(topic)} partition {shown_number} is not allowed; use partition "
            f"numbers from 0 to {_MAX_PARTITION}"
        )
    return partition


def _per_partition(
    name: str, value: str, example: str, *, noun: str, least: int, allowed: str
) -> dict[str, dict[int, int]]:
    """``{"topic": {"partition": number}}`` with numbers from ``least`` to :data:`MAX_LONG`."""
    answer: dict[str, dict[int, int]] = {}
    for topic, per_partition in _json_object(name, value, example).items():
        if not isinstance(per_partition, dict):
            raise ConfigError(
                f"{name}: topic {shown(topic)} needs an object of partition -> {allowed}"
            )
        answer[topic] = {}
        for number, found in per_partition.items():
            partition = _partition(name, topic, number)
            # type(), not isinstance(): JSON's true and false are bools, which are ints.
            if type(found) is not int or not least <= found <= MAX_LONG:
                raise ConfigError(
                    f"{name}: {shown(topic)} partition {partition} {noun} "
                    f"{found if type(found) is int else type(found).__name__} is not allowed; "
                    f"use {allowed}"
                )
            answer[topic][partition] = found
    return answer


def offsets(name: str, value: str | None, default: int, allowed: set[str]) -> Offsets:
    """A name of ``allowed`` as its sentinel, or JSON of partition -> offset or sentinel."""
    if value is None:
        return default
    text = value.strip()
    if text.lower() in allowed:
        return NAMED[text.lower()]
    example = '{"orders": {"0": 23, "1": -2}} (-2 earliest, -1 latest, -3 committed)'
    if not text.startswith("{"):
        raise ConfigError(
            f"{name}={shown(value)} is not allowed; use {', '.join(sorted(allowed))} or JSON "
            f"such as {example}"
        )
    return _per_partition(
        name, text, example, noun="offset", least=COMMITTED, allowed="offsets >= 0, or -2, -1, -3"
    )


def timestamp(name: str, value: str | None) -> int | None:
    """One timestamp in ms since the epoch (a whole number), or None when not given."""
    if value is None:
        return None
    stamp = whole_number(value, MAX_LONG)
    if stamp is None:
        raise ConfigError(
            f"{name}={shown(value)} is not allowed; use a timestamp in milliseconds since the "
            f"epoch, a whole number from 0 to {MAX_LONG}"
        )
    return stamp


def timestamps(name: str, value: str | None) -> dict[str, dict[int, int]] | None:
    """JSON of topic -> partition -> timestamp in ms, or None when not given."""
    if value is None:
        return None
    example = '{"orders": {"0": 1700000000000}}'
    return _per_partition(
        name, value, example, noun="timestamp", least=0, allowed="ms since the epoch, >= 0"
    )


def assigned_partitions(name: str, value: str) -> tuple[TopicPartition, ...]:
    """``{"orders": [0, 1], "stock": [2]}`` as sorted partitions (each once)."""
    example = '{"orders": [0, 1], "stock": [2]}'
    chosen: set[TopicPartition] = set()
    for topic, numbers in _json_object(name, value, example).items():
        try:
            check_topic_name(topic)
        except ConfigError as error:
            raise ConfigError(f"{name}: {error}") from None
        if not isinstance(numbers, list) or not numbers:
            raise ConfigError(
                f"{name}: topic {shown(topic)} needs a list of partition numbers, such as [0, 1]"
            )
        for number in numbers:
            if type(number) is not int or not 0 <= number <= _MAX_PARTITION:
                shown_number = number if type(number) is int else type(number).__name__
                raise ConfigError(
                    f"{name}: {shown(topic)} partition {shown_number} is not allowed; use "
                    f"partition numbers from 0 to {_MAX_PARTITION}"
                )
            chosen.add(TopicPartition(topic, number))
    return tuple(sorted(chosen))


def pattern(name: str, value: str) -> str:
    """A regular expression (Python's ``re``) that compiles; matched against whole names."""
    if not value.strip():
        raise ConfigError(f"{name}={shown(value)} is not allowed; use a regular expression")
    try:
        re.compile(value)
    except (re.error, OverflowError, RecursionError) as error:  # Overflow: too big to compile
        raise ConfigError(
            f"{name}={shown(value)} is not allowed: {str(error)[:_SHOWN_CHARS]}; use a regular "
            "expression in Python's re syntax (matched against whole topic names)"
        ) from None
    return value


def uses_committed(chosen: Offsets) -> bool:
    """Whether ``chosen`` asks for the group's committed offset (-3) anywhere."""
    if isinstance(chosen, int):
        return chosen == COMMITTED
    return any(offset == COMMITTED for per in chosen.values() for offset in per.values())


def refuse_earliest_ending(ending: Offsets) -> None:
    """An ending offset of -2 reads nothing: Spark's own source refuses it, and so do we."""
    if not isinstance(ending, dict):
        return
    for topic, per_partition in sorted(ending.items()):
        for partition, offset in sorted(per_partition.items()):
            if offset == EARLIEST:
                raise ConfigError(
                    f"endingOffsets: {topic!r} partition {partition} ends at -2 (earliest), "
                    "which reads nothing; use an offset, -1 (latest) or -3 (committed)"
                )
