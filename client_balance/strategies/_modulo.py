"""Coordination-free rules: ``"modulo"`` (Flink's owner rule) and ``"hash"`` (TubeMQ's example)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from client_balance.keys import TopicPartition
from client_balance.strategies._base import (
    Assignment,
    Member,
    PartitionRacks,
    java_string_hash,
    sorted_members,
    subscribed_partition_counts,
)
from client_balance.strategies._nodes import node_order

__all__ = ["HashStrategy", "ModuloStrategy"]

_INT31_MASK = 0x7FFFFFFF
_UINT32_MASK = 0xFFFFFFFF


def _node_order(members: Sequence[Member]) -> list[Member]:
    # Node ids are numbers: node 10 comes after node 2. Any other ids keep Kafka's order.
    ordered = sorted_members(members)
    if any(member.instance_id is not None for member in ordered):
        return ordered
    by_id = {member.id: member for member in ordered}
    return [by_id[member_id] for member_id in node_order(by_id)]


OwnerRule = Callable[[str, int, int], Iterable[int]]
"""``rule(topic, partition_count, subscriber_count)`` -> owner index of each partition."""


def _assign_by_rule(
    partitions: Mapping[str, int], members: Sequence[Member], rule: OwnerRule
) -> Assignment:
    ordered = _node_order(members)
    assignment: Assignment = {member.id: [] for member in ordered}
    for topic, count in subscribed_partition_counts(partitions, ordered).items():
        owners = [assignment[member.id] for member in ordered if topic in member.topics]
        for partition, owner in enumerate(rule(topic, count, len(owners))):
            owners[owner].append(TopicPartition(topic, partition))
    return assignment


def _flink_owners(topic: str, count: int, size: int) -> Iterable[int]:
    start = ((java_string_hash(topic) * 31) & _INT31_MASK) % size
    return ((start + partition) % size for partition in range(count))


def _tubemq_owners(topic: str, count: int, size: int) -> Iterable[int]:
    return (
        (java_string_hash(f"{topic}:{partition}") & _UINT32_MASK) % size
        for partition in range(count)
    )


class ModuloStrategy:
    """Flink's Kafka owner rule: per topic, modulo with a topic-hash offset (the default).

    Among the ``n`` subscribers of a topic (node ids in numeric order), partition ``p`` goes
    to subscriber ``((javaHash(topic) * 31 & 0x7FFFFFFF) % n + p) % n``, in Java's 32-bit int
    arithmetic. Each topic is balanced (counts differ by at most one), the offset keeps small
    topics from all starting on node 0, and adding partitions never moves existing ones.
    Nothing is sticky when ``n`` changes, and totals across topics can differ by more than one.

    The seeds' ``Order`` (7 partitions, offset ``(76453678 * 31 & 0x7FFFFFFF) % 3 = 2``) and
    ``Stock`` (5 partitions, offset 1) on nodes 0-2::

        node  Order          Stock        total
        0     p1 p4          p2           3
        1     p2 p5          p0 p3        4
        2     p0 p3 p6       p1 p4        5
    """

    name = "modulo"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        """Give partition p of each topic to subscriber (offset(topic) + p) % n."""
        return _assign_by_rule(partitions, members, _flink_owners)


class HashStrategy:
    """TubeMQ's example rule: unsigned ``String.hashCode()`` of ``"topic:partition"`` modulo n.

    Partition ``p`` of ``topic`` goes to subscriber ``(hashCode("topic:p") & 0xFFFFFFFF) % n``
    (node ids in numeric order). It needs no coordination and adding partitions moves nothing,
    but it is not balanced: hashes of neighbouring keys cluster, so 4 partitions on 2 nodes can
    split 3/1 or 4/0.

    Topic ``t`` with 4 partitions on nodes 0 and 1 (``hashCode("t:0")`` = 113,322, even)::

        node  partitions
        0     t:0 t:2
        1     t:1 t:3
    """

    name = "hash"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        """Give each partition to the subscriber its key's unsigned Java hash selects."""
        return _assign_by_rule(partitions, members, _tubemq_owners)
