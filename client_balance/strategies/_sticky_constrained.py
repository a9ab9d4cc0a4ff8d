"""The sticky assignors' constrained path: every member subscribes the same topics (KAFKA-9987).

With ``T`` partitions and ``N`` members each member ends with ``minQuota = T // N`` or
``maxQuota = ceil(T / N)`` partitions, exactly ``T % N`` of them with ``maxQuota``:

1. Members are visited in Java's hash order of their ids. Each keeps its valid claims (rack
   mismatches and multiply claimed partitions removed), sorted by (partition, topic) so that a
   trimmed member keeps partitions spread over topics (KAFKA-16277): all of them if fewer than
   ``minQuota``; ``maxQuota`` of them while spare ``maxQuota`` slots remain; else ``minQuota``.
   What a member gives up is "maybe revoked".
2. With racks, unassigned partitions (fewest members on their racks first) go round robin to
   under-filled members on a replica's rack, then to members at ``minQuota`` on a matching rack.
3. The rest go round robin, in (topic, partition) order, to members below ``minQuota`` sorted
   by id (a member leaves the cycle on reaching ``minQuota`` and queues for a spare slot), then
   one each to the queue of members at ``minQuota``.

A partition newly given to a member other than the one that gave it up, or one that was
multiply claimed, is "transferring": the cooperative assignor withholds it for one round.

Step 3 is computed in blocks rather than one partition at a time: between two members leaving
the cycle the cycle is fixed, so each member's share of that block is a slice. (A fresh group,
where nobody holds anything, does not come here: ``_sticky_fresh`` deals it directly.)
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import itemgetter, not_

from client_balance.keys import TopicPartition
from client_balance.strategies._base import all_partitions
from client_balance.strategies._sticky_fresh import deal
from client_balance.strategies._sticky_group import StickyGroup, member_id_key

__all__ = ["assign_constrained"]

_BY_PARTITION_THEN_TOPIC = itemgetter(1, 0)


class _Builder:
    """State of one constrained assignment; ``run`` returns (assignment, transferring)."""

    def __init__(self, group: StickyGroup) -> None:
        self.group = group
        total = sum(group.counts.values())
        self.min_quota, self.expected_over_min = divmod(total, len(group.hash_order))
        self.max_quota = self.min_quota + (1 if self.expected_over_min else 0)
        self.over_min = 0
        self.assignment: dict[str, list[TopicPartition]] = {m: [] for m in group.hash_order}
        self.maybe_revoked: dict[TopicPartition, str] = {}
        self.under_min: list[str] = []
        self.exactly_min: list[str] = []
        self.kept: list[TopicPartition] = []
        self.transferring: dict[TopicPartition, str] = {}

    def run(self) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
        self.keep_owned()
        racks = self.group.racks
        if not (self.kept or self.maybe_revoked or self.group.multiply_claimed or racks.active):
            # Nothing held before: step 3 alone, which deals partition i to member i mod N.
            ordered = sorted(self.group.hash_order, key=member_id_key)
            by_member = dict(zip(ordered, deal(self.group.counts, len(ordered)), strict=True))
            return {m: by_member[m] for m in self.group.hash_order}, self.transferring
        unassigned = self.unassigned()
        self.under_min.sort(key=member_id_key)
        self.exactly_min.sort(key=member_id_key)
        if racks.active:
            unassigned = self.assign_on_racks(racks.by_rack_members(unassigned))
        self.assign_round_robin(unassigned)
        if not self.kept and not racks.active:
            # Each member got consecutive blocks of the sorted partitions: sorted already.
            return self.assignment, self.transferring
        return {m: sorted(parts) for m, parts in self.assignment.items()}, self.transferring

    def keep_owned(self) -> None:
        racks = self.group.racks
        multiply_claimed = self.group.multiply_claimed
        for member_id in self.group.hash_order:
            claims = list(self.group.owned[member_id])
            if racks.active:
                matching = []
                for partition in claims:
                    if racks.mismatch(member_id, partition):
                        self.maybe_revoked[partition] = member_id
                    else:
                        matching.append(partition)
                claims = matching
            if multiply_claimed:
                claims = [tp for tp in claims if tp not in multiply_claimed]
            if len(claims) < self.min_quota:
                self.keep(member_id, claims, len(claims))
                self.under_min.append(member_id)
            elif len(claims) >= self.max_quota and self.over_min < self.expected_over_min:
                self.over_min += 1
                if self.over_min == self.expected_over_min:
                    self.exactly_min.clear()
                self.keep(member_id, claims, self.max_quota)
            else:
                self.keep(member_id, claims, self.min_quota)
                if self.over_min < self.expected_over_min:
                    self.exactly_min.append(member_id)

    def keep(self, member_id: str, claims: list[TopicPartition], quota: int) -> None:
        if quota < len(claims):
            claims.sort(key=_BY_PARTITION_THEN_TOPIC)
            for partition in claims[quota:]:
                self.maybe_revoked[partition] = member_id
            claims = claims[:quota]
        self.assignment[member_id].extend(claims)
        self.kept.extend(claims)

    def unassigned(self) -> list[TopicPartition]:
        """All partitions in (topic, partition) order, less the kept ones."""
        counts = self.group.counts
        if not self.kept:
            return all_partitions(counts.items())
        # One byte per partition marks the kept ones; finding the rest is then a C-level scan,
        # where a set of a million kept partitions would hash each of them again.
        marks = {topic: bytearray(count) for topic, count in counts.items()}
        for topic, number in self.kept:
            marks[topic][number] = 1
        unassigned: list[TopicPartition] = []
        for topic, topic_marks in marks.items():
            if topic_marks.count(0):
                left = compress(range(len(topic_marks)), map(not_, topic_marks))
                unassigned.extend(
                    map(tuple.__new__, repeat(TopicPartition), zip(repeat(topic), left))
                )
        return unassigned

    def assign_on_racks(self, unassigned: list[TopicPartition]) -> list[TopicPartition]:
        """Step 2; returns the partitions it could not place on a matching rack."""
        racks = self.group.racks
        under_min, exactly_min = self.under_min, self.exactly_min
        left: list[TopicPartition] = []
        next_index = 0
        for partition in unassigned:
            member_id = None
            index = racks.next_on_rack(partition, under_min, next_index)
            if index >= 0:
                member_id = under_min[index]
                count = len(self.assignment[member_id]) + 1
                if count >= self.min_quota:
                    del under_min[index]
                    if count < self.max_quota and self.over_min < self.expected_over_min:
                        exactly_min.append(member_id)
                else:
                    index += 1
                next_index = index % len(under_min) if under_min else 0
            elif exactly_min:
                index = racks.next_on_rack(partition, exactly_min, 0)
                if index >= 0:
                    member_id = exactly_min[index]
                    if len(self.assignment[member_id]) + 1 == self.max_quota:
                        del exactly_min[index]
                        self.over_min += 1
                        if self.over_min == self.expected_over_min:
                            exactly_min.clear()
            if member_id is None:
                left.append(partition)
            else:
                self.give(member_id, [partition])
        return left

    def assign_round_robin(self, unassigned: list[TopicPartition]) -> None:
        """Step 3, in blocks between the moments a member leaves the cycle."""
        needs = {m: self.min_quota - len(self.assignment[m]) for m in self.under_min}
        cycle = self.under_min
        position = level = 0
        for threshold in sorted(set(needs.values())):
            width, rounds = len(cycle), threshold - level
            block = unassigned[position : position + width * rounds]
            if len(block) < width * rounds:
                raise _broken("members below minQuota but no partitions left")
            for rank, member_id in enumerate(cycle):
                self.give(member_id, block[rank::width])
            position += width * rounds
            self.exactly_min.extend(m for m in cycle if needs[m] == threshold)
            cycle = [m for m in cycle if needs[m] > threshold]
            level = threshold
        rest = unassigned[position:]
        if len(rest) > len(self.exactly_min):
            raise _broken("no more unfilled members to be assigned")
        for partition, member_id in zip(rest, self.exactly_min, strict=False):
            self.give(member_id, [partition])

    def give(self, member_id: str, partitions: list[TopicPartition]) -> None:
        self.assignment[member_id] += partitions
        if self.maybe_revoked or self.group.multiply_claimed:
            for partition in partitions:
                previous = self.maybe_revoked.get(partition)
                if (
                    previous is not None and previous != member_id
                ) or partition in self.group.multiply_claimed:
                    self.transferring[partition] = member_id


def _broken(what: str) -> RuntimeError:
    # Kafka's assignor throws IllegalStateException here; reaching it means a bug of ours.
    return RuntimeError(f"sticky constrained assignment is inconsistent: {what}")


def assign_constrained(
    group: StickyGroup,
) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
    """The constrained path's assignment and the partitions transferring ownership."""
    return _Builder(group).run()
