"""Checks of what users hand the consumer: topics with filters, confirm contexts, group modes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from client_balance._timing import check_seconds
from client_balance.errors import ConfigError, InvalidConfirmContextError
from client_balance.keys import (
    RESUME_OFFSET,
    TopicPartition,
    check_bootstrap_offset,
    check_topic_name,
    to_topic_partition,
)
from client_balance.settings import GroupMode

__all__ = [
    "check_flag",
    "check_wait",
    "parse_context",
    "parse_pins",
    "parse_topics",
    "resolve_mode",
]

MAX_FILTERS_PER_TOPIC = 500  # TubeMQ's limits on filter items
MAX_FILTER_LENGTH = 256
_CONTEXT_PARTS = 4  # <leader>:<topic>:<partition>:<token>
# ASCII digits only: str.isdigit() also takes "²", on which int() raises a bare ValueError.
_MODES = ", ".join(repr(mode.value) for mode in GroupMode)


def resolve_mode(
    source_count: object, node_id: object, mode: object, default: GroupMode | None
) -> GroupMode:
    """The group mode of ``start(topics, source_count, node_id, mode=...)``, or ConfigError.

    As TubeMQ means ``sourceCount``: above 0 it is node mode, else the application decides
    (manual). Elastic groups are asked for by name.
    """
    if type(source_count) is not int or type(node_id) is not int:
        raise ConfigError(f"source_count={source_count!r} and node_id={node_id!r} must be ints")
    chosen = mode if mode is not None else default
    if chosen is None:
        chosen = GroupMode.NODE if source_count > 0 else GroupMode.MANUAL
    if not isinstance(chosen, str) or chosen not in GroupMode.__members__.values():
        raise ConfigError(f"mode={chosen!r} is not allowed; use one of {_MODES}")
    resolved = GroupMode(chosen)
    if resolved is GroupMode.NODE and source_count <= 0:
        raise ConfigError(
            f"mode='node' needs source_count > 0, not {source_count}; a source_count <= 0 "
            "means the application decides (mode='manual')"
        )
    if resolved is GroupMode.NODE and not 0 <= node_id < source_count:
        raise ConfigError(
            f"node_id={node_id} is not allowed with source_count={source_count}; "
            f"use a node id in [0, {source_count - 1}]"
        )
    if resolved is not GroupMode.NODE and (source_count < -1 or node_id < -1):
        raise ConfigError(
            f"source_count={source_count}, node_id={node_id} are not allowed with "
            f"mode={resolved.value!r}: outside node mode use source_count -1 (or 0) and a "
            "node_id of -1 or more"
        )
    if resolved is not GroupMode.NODE and source_count > 0:
        raise ConfigError(
            f"source_count={source_count} is not allowed with mode={resolved.value!r}: "
            f"{resolved.value} groups have no fixed size; leave source_count at -1, or use "
            "mode='node'"
        )
    return resolved


def parse_topics(topics: object) -> dict[str, frozenset[str] | None]:
    """Topic names (list) or name -> filter values (mapping) as name -> frozenset or None."""
    if isinstance(topics, str) or not isinstance(topics, (list, tuple, Mapping)):
        raise ConfigError(
            f"topics={topics!r} is not allowed; give a list of topic names or a mapping of "
            "topic -> set of filter values"
        )
    if not topics:
        raise ConfigError("topics is empty; subscribe to at least one topic")
    parsed: dict[str, frozenset[str] | None] = {}
    items = topics.items() if isinstance(topics, Mapping) else ((t, None) for t in topics)
    for topic, filters in items:
        name = check_topic_name(topic.strip() if isinstance(topic, str) else topic)
        if filters is None:
            parsed[name] = None
            continue
        if not isinstance(filters, set | frozenset | list | tuple) or not all(
            isinstance(value, str) for value in filters
        ):
            raise ConfigError(
                f"filters of topic {name!r} must be a set of strings (or None for no filter), "
                f"not {filters!r}"
            )
        if not filters:
            parsed[name] = None
            continue
        values = frozenset(value.strip() for value in filters)
        if len(values) > MAX_FILTERS_PER_TOPIC:
            raise ConfigError(
                f"topic {name!r} has {len(values)} filter values; at most "
                f"{MAX_FILTERS_PER_TOPIC} are allowed"
            )
        for value in values:
            if not value or len(value) > MAX_FILTER_LENGTH:
                raise ConfigError(
                    f"filter value {value!r} of topic {name!r} is not allowed; use 1 to "
                    f"{MAX_FILTER_LENGTH} characters"
                )
        parsed[name] = values
    return parsed


def parse_context(context: object) -> tuple[TopicPartition, int]:
    """``"<leader>:<topic>:<partition>:<token>"`` -> (partition, token)."""
    parts = context.split(":") if isinstance(context, str) else []
    if len(parts) == _CONTEXT_PARTS and all(parts[1:]):
        leader, topic, number, token = parts
        # str tests instead of regular expressions: this runs at every confirm.
        if (leader == "-1" or _decimal(leader)) and _decimal(number) and _decimal(token):
            return TopicPartition(topic, int(number)), int(token)
    raise InvalidConfirmContextError(
        f"confirm context {context!r} is malformed; pass the confirm_context of a "
        "ConsumeResult (<leader>:<topic>:<partition>:<token>)",
        context=context,
    )


def _decimal(text: str) -> bool:
    """``[0-9]+``: ``isdecimal()`` alone also takes other scripts' digits."""
    return text.isascii() and text.isdecimal()


def parse_pins(pins: Mapping[str, int] | Iterable[str]) -> dict[TopicPartition, int]:
    """Pins given as keys, or keys -> bootstrap offsets (-1 resumes), by partition."""
    if isinstance(pins, str):
        raise ConfigError(
            f"pinned={pins!r} is one string; give a list of partition keys or a mapping of "
            "keys to bootstrap offsets"
        )
    if isinstance(pins, Mapping):
        return {to_topic_partition(k): check_bootstrap_offset(o) for k, o in pins.items()}
    return {to_topic_partition(key): RESUME_OFFSET for key in pins}


def check_wait(name: str, value: object) -> float:
    """A wait in seconds given to a call: a finite number >= 0, else ConfigError naming it."""
    return check_seconds(name, value)


def check_flag(name: str, value: object) -> bool:
    """A yes/no argument: a bool, else ConfigError (a string "False" would read as True)."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name}={value!r} is not allowed; give True or False")
    return value
