"""Kafka's ``sticky`` and ``cooperative-sticky`` strategies.

Both compute the same target: as balanced as possible first, then keeping as many previously
owned partitions as that allows, then (with racks) matching racks. The constrained path serves
groups whose members all subscribe the same topics, the general path the rest
(``_sticky_constrained``, ``_sticky_general``), a fresh one of the former a plain deal
(``_sticky_fresh``); ``_sticky_group`` settles conflicting claims.

``Member.owned`` and ``Member.generation`` are what a member held after the previous round.
For ``sticky`` they stand for what Kafka's eager ``StickyAssignor`` keeps in its user data; for
``cooperative-sticky`` for the subscription's ``ownedPartitions`` and ``generationId``. A
generation of -1 means "none" (a new member).

Where Kafka's answer hangs on Java's hash order (which over-full member keeps a spare slot,
which of several equal claims came first) we compute that order from the member ids
(``_javahash``), so the answer is Kafka's and does not depend on the order of ``members``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from client_balance.keys import TopicPartition
from client_balance.strategies._base import (
    Assignment,
    Member,
    PartitionRacks,
    paused_gc,
    subscribed_partition_counts,
    subscribed_topics,
)
from client_balance.strategies._sticky_constrained import assign_constrained
from client_balance.strategies._sticky_fresh import assign_fresh
from client_balance.strategies._sticky_general import assign_general
from client_balance.strategies._sticky_group import StickyGroup

__all__ = ["CooperativeStickyStrategy", "StickyStrategy"]


def _sticky_target(
    partitions: Mapping[str, int],
    members: Sequence[Member],
    partition_racks: PartitionRacks | None,
) -> tuple[Assignment, dict[TopicPartition, str] | None]:
    """The eager target and, on the constrained path, the partitions changing owner."""
    topics, equal = subscribed_topics(members)
    counts = subscribed_partition_counts(partitions, members, topics)
    with paused_gc(sum(counts.values())):
        fresh = assign_fresh(counts, members, partition_racks) if equal else None
        if fresh is not None:
            return fresh, {}
        group = StickyGroup.settle(counts, members, partition_racks, subscriptions_equal=equal)
        if not group.hash_order:
            return {}, {}
        if group.subscriptions_equal:
            return assign_constrained(group)
        return assign_general(group), None


class StickyStrategy:
    """Kafka's ``StickyAssignor``: balanced, and keeps what members held.

    C0 and C1 subscribe t0, t1 (3 partitions each); then C2 joins, having held nothing:

    ====  ====================  ==============================
    ..    round 1               C2 joins (round 2)
    ====  ====================  ==============================
    C0    t0p0 t0p2 t1p1        t0p0 t1p1
    C1    t0p1 t1p0 t1p2        t0p1 t1p0
    C2    -                     t0p2 t1p2
    ====  ====================  ==============================

    Round 1 deals the partitions round robin. In round 2 each owner keeps ``minQuota = 2`` of
    its partitions, lowest partition numbers first (over topics, so a member keeps a spread),
    and the rest go to C2: two partitions move, the least possible.
    """

    name = "sticky"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        """Kafka's eager sticky assignment of ``partitions`` to ``members``."""
        assignment, _ = _sticky_target(partitions, members, partition_racks)
        return assignment


class CooperativeStickyStrategy:
    """Kafka's ``CooperativeStickyAssignor``: the sticky target, one round at a time.

    A partition that changes owner is first only taken away: it stays unassigned in this round
    (its owner stops consuming it and commits), and the next round gives it to its new owner.
    Nobody stops consuming partitions that do not move. Same group as for ``sticky``:

    ====  ====================  ==================  =====================
    ..    round 1               C2 joins            the round after
    ====  ====================  ==================  =====================
    C0    t0p0 t0p2 t1p1        t0p0 t1p1           t0p0 t1p1
    C1    t0p1 t1p0 t1p2        t0p1 t1p0           t0p1 t1p0
    C2    -                     -                   t0p2 t1p2
    ====  ====================  ==================  =====================

    Feed each result back as the members' ``owned`` (with a higher ``generation``) and the
    group reaches the sticky target; no partition is ever taken from one member and given to
    another in the same round.
    """

    name = "cooperative-sticky"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        """The round's assignment: the sticky target less the partitions changing owner."""
        assignment, transferring = _sticky_target(partitions, members, partition_racks)
        if transferring is None:
            transferring = _changing_owner(members, assignment)
        withheld: dict[str, set[TopicPartition]] = {}
        for partition, new_owner in transferring.items():
            withheld.setdefault(new_owner, set()).add(partition)
        for member_id, partitions_withheld in withheld.items():
            assignment[member_id] = [
                tp for tp in assignment[member_id] if tp not in partitions_withheld
            ]
        return assignment


def _changing_owner(members: Sequence[Member], assignment: Assignment) -> dict[TopicPartition, str]:
    """Partitions given to a member that did not claim them while another claimant loses them."""
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member in members:
        claimed = set(member.owned)
        assigned = assignment.get(member.id, [])
        added.update((tp, member.id) for tp in assigned if tp not in claimed)
        revoked.update(claimed.difference(assigned))
    return {tp: owner for tp, owner in added.items() if tp in revoked}
