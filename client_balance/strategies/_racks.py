"""Rack awareness shared by the strategies that follow KIP-881 (range, sticky, cooperative-sticky).

A member's rack is its ``client.rack`` (``Member.rack``); a partition's racks are the racks of
*all* its replicas, offline and out-of-ISR ones included, as Kafka counts them
(``PartitionRacks``). A partition missing from the mapping has no known rack. Partition racks
are used as given: Kafka drops replicas without a rack, so leave those out of the mapping.
Member racks ``None`` and ``""`` both mean "no rack", as in Kafka.

Kafka's switch (``AbstractPartitionAssignor.useRackAwareAssignment``) decides whether rack
matching is worth doing at all::

    no member has a rack                                   -> no
    no member rack is a rack of any partition (disjoint)   -> no
    every partition is on every rack (all rack sets equal) -> no: matching cannot help
    otherwise                                              -> yes

The sticky assignors apply it once to the whole group (every member, every partition of a
subscribed topic); range applies it per topic (that topic's subscribers and partitions) and
turns rack matching on if any topic needs it. When it is on, a member without a rack matches
every partition (:func:`rack_matches`).
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from client_balance.keys import TopicPartition
from client_balance.strategies._base import PartitionRacks

__all__ = [
    "NO_RACKS",
    "declared_racks",
    "rack_matches",
    "racks_can_help",
    "replica_racks",
    "use_rack_aware",
]

NO_RACKS: frozenset[str] = frozenset()
"""The racks of a partition nobody placed on a rack."""


def declared_racks(member_racks: Iterable[str | None]) -> frozenset[str]:
    """The distinct racks among ``member_racks``, leaving out ``None`` and ``""`` (no rack)."""
    return frozenset(rack for rack in member_racks if rack)


def replica_racks(
    partition_racks: PartitionRacks | None, partition: TopicPartition
) -> frozenset[str]:
    """The racks of ``partition``'s replicas; empty when the mapping is absent or lacks it."""
    if partition_racks is None:
        return NO_RACKS
    racks = partition_racks.get(partition)
    # frozenset() of a frozenset is the same object, so this costs nothing for well-typed input
    # and keeps set equality meaningful if a caller passed lists.
    return NO_RACKS if racks is None else frozenset(racks)


def racks_can_help(member_racks: Set[str], racks_per_partition: Iterable[Set[str]]) -> bool:
    """Kafka's switch on prepared data (the rule is in the module docstring).

    ``member_racks`` as :func:`declared_racks` gives them; ``racks_per_partition`` holds one
    rack set per partition, as :func:`replica_racks` gives them.
    """
    if not member_racks:
        return False
    per_partition = list(racks_per_partition)
    every_rack: frozenset[str] = NO_RACKS.union(*per_partition)
    if member_racks.isdisjoint(every_rack):
        return False
    return any(racks != every_rack for racks in per_partition)


def use_rack_aware(
    member_racks: Iterable[str | None],
    partition_racks: PartitionRacks | None,
    partitions: Iterable[TopicPartition],
) -> bool:
    """Whether Kafka would match racks for these members over these partitions.

    ``member_racks`` are the members' ``client.rack`` values (``None``/``""`` for none),
    ``partitions`` the partitions being assigned; their racks come from ``partition_racks``
    (``None``: no rack information, so never). True iff some member has a rack that some
    partition is on, and not every partition is on the same full set of racks. Costs one pass
    over ``partitions``, and none at all when no member has a rack.
    """
    racks_of_members = declared_racks(member_racks)
    if not racks_of_members or partition_racks is None:
        return False
    return racks_can_help(
        racks_of_members, (replica_racks(partition_racks, partition) for partition in partitions)
    )


def rack_matches(member_rack: str | None, racks: Set[str]) -> bool:
    """Whether a member on ``member_rack`` reads a partition on ``racks`` locally.

    A member without a rack matches everything: Kafka never moves it for rack reasons.
    """
    return not member_rack or member_rack in racks
