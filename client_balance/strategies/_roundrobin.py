"""Kafka's ``RoundRobinAssignor`` (``"roundrobin"``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from client_balance.keys import TopicPartition
from client_balance.strategies._base import (
    Assignment,
    Member,
    PartitionRacks,
    paused_gc,
    sorted_members,
    subscribed_partition_counts,
)

__all__ = ["RoundRobinStrategy"]


class RoundRobinStrategy:
    """One cycle over all partitions of all topics, as Kafka's ``RoundRobinAssignor``.

    Partitions are taken topic by topic (topics sorted by name, partitions by number); members
    are sorted as Kafka sorts them and visited in a circle. Each partition goes to the next
    member in the circle that subscribes its topic; members that do not are skipped. Equal
    subscriptions give counts that differ by at most one; unequal ones can be very uneven.

    Kafka's own example: t0 has 1 partition, t1 2 and t2 3; C0 subscribes t0, C1 t0 and t1,
    C2 all three::

        member  partitions
        C0      t0p0
        C1      t1p0
        C2      t1p1 t2p0 t2p1 t2p2

    Racks are ignored, as in Kafka.
    """

    name = "roundrobin"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        """Deal the sorted partitions round the sorted members, skipping non-subscribers."""
        ordered = sorted_members(members)
        assignment: Assignment = {member.id: [] for member in ordered}
        circle = [(member.topics, assignment[member.id]) for member in ordered]
        size = len(circle)
        cursor = 0
        counts = subscribed_partition_counts(partitions, ordered)
        with paused_gc(sum(counts.values())):
            for topic, count in counts.items():
                for partition in range(count):
                    # Some member subscribes the topic (that is how it got here), so this stops.
                    while topic not in circle[cursor][0]:
                        cursor = (cursor + 1) % size
                    circle[cursor][1].append(TopicPartition(topic, partition))
                    cursor = (cursor + 1) % size
        return assignment
