"""Java's ``HashMap``/``HashSet`` iteration order, computed rather than relied upon.

Kafka's sticky assignors iterate hash maps keyed by member id (who gets the spare ``maxQuota``
slots, whose claim wins a tie) and take ``iterator().next()`` of hash sets of partitions (which
partition is swapped back in a reassignment). Their answers therefore follow Java's hash order.
To give Java's answer we compute that order explicitly, as a pure function of the keys:

- ``String.hashCode()`` and ``TopicPartition.hashCode()`` as Java defines them;
- ``HashMap.hash``: the high half folded into the low half (``h ^ (h >>> 16)``);
- the bucket is ``hash & (capacity - 1)``; a table starts at 16 buckets and doubles whenever
  its size passes 3/4 of the capacity, and never shrinks;
- iteration walks buckets in index order and each bucket in insertion order (a resize splits a
  bucket in two and keeps the relative order of its entries).

Where Java's order depends on the order of insertion (keys in the same bucket), we use the
caller's order, which for members is Kafka's member id order: an answer never depends on the
order in which the caller listed members. Java turns a bucket of 8 or more entries in a table of
64 or more buckets into a tree whose iteration order differs; keys that crowd one bucket that
badly do not occur with ordinary member ids, and we do not model it.
"""

from __future__ import annotations

from collections.abc import Sequence

from client_balance.keys import TopicPartition
from client_balance.strategies._base import java_string_hash

__all__ = ["JavaHashSet", "java_hash_order", "table_capacity", "topic_partition_hash"]

_INITIAL_CAPACITY = 16
_UINT32 = 0xFFFFFFFF


def table_capacity(largest_size: int) -> int:
    """Buckets of a default ``HashMap`` whose size has reached ``largest_size``."""
    capacity = _INITIAL_CAPACITY
    while largest_size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def _spread(hash_code: int) -> int:
    bits = hash_code & _UINT32
    return bits ^ (bits >> 16)


def topic_partition_hash(partition: TopicPartition) -> int:
    """Java's ``TopicPartition.hashCode()``: ``31 * (31 + partition) + topic.hashCode()``."""
    return (31 * (31 + partition[1]) + java_string_hash(partition[0])) & _UINT32


def java_hash_order(keys: Sequence[str]) -> list[str]:
    """The order in which a ``HashMap<String, ?>`` filled with ``keys`` (in that order) iterates."""
    mask = table_capacity(len(keys)) - 1
    buckets = [_spread(java_string_hash(key)) & mask for key in keys]
    order = sorted(range(len(keys)), key=buckets.__getitem__)  # stable: insertion order kept
    return [keys[index] for index in order]


class JavaHashSet:
    """A set of partitions that knows which one Java's ``iterator().next()`` would return.

    Only ``first()`` needs Java's order, so entries keep their insertion sequence and the
    largest size the set reached (which fixes its capacity); ``first()`` scans, which is cheap
    because these sets hold the few partitions moved between one pair of members.
    """

    __slots__ = ("_largest_size", "_next_sequence", "_sequence")

    def __init__(self) -> None:
        self._sequence: dict[TopicPartition, int] = {}
        self._next_sequence = 0
        self._largest_size = 0

    def add(self, partition: TopicPartition) -> None:
        """Add ``partition`` at the end of its bucket, as ``HashSet.add`` does."""
        if partition not in self._sequence:
            self._sequence[partition] = self._next_sequence
            self._next_sequence += 1
            self._largest_size = max(self._largest_size, len(self._sequence))

    def discard(self, partition: TopicPartition) -> None:
        """Remove ``partition`` if present."""
        self._sequence.pop(partition, None)

    def __len__(self) -> int:
        return len(self._sequence)

    def __bool__(self) -> bool:
        return bool(self._sequence)

    def first(self) -> TopicPartition:
        """The element Java's iterator yields first; the set must not be empty."""
        mask = table_capacity(self._largest_size) - 1
        return min(
            self._sequence,
            key=lambda tp: (_spread(topic_partition_hash(tp)) & mask, self._sequence[tp]),
        )
