"""Kafka's ``RangeAssignor`` (``"range"``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from client_balance.keys import TopicPartition
from client_balance.strategies._base import (
    Assignment,
    Member,
    PartitionRacks,
    sorted_members,
    subscribed_partition_counts,
)

__all__ = ["RangeStrategy"]


class RangeStrategy:
    """Per topic, contiguous runs of partitions, as Kafka's ``RangeAssignor``.

    For each topic the subscribers are sorted (static members first by ``instance_id``, then by
    member id, comparing as Java strings); with ``P`` partitions and ``C`` subscribers each gets
    ``P // C`` and the first ``P % C`` one more. Topics with the same partition count and the
    same subscribers are co-partitioned: every member gets the same partition numbers of each.
    Balance is per topic only: the extras of every topic go to the first members.

    Two topics of 3 partitions, C0 and C1 subscribing both::

        member  t0        t1
        C0      t0p0 p1   t1p0 p1     (4 partitions)
        C1      t0p2      t1p2        (2 partitions)

    ``partition_racks`` is accepted for interface compatibility; rack-aware placement
    (KIP-881) is not applied yet, so racks never change the answer.
    """

    name = "range"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        """Assign each topic's partitions in contiguous runs to its sorted subscribers."""
        ordered = sorted_members(members)
        assignment: Assignment = {member.id: [] for member in ordered}
        for topic, count in subscribed_partition_counts(partitions, ordered).items():
            subscribers = [member.id for member in ordered if topic in member.topics]
            share, extra = divmod(count, len(subscribers))
            start = 0
            for index, member_id in enumerate(subscribers):
                length = share + (1 if index < extra else 0)
                assignment[member_id].extend(
                    TopicPartition(topic, partition) for partition in range(start, start + length)
                )
                start += length
        return assignment
