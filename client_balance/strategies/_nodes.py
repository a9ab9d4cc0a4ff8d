"""Nodes as members: the one place that turns ``source_count`` nodes into strategy members.

Node mode's members are the nodes ``0 .. source_count - 1``. Reconcile, the Spark source and
the simulator all need the same three things from that: the member ids (zero-padded, so that
Kafka's string order of member ids is node order: ``"02"`` before ``"10"``), the order in which
numeric ids are shown and handed out (by number), and the partition count of each topic from a
set of partitions. Keeping them here means a node computes the same share wherever it asks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from client_balance.keys import TopicPartition
from client_balance.strategies._base import Member, Strategy, kafka_member_order

__all__ = [
    "node_assignment",
    "node_member_ids",
    "node_order",
    "node_share",
    "partition_counts",
]


def node_member_ids(source_count: int) -> list[str]:
    """Member ids of the nodes ``0 .. source_count - 1``, zero-padded to one width.

    >>> node_member_ids(11)[:3], node_member_ids(11)[-1]
    (['00', '01', '02'], '10')
    """
    width = len(str(source_count - 1))
    return [str(node).zfill(width) for node in range(source_count)]


def node_order(member_ids: Iterable[str]) -> list[str]:
    """Ids in node order: by number when every id is a number, else Kafka's member order.

    >>> node_order(["10", "2", "1"]), node_order(["C10", "C2"])
    (['1', '2', '10'], ['C10', 'C2'])
    """
    ids = sorted(member_ids, key=lambda member_id: kafka_member_order(member_id, None))
    if all(member_id.isdecimal() for member_id in ids):
        ids.sort(key=int)  # stable: "01" and "1" keep Kafka's order between them
    return ids


def partition_counts(partitions: Iterable[TopicPartition]) -> dict[str, int]:
    """Topic -> partition count, counting up to the highest partition number seen."""
    counts: dict[str, int] = {}
    for topic, number in partitions:
        if number >= counts.get(topic, 0):
            counts[topic] = number + 1
    return counts


def node_assignment(
    strategy: Strategy, counts: Mapping[str, int], source_count: int
) -> list[list[TopicPartition]]:
    """Each node's partitions (index = node id), every node subscribing every topic."""
    ids = node_member_ids(source_count)
    assignment = strategy.assign(counts, [Member(member_id, counts) for member_id in ids])
    return [list(assignment[member_id]) for member_id in ids]


def node_share(
    strategy: Strategy, counts: Mapping[str, int], source_count: int, node_id: int
) -> set[TopicPartition]:
    """The partitions of node ``node_id`` of ``source_count`` (see :func:`node_assignment`)."""
    return set(node_assignment(strategy, counts, source_count)[node_id])
