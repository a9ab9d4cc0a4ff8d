"""Partition identity: ``TopicPartition``, ``PartitionKey`` and bootstrap offsets.

A partition key is TubeMQ's ``"<leaderBrokerId>:<topic>:<partitionId>"``, e.g. ``"1:orders:3"``.
In Kafka a partition's leader moves, so the identity is ``(topic, partition)``: the broker part
is the leader seen at the last metadata query and is informational only. Every API that takes a
key also takes ``"orders:3"`` and a :class:`TopicPartition`. Kafka forbids ``:`` in topic names,
which keeps parsing unambiguous.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from client_balance.errors import ConfigError, InvalidOffsetError, InvalidPartitionKeyError

__all__ = [
    "NO_LEADER",
    "RESUME_OFFSET",
    "PartitionKey",
    "TopicPartition",
    "check_bootstrap_offset",
    "check_topic_name",
    "to_topic_partition",
]

RESUME_OFFSET = -1
"""Bootstrap offset meaning "resume from the group's committed offset, else start_position"."""

NO_LEADER = -1
"""Broker id of a key whose partition had no leader at the last metadata query."""

_TOPIC_MAX_LENGTH = 249
_TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]+")
# Decimal digits only: int() would also take "+3", " 3", "3_0" and "٣", none of which is a key.
_DIGITS = re.compile(r"[0-9]+")
_BROKER_ID = re.compile(r"-1|[0-9]+")
_WITH_BROKER, _WITHOUT_BROKER = 3, 2  # fields of "1:orders:3" and of "orders:3"
# Kafka's partition and broker ids are int32 and its offsets int64: a larger one failed only at
# first use, as a bare OverflowError out of confluent-kafka, far from the key that held it.
_MAX_PARTITION = _MAX_BROKER_ID = 2**31 - 1
_MAX_OFFSET = 2**63 - 1


class TopicPartition(NamedTuple):
    """A Kafka partition: ``(topic, partition)``. Orders by topic, then partition number."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}"


def check_topic_name(topic: object) -> str:
    """Return ``topic`` if it is a legal Kafka topic name, else raise :class:`ConfigError`.

    Kafka allows 1 to 249 characters of ``[A-Za-z0-9._-]`` and neither ``"."`` nor ``".."``.
    """
    if not isinstance(topic, str):
        raise ConfigError(f"topic name must be a string, got {topic!r} ({type(topic).__name__})")
    if not topic or len(topic) > _TOPIC_MAX_LENGTH:
        raise ConfigError(
            f"topic name {topic!r} has {len(topic)} characters; Kafka allows 1 to "
            f"{_TOPIC_MAX_LENGTH}"
        )
    if topic in {".", ".."} or not _TOPIC_CHARS.fullmatch(topic):
        raise ConfigError(
            f"topic name {topic!r} is not allowed; Kafka topic names use only letters, digits, "
            "'.', '_' and '-', and are neither '.' nor '..'"
        )
    return topic


