"""The general sticky path's first placement, computed in blocks.

Kafka's ``GeneralAssignmentBuilder`` gives each unassigned partition, one at a time in its
order, to the least loaded subscriber of its topic: the first, by (partition count, member id),
of the topic's subscribers. Over a run of partitions whose topics have the same subscribers
that is water filling, which can be computed level by level instead of partition by partition:

- the members with the lowest count take one partition each, in id order; then they are level
  with the members that had one more, and all of those take one each in id order; and so on;
- while no other member joins (the next member's count is not reached yet), the same members
  take turns in the same order, so each one's share of that stretch is a strided slice.

A million partitions over a few thousand members are then a few thousand list slices.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat

from client_balance.keys import TopicPartition

__all__ = ["fill_least_loaded"]


def fill_least_loaded(
    run: Sequence[TopicPartition],
    subscribers: Sequence[str],
    current: Mapping[str, dict[TopicPartition, None]],
    owner: dict[TopicPartition, str],
    key: Callable[[str], bytes],
) -> None:
    """Give ``run`` to ``subscribers`` as one-at-a-time least-loaded assignment would.

    ``current`` holds each member's partitions (its count is its load), ``owner`` the holder of
    each partition; both are updated. ``key`` is the member id order (Java's ``compareTo``).
    """
    queue = sorted(subscribers, key=lambda member: (len(current[member]), key(member)))
    loads = [len(current[member]) for member in queue]
    active: list[str] = []  # the members at ``level``, in id order
    active_keys: list[bytes] = []
    joined = 0
    level = loads[0]
    position, end = 0, len(run)
    while position < end:
        while joined < len(queue) and loads[joined] <= level:
            member = queue[joined]
            index = bisect.bisect(active_keys, key(member))
            active_keys.insert(index, key(member))
            active.insert(index, member)
            joined += 1
        width = len(active)
        rounds = (end - position) // width
        if joined < len(queue):
            rounds = min(rounds, loads[joined] - level)
        if rounds == 0:  # fewer partitions left than members at this level: one each, in order
            for member, partition in zip(active, run[position:], strict=False):
                current[member][partition] = None
                owner[partition] = member
            return
        block = run[position : position + width * rounds]
        for rank, member in enumerate(active):
            share = block[rank::width]
            current[member].update(zip(share, repeat(None)))
            owner.update(zip(share, repeat(member)))
        position += width * rounds
        level += rounds
