"""Partition moves of the general sticky path's balancing loop (Kafka's ``PartitionMovements``).

When a partition of a topic is about to move from one member to another while some partition
of the same topic has already moved the opposite way between the same two members, Kafka moves
that one back instead, so that balancing does not shuffle a topic's partitions around. Which of
several such partitions goes back is the first of Java's ``HashSet`` order (``JavaHashSet``).

Kafka moves that partition whatever the sizes, and on some groups (fresh ones with racks among
them) its loop never ends: a swap that does not even the sizes undoes a move's progress. We
take every swap Kafka takes up to a budget of such uneven swaps, then only the others (see
``takes_swap``): Kafka's answer wherever its loop ends within the budget, and an end always.
"""

from __future__ import annotations

from client_balance.keys import TopicPartition
from client_balance.strategies._javahash import JavaHashSet

__all__ = ["Movements"]


class Movements:
    """Partition moves so far, to swap a partition back rather than move a second one across."""

    def __init__(self) -> None:
        self.source_of: dict[TopicPartition, tuple[str, str]] = {}
        self.by_topic: dict[str, dict[tuple[str, str], JavaHashSet]] = {}
        self.uneven_swaps = 0

    def _forget(self, partition: TopicPartition) -> tuple[str, str]:
        pair = self.source_of.pop(partition)
        pairs = self.by_topic[partition[0]]
        moved = pairs[pair]
        moved.discard(partition)
        if not moved:
            del pairs[pair]
            if not pairs:
                del self.by_topic[partition[0]]
        return pair

    def _record(self, partition: TopicPartition, pair: tuple[str, str]) -> None:
        self.source_of[partition] = pair
        self.by_topic.setdefault(partition[0], {}).setdefault(pair, JavaHashSet()).add(partition)

    def move(self, partition: TopicPartition, old: str, new: str) -> None:
        if partition in self.source_of:
            source, _ = self._forget(partition)
            if source != new:
                self._record(partition, (source, new))
        else:
            self._record(partition, (old, new))

    def partition_to_move(self, partition: TopicPartition, old: str, new: str) -> TopicPartition:
        pairs = self.by_topic.get(partition[0])
        if pairs is None:
            return partition
        if partition in self.source_of:
            old = self.source_of[partition][0]
        reverse = pairs.get((new, old))
        return partition if reverse is None else reverse.first()

    def takes_swap(self, surplus: int, *, repairing: bool, budget: int) -> bool:
        """Whether the partition ``partition_to_move`` named moves instead of the one asked for.

        ``surplus`` is its holder's size minus the receiver's. A swap with a surplus of 1 or
        more returns a partition to where it came from (one movement record fewer) without
        raising the sum of squared sizes, and every other move lowers that sum, so a loop that
        takes no other swap ends. Kafka takes them all; so do we until ``budget`` swaps with a
        surplus under 1 have been taken. The repair pass (ours alone, ``repairing``) takes only
        swaps that even the sizes, as it always has.
        """
        if surplus > 1:
            return True
        if repairing:
            return False
        if surplus == 1:
            return True
        self.uneven_swaps += 1
        return self.uneven_swaps <= budget
