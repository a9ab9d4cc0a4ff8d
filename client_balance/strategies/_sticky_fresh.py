"""The sticky assignors on a fresh group: equal subscriptions and nobody holding anything.

Then the constrained path (``_sticky_constrained``) keeps nothing, takes no rack into account,
and its round robin deals partition ``i`` of all partitions, in (topic, partition) order, to
member ``i mod N`` of the members sorted by id: the first ``T % N`` members get ``maxQuota``.
Nothing is transferring either, so ``cooperative-sticky`` gives the same answer as ``sticky``.

This module computes that deal directly: without settling claims that do not exist, without
the quota bookkeeping, and with every member's partitions built in the list they stay in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import product, repeat

from client_balance.keys import TopicPartition
from client_balance.strategies._base import (
    Assignment,
    Member,
    PartitionRacks,
    all_partitions,
)
from client_balance.strategies._javahash import java_hash_order
from client_balance.strategies._sticky_group import sorted_members_by_id

__all__ = ["assign_fresh", "deal"]

# A fresh group is dealt member by member only if each step builds this many partitions.
_PARTITIONS_PER_STEP = 16


def assign_fresh(
    counts: Mapping[str, int],
    members: Sequence[Member],
    partition_racks: PartitionRacks | None,
) -> Assignment | None:
    """The sticky answer for a fresh group with equal subscriptions; None if it is not fresh.

    ``counts`` are the subscribed topics with their partition counts, in name order. A group
    where some member holds (or claims) a partition, or where racks may matter, is not fresh.
    The members come back in Java's hash order, as on the constrained path.
    """
    if any(member.owned for member in members):
        return None
    if partition_racks and any(member.rack for member in members):
        return None
    ids = [member.id for member in sorted_members_by_id(members)]
    dealt = dict(zip(ids, deal(counts, len(ids)), strict=True))
    return {member_id: dealt[member_id] for member_id in java_hash_order(ids)}


def deal(counts: Mapping[str, int], width: int) -> list[list[TopicPartition]]:
    """Partition ``i`` of all (topics in order) to member ``i mod width``: one list per member.

    That is ``all_partitions(counts)[rank::width]`` for each rank; with few distinct topic
    shapes each member's partitions are instead built where they will stay (``_dealt``).
    """
    if width == 0:
        return []
    dealt = _dealt(counts, width)
    if dealt is not None:
        return dealt
    every = all_partitions(counts.items())
    return [every[rank::width] for rank in range(width)]


def _dealt(counts: Mapping[str, int], width: int) -> list[list[TopicPartition]] | None:
    """Partition i of all (topics in order) to member i mod ``width``, built member by member.

    Built as ``all_partitions(counts)[rank::width]`` would be, but each member's partitions
    are made where they will stay: a million tuples are not made in one order and then read
    in another, scattered (which costs a cache miss each). Consecutive topics with the same
    count, a multiple of ``width``, give every member the same partition numbers, so one
    ``product`` serves them all; None if that would take more steps than it saves.
    """
    segments: list[tuple[list[str], int, int]] = []  # topics, their count, first index mod width
    offset = 0
    for topic, count in counts.items():
        shift = offset % width
        if segments and segments[-1][1] == count and segments[-1][2] == shift:
            segments[-1][0].append(topic)
        else:
            segments.append(([topic], count, shift))
        offset += count
    if len(segments) * width * _PARTITIONS_PER_STEP > offset:
        return None
    dealt = []
    for rank in range(width):
        partitions: list[TopicPartition] = []
        for topics, count, shift in segments:
            first = (rank - shift) % width
            if first < count:
                partitions += map(
                    tuple.__new__,
                    repeat(TopicPartition),
                    product(topics, range(first, count, width)),
                )
        dealt.append(partitions)
    return dealt
