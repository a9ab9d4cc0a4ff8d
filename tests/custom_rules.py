"""Strategies of a user's own, for the tests of the registry and its users.

They live at the top level of an importable module, so that other processes (worker processes,
Spark's Python workers, ``client-balance simulate``) find them by reference, e.g.
``tests.custom_rules:by_topic``. The ``impure_*`` rules break the contract on purpose, each in
one way, for the tests of ``check_strategy``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence

from client_balance.strategies import Assignment, Member, PartitionRacks, TopicPartition


def by_topic(
    partitions: Mapping[str, int], members: Sequence[Member]
) -> dict[str, list[TopicPartition]]:
    """Whole topics to members: the i-th subscribed topic (by name) to the (i mod n)-th subscriber.

    With two nodes and topics A and B, node 0 reads all of A and node 1 all of B.
    """
    answer: dict[str, list[TopicPartition]] = {member.id: [] for member in members}
    subscribed = sorted({topic for member in members for topic in member.topics} & set(partitions))
    for index, topic in enumerate(subscribed):
        subscribers = [member for member in members if topic in member.topics]
        owner = subscribers[index % len(subscribers)]
        answer[owner.id] += [TopicPartition(topic, number) for number in range(partitions[topic])]
    return answer


def reversed_range(
    partitions: Mapping[str, int], members: Sequence[Member]
) -> dict[str, list[TopicPartition]]:
    """Per topic, contiguous runs as ``range`` gives them, but the last subscriber gets the first.

    Two nodes, four partitions: node 1 reads 0 and 1, node 0 reads 2 and 3.
    """
    answer: dict[str, list[TopicPartition]] = {member.id: [] for member in members}
    for topic in sorted(partitions):
        subscribers = [member for member in members if topic in member.topics][::-1]
        if not subscribers:
            continue
        count = partitions[topic]
        share, extra = divmod(count, len(subscribers))
        start = 0
        for index, member in enumerate(subscribers):
            end = start + share + (index < extra)
            answer[member.id] += [TopicPartition(topic, number) for number in range(start, end)]
            start = end
    return answer


class ByTopic:
    """:func:`by_topic` as a strategy object (an entry point or reference may name the class)."""

    name = "by-topic-object"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        """The answer of :func:`by_topic`."""
        return by_topic(partitions, members)


def by_given_order(
    partitions: Mapping[str, int], members: Sequence[Member]
) -> dict[str, list[TopicPartition]]:
    """Every partition to the first member in the order given that subscribes its topic.

    Order-dependent by itself; registered, it is not, since a registered rule gets its members
    in one order.
    """
    answer: dict[str, list[TopicPartition]] = {member.id: [] for member in members}
    for topic, count in partitions.items():
        subscribers = [member for member in members if topic in member.topics]
        if subscribers:
            answer[subscribers[0].id] += [TopicPartition(topic, n) for n in range(count)]
    return answer


def _to_owners(
    partitions: Mapping[str, int], members: Sequence[Member], pick: int
) -> dict[str, list[TopicPartition]]:
    answer: dict[str, list[TopicPartition]] = {member.id: [] for member in members}
    for topic in sorted(partitions):
        subscribers = [member for member in members if topic in member.topics]
        for number in range(partitions[topic]) if subscribers else ():
            owner = subscribers[(pick + number) % len(subscribers)]
            answer[owner.id].append(TopicPartition(topic, number))
    return answer


def impure_random(
    partitions: Mapping[str, int], members: Sequence[Member]
) -> dict[str, list[TopicPartition]]:
    """Breaks determinism: each partition to a subscriber picked at random."""
    answer: dict[str, list[TopicPartition]] = {member.id: [] for member in members}
    for topic in sorted(partitions):
        subscribers = [member for member in members if topic in member.topics]
        for number in range(partitions[topic]) if subscribers else ():
            answer[random.choice(subscribers).id].append(TopicPartition(topic, number))
    return answer


_calls = itertools.count()


def impure_stateful(
    partitions: Mapping[str, int], members: Sequence[Member]
) -> dict[str, list[TopicPartition]]:
    """Breaks determinism: owners shift by one with every call (state kept between calls)."""
    return _to_owners(partitions, members, next(_calls))


def impure_string_hash(
    partitions: Mapping[str, int], members: Sequence[Member]
) -> dict[str, list[TopicPartition]]:
    """Breaks sameness across processes: owners start at ``hash(topic)``, which is salted."""
    answer: dict[str, list[TopicPartition]] = {member.id: [] for member in members}
    for topic in sorted(partitions):
        answer = _merge(answer, _to_owners({topic: partitions[topic]}, members, hash(topic)))
    return answer


def _merge(
    one: dict[str, list[TopicPartition]], other: dict[str, list[TopicPartition]]
) -> dict[str, list[TopicPartition]]:
    return {member_id: one[member_id] + other[member_id] for member_id in one}


def impure_loses_a_partition(
    partitions: Mapping[str, int], members: Sequence[Member]
) -> dict[str, list[TopicPartition]]:
    """Breaks validity: partition 0 of every topic goes to nobody."""
    answer = _to_owners(partitions, members, 0)
    return {
        member_id: [tp for tp in held if tp.partition != 0] for member_id, held in answer.items()
    }
