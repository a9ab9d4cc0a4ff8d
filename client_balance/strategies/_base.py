"""What every strategy shares: ``Member``, the ``Strategy`` protocol, Java's ordering and hash.

Strategies are pure: no clock, no randomness, no reliance on dict or set iteration order, no
state between calls. Every member of a group computes the same answer from the same input, or
the group splits.
"""

from __future__ import annotations

import codecs
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from typing import Protocol

from client_balance._gc import paused_gc
from client_balance.errors import ConfigError
from client_balance.keys import TopicPartition

__all__ = [
    "Assignment",
    "Member",
    "PartitionRacks",
    "Strategy",
    "all_partitions",
    "java_string_hash",
    "kafka_member_order",
    "paused_gc",
    "subscribed_partition_counts",
    "subscribed_topics",
]

Assignment = dict[str, list[TopicPartition]]
"""Member id -> its partitions, sorted by (topic, partition); every member id is a key."""

PartitionRacks = Mapping[TopicPartition, frozenset[str]]
"""Partition -> racks of its replicas (for rack-aware strategies)."""

# Java orders members by UTF-16 (``kafka_member_order``). Python imports a codec's module on its
# first use: done here, at import, rather than by the first assignment of a start, on the way to
# its first message.
codecs.lookup("utf-16-be")

_INT32 = 1 << 32
_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class Member:
    """A group member as a strategy sees it.

    ``owned`` and ``generation`` are what the member held after the previous round (sticky
    strategies keep them); ``instance_id`` makes it a static member, ordered before dynamic
    ones as Kafka does; ``rack`` is its ``client.rack``.
    """

    id: str
    topics: frozenset[str]
    owned: tuple[TopicPartition, ...] = ()
    generation: int = -1
    rack: str | None = None
    instance_id: str | None = None
    _sort_key: tuple[int, bytes] = field(init=False, repr=False, compare=False)

    def __init__(  # noqa: PLR0917 - DESIGN.md fixes this positional signature
        self,
        id: str,
        topics: Iterable[str],
        owned: Iterable[TopicPartition] = (),
        generation: int = -1,
        rack: str | None = None,
        instance_id: str | None = None,
    ) -> None:
        if not isinstance(id, str) or not id:
            raise ConfigError(f"member id {id!r} is not allowed; use a non-empty string")
        if isinstance(topics, str):
            raise ConfigError(
                f"topics of member {id!r} must be a collection of names, not the string {topics!r}"
            )
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "topics", frozenset(topics))
        object.__setattr__(self, "owned", tuple(TopicPartition(*tp) for tp in owned))
        object.__setattr__(self, "generation", generation)
        object.__setattr__(self, "rack", rack or None)  # Kafka treats "" as no rack
        object.__setattr__(self, "instance_id", instance_id)
        object.__setattr__(self, "_sort_key", kafka_member_order(id, instance_id))


class Strategy(Protocol):
    """An assignment strategy: a name and a pure ``assign``."""

    @property
    def name(self) -> str:
        """The registry name."""
        ...

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        """Map every member id to its partitions; topics missing from ``partitions`` are ignored."""
        ...


def kafka_member_order(member_id: str, instance_id: str | None) -> tuple[int, bytes]:
    """Sort key of Kafka's ``MemberInfo.compareTo``: static members by instance id, then ids.

    Java compares strings by UTF-16 code unit; UTF-16-BE bytes compare the same way, which
    differs from Python's code-point order only for characters outside the BMP.
    """
    if instance_id is not None:
        return (0, instance_id.encode("utf-16-be"))
    return (1, member_id.encode("utf-16-be"))


def all_partitions(topics: Iterable[tuple[str, int]]) -> list[TopicPartition]:
    """Every partition of ``(topic, count)`` pairs, in that order of topics, partitions ascending.

    Consecutive topics of one partition count come from one ``product``: a million partitions
    are built in C without a Python-level step per topic.
    """
    result: list[TopicPartition] = []
    for count, run in itertools.groupby(topics, key=itemgetter(1)):
        names = [topic for topic, _ in run]
        result.extend(
            map(tuple.__new__, repeat(TopicPartition), itertools.product(names, range(count)))
        )
    return result


def sorted_members(members: Sequence[Member]) -> list[Member]:
    """Members in Kafka's order; refuses duplicate ids, which would make the answer ambiguous."""
    ordered = sorted(members, key=lambda member: member._sort_key)
    # Over the ids, not the neighbours of that order: a static member sorts by its instance id,
    # so an id given twice, once static, was not next to itself and passed.
    ids = sorted(member.id for member in ordered)
    for before, after in itertools.pairwise(ids):
        if before == after:
            raise ConfigError(f"member id {before!r} appears twice; member ids must be unique")
    return ordered


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: 32-bit signed, over UTF-16 code units."""
    value = 0
    if text.isascii():
        for char in text.encode():
            value = (31 * value + char) % _INT32
    else:
        data = text.encode("utf-16-be")
        for index in range(0, len(data), 2):
            value = (31 * value + (data[index] << 8 | data[index + 1])) % _INT32
    return value - _INT32 if value > _INT32_MAX else value


def subscribed_topics(members: Sequence[Member]) -> tuple[frozenset[str], bool]:
    """Every topic some member subscribes, and whether all members subscribe the same topics.

    One pass for both: a member whose topics equal the first one's adds nothing to the union,
    and with two thousand members of five hundred topics each pass costs 10 ms.
    """
    if not members:
        return frozenset(), True
    first = members[0].topics
    others = [member.topics for member in members if member.topics != first]
    return first.union(*others), not others


def subscribed_partition_counts(
    partitions: Mapping[str, int],
    members: Sequence[Member],
    topics: Iterable[str] | None = None,
) -> dict[str, int]:
    """Topics that some member subscribes and that have >= 1 partition, sorted by name.

    ``topics``, if given, are those topics (as :func:`subscribed_topics` gives them).
    """
    wanted = subscribed_topics(members)[0] if topics is None else topics
    counts = {}
    for topic in sorted(wanted):
        count = partitions.get(topic, 0)
        if type(count) is not int or count < 0:
            raise ConfigError(
                f"partition count {count!r} of topic {topic!r} is not allowed; use an int >= 0"
            )
        if count > 0:
            counts[topic] = count
    return counts
