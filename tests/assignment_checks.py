"""Checks of an assignment that hold whatever the strategy: validity, balance, moves.

Each check returns a list of problems (empty = fine), so a failing test names them all.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from client_balance.keys import TopicPartition
from client_balance.strategies import Assignment, Member


def all_partitions(partitions: Mapping[str, int], members: Sequence[Member]) -> set[TopicPartition]:
    """Every partition of a topic that some member subscribes."""
    wanted = set().union(*(member.topics for member in members))
    return {
        TopicPartition(topic, number)
        for topic, count in partitions.items()
        if topic in wanted
        for number in range(count)
    }


def validity_problems(
    partitions: Mapping[str, int],
    members: Sequence[Member],
    assignment: Mapping[str, Collection[TopicPartition]],
    *,
    may_be_missing: Collection[TopicPartition] = (),
) -> list[str]:
    """A member missing, a partition held twice, unsubscribed, nonexistent or left unassigned.

    ``may_be_missing`` are partitions allowed to stay unassigned (a cooperative round's).
    """
    problems = [f"member {m.id} has no entry" for m in members if m.id not in assignment]
    topics_of = {member.id: member.topics for member in members}
    holders: dict[TopicPartition, list[str]] = {}
    for member_id, held in assignment.items():
        for partition in held:
            holders.setdefault(TopicPartition(*partition), []).append(member_id)
            if partition[0] not in topics_of.get(member_id, ()):
                problems.append(f"{member_id} holds {partition} without subscribing")
    wanted = all_partitions(partitions, members)
    for partition, owners in sorted(holders.items()):
        if len(owners) > 1:
            problems.append(f"{partition} is held by {owners}")
        if partition not in wanted:
            problems.append(f"{partition} does not exist")
    missing = wanted - holders.keys() - set(may_be_missing)
    problems += [f"{partition} is not assigned" for partition in sorted(missing)]
    return problems


def balance_problems(
    members: Sequence[Member], assignment: Mapping[str, Collection[TopicPartition]]
) -> list[str]:
    """Kafka's sticky balance: no member 2+ partitions short could take one from a richer one."""
    topics_of = {member.id: member.topics for member in members}
    problems = []
    for rich, rich_held in sorted(assignment.items()):
        for poor, poor_held in sorted(assignment.items()):
            if len(rich_held) > len(poor_held) + 1:
                movable = sorted(tp for tp in rich_held if tp[0] in topics_of[poor])
                if movable:
                    problems.append(
                        f"{poor} ({len(poor_held)}) could take {movable[0]} from {rich} "
                        f"({len(rich_held)})"
                    )
    return problems


def spread(assignment: Mapping[str, Collection[TopicPartition]]) -> int:
    """Largest minus smallest number of partitions held."""
    sizes = [len(held) for held in assignment.values()]
    return max(sizes) - min(sizes) if sizes else 0


def moves(members: Sequence[Member], assignment: Mapping[str, Collection[TopicPartition]]) -> int:
    """Partitions a member holds now that it did not claim before."""
    claimed = {member.id: set(member.owned) for member in members}
    return sum(
        1
        for member_id, held in assignment.items()
        for partition in held
        if TopicPartition(*partition) not in claimed.get(member_id, set())
    )


def next_round(assignment: Assignment, members: Sequence[Member], generation: int) -> list[Member]:
    """The members again, each now owning what ``assignment`` gave it, at ``generation``."""
    return [
        Member(
            member.id,
            member.topics,
            owned=assignment.get(member.id, []),
            generation=generation,
            rack=member.rack,
            instance_id=member.instance_id,
        )
        for member in members
    ]