@dataclass(frozen=True, order=False)
class PartitionKey:
    """TubeMQ's partition key. Equal keys name the same ``(topic, partition)``.

    ``broker_id`` is the leader at the last metadata query (:data:`NO_LEADER` when there was
    none, ``None`` when the key was written without one); it takes no part in equality, so a
    key with a stale leader still finds its partition.

    >>> key = PartitionKey.parse("1:orders:3")
    >>> key.topic, key.partition, key.broker_id, str(key)
    ('orders', 3, 1, '1:orders:3')
    >>> PartitionKey.parse("orders:3") == key
    True
    """

    topic: str
    partition: int
    broker_id: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_topic_name(self.topic)
        if not _is_partition(self.partition):
            raise InvalidPartitionKeyError(
                f"partition id {self.partition!r} of topic {self.topic!r} is not allowed; "
                f"partition ids are integers 0 to {_MAX_PARTITION}",
                key=_plain((self.topic, self.partition)),
            )
        if self.broker_id is not None and (
            type(self.broker_id) is not int or not NO_LEADER <= self.broker_id <= _MAX_BROKER_ID
        ):
            raise InvalidPartitionKeyError(
                f"broker id {self.broker_id!r} of partition {self.topic}:{self.partition} is not "
                f"allowed; broker ids are integers 0 to {_MAX_BROKER_ID} (or {NO_LEADER} for "
                "'no leader')",
                key=_plain((self.broker_id, self.topic, self.partition)),
            )

    @classmethod
    def parse(cls, key: object) -> PartitionKey:
        """Parse ``"1:orders:3"`` or ``"orders:3"``; raise :class:`InvalidPartitionKeyError`."""
        if isinstance(key, PartitionKey):
            return key
        if isinstance(key, TopicPartition):
            return cls(key.topic, key.partition)
        if not isinstance(key, str):
            raise InvalidPartitionKeyError(
                f"partition key must be a string like '1:orders:3' or 'orders:3', a "
                f"TopicPartition or a PartitionKey, got {key!r} ({type(key).__name__})",
                key=_plain(key),
            )
        parts = key.split(":")
        if (
            len(parts) == _WITH_BROKER
            and _BROKER_ID.fullmatch(parts[0])
            and _DIGITS.fullmatch(parts[2])
        ):
            broker: int | None = int(parts[0])
            topic, partition = parts[1], parts[2]
        elif len(parts) == _WITHOUT_BROKER and _DIGITS.fullmatch(parts[1]):
            broker = None
            topic, partition = parts
        else:
            raise InvalidPartitionKeyError(
                f"partition key {key!r} does not parse; expected "
                "'<brokerId>:<topic>:<partition>' (e.g. '1:orders:3') or '<topic>:<partition>' "
                "(e.g. 'orders:3') with decimal ids",
                key=_plain(key),
            )
        try:
            return cls(topic, int(partition), broker)
        except ConfigError as error:  # a topic name, or an id out of range
            raise InvalidPartitionKeyError(
                f"partition key {key!r} does not parse: {error}", key=_plain(key)
            ) from None

    @property
    def topic_partition(self) -> TopicPartition:
        """The partition's identity."""
        return TopicPartition(self.topic, self.partition)

    def with_broker(self, broker_id: int) -> PartitionKey:
        """The same partition with the leader seen now."""
        return PartitionKey(self.topic, self.partition, broker_id)

    def __str__(self) -> str:
        if self.broker_id is None:
            return f"{self.topic}:{self.partition}"
        return f"{self.broker_id}:{self.topic}:{self.partition}"


def to_topic_partition(key: str | PartitionKey | TopicPartition) -> TopicPartition:
    """The identity of any accepted form of key."""
    if isinstance(key, TopicPartition):
        check_topic_name(key.topic)
        if not _is_partition(key.partition):
            raise InvalidPartitionKeyError(
                f"partition id {key.partition!r} of {key!r} is not allowed; partition ids are "
                f"integers 0 to {_MAX_PARTITION}",
                key=_plain(key),
            )
        return key
    return PartitionKey.parse(key).topic_partition


def check_bootstrap_offset(offset: object) -> int:
    """Return ``offset`` if it is -1 (resume committed) or an absolute offset 0 to 2**63-1."""
    if type(offset) is not int or not RESUME_OFFSET <= offset <= _MAX_OFFSET:
        raise InvalidOffsetError(
            f"bootstrap offset {offset!r} is not allowed; use -1 to resume from the group's "
            f"committed offset, or an absolute offset 0 to {_MAX_OFFSET}",
            offset=_plain(offset),
        )
    return offset


def _is_partition(partition: object) -> bool:
    return type(partition) is int and 0 <= partition <= _MAX_PARTITION


def _plain(value: Any) -> Any:
    """``value`` as an error keeps it: itself if plain data, else its repr (so it pickles)."""
    if isinstance(value, str | int | float | bytes) or value is None:
        return value
    if isinstance(value, tuple) and all(isinstance(part, str | int) for part in value):
        return value  # a TopicPartition or PartitionKey of plain parts
    return repr(value)
