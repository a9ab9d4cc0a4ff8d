"""What both sticky paths start from: validated claims, the path choice, and rack information.

Kafka's ``AbstractStickyAssignor`` first walks the members (in Java hash order of their ids,
see ``_javahash``) and settles their claims on previously owned partitions:

- a claim on a topic that nobody subscribes, that has no partitions, or on a partition number
  the topic does not have, is dropped (Kafka cannot see the last kind; we refuse to keep a
  partition that does not exist);
- the first claim on a partition stands; a later claim by a member of the *same* generation
  invalidates the partition for both (it joins ``multiply_claimed`` and neither keeps it); a
  later claim of a *higher* generation takes it over; a lower one is ignored.

Subscriptions are "all equal" when every member subscribes the same topic set (topics without
partitions count); that selects the constrained path, else the general one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import itemgetter, lt

from client_balance.keys import TopicPartition
from client_balance.strategies._base import Member, PartitionRacks, sorted_members
from client_balance.strategies._javahash import java_hash_order
from client_balance.strategies._racks import use_rack_aware

__all__ = ["StickyGroup", "StickyRacks", "member_id_key"]

# Members per distinct subscription from which subscribers are listed by subscription.
_FEW_SUBSCRIPTIONS = 8


def member_id_key(member_id: str) -> bytes:
    """Java ``String.compareTo`` order of member ids (UTF-16 code units)."""
    return member_id.encode("utf-16-be")


@dataclass(frozen=True, slots=True)
class StickyRacks:
    """Rack information of the sticky assignors; empty maps when rack-aware assignment is off."""

    member_rack: Mapping[str, str] = field(default_factory=dict)
    partition_racks: Mapping[TopicPartition, frozenset[str]] = field(default_factory=dict)
    rack_members: Mapping[TopicPartition, int] = field(default_factory=dict)
    """Partition -> how many members sit on its replicas' racks (rack-aware only)."""

    @classmethod
    def of(
        cls,
        members: Sequence[Member],
        counts: Mapping[str, int],
        partition_racks: PartitionRacks | None,
    ) -> StickyRacks:
        """Kafka's rack switch (KIP-881) applied to the subscribed partitions."""
        racked = [member for member in members if member.rack]
        if not racked or not partition_racks:
            return cls()
        all_partitions = [
            TopicPartition(topic, number)
            for topic, count in counts.items()
            for number in range(count)
        ]
        if not use_rack_aware([member.rack for member in racked], partition_racks, all_partitions):
            return cls()
        members_per_rack: dict[str, int] = {}
        for member in racked:
            assert member.rack is not None  # noqa: S101 - filtered above; narrows the type
            members_per_rack[member.rack] = members_per_rack.get(member.rack, 0) + 1
        racks = {tp: partition_racks.get(tp, frozenset()) for tp in all_partitions}
        return cls(
            member_rack={member.id: member.rack for member in racked if member.rack},
            partition_racks=racks,
            rack_members={
                tp: sum(members_per_rack.get(rack, 0) for rack in tp_racks)
                for tp, tp_racks in racks.items()
            },
        )

    @property
    def active(self) -> bool:
        """Whether rack-aware assignment is on."""
        return bool(self.member_rack)

    def mismatch(self, member_id: str, partition: TopicPartition) -> bool:
        """The member has a rack and the partition has no replica on it."""
        rack = self.member_rack.get(member_id)
        return rack is not None and rack not in self.partition_racks.get(partition, ())

    def by_rack_members(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Partitions with the fewest members on their racks first (stable)."""
        if not self.rack_members:
            return partitions
        return sorted(partitions, key=lambda tp: self.rack_members.get(tp, 0))

    def next_on_rack(self, partition: TopicPartition, member_ids: Sequence[str], start: int) -> int:
        """Index of the first member at or cyclically after ``start`` on a replica's rack, or -1."""
        racks = self.partition_racks.get(partition)
        if not racks:
            return -1
        size = len(member_ids)
        for step in range(size):
            index = (start + step) % size
            if self.member_rack.get(member_ids[index]) in racks:
                return index
        return -1


@dataclass(slots=True)
class StickyGroup:
    """The members and their settled claims, ready for one of the two paths."""

    counts: dict[str, int]
    members: dict[str, Member]
    hash_order: list[str]
    """Member ids in the order Java iterates its ``HashMap`` of subscriptions."""
    owned: dict[str, list[TopicPartition]]
    """Each member's valid, distinct claims, after conflicts are settled."""
    multiply_claimed: set[TopicPartition]
    max_generation: int
    subscriptions_equal: bool
    racks: StickyRacks
    owner: dict[TopicPartition, str] | None = None
    """Each claim's member, when :meth:`settle` built it on its way (subscriptions known to
    differ, claims all valid and distinct): the general path takes it over, not building it."""

    @classmethod
    def settle(
        cls,
        counts: dict[str, int],
        members: Sequence[Member],
        partition_racks: PartitionRacks | None,
        *,
        subscriptions_equal: bool | None = None,
    ) -> StickyGroup:
        """Order the members as Java would and settle their claims.

        ``subscriptions_equal`` is whether all members subscribe the same topics, if known.
        """
        ordered = sorted_members_by_id(members)
        by_id = {member.id: member for member in ordered}
        hash_order = java_hash_order([member.id for member in ordered])
        limits = defaultdict(int, counts)
        claims = [by_id[member_id].owned for member_id in hash_order]
        every_claim = list(chain.from_iterable(claims))
        multiply_claimed: set[TopicPartition] = set()
        owner = None
        distinct = False
        if _all_exist(every_claim, limits):
            if subscriptions_equal is False:  # the general path's map; a set costs less
                member_of = chain.from_iterable(map(repeat, hash_order, map(len, claims)))
                owner = dict(zip(every_claim, member_of, strict=True))
            distinct = len(set(every_claim) if owner is None else owner) == len(every_claim)
        if distinct:
            # The usual case, checked over all claims at once: nothing to drop or settle.
            owned = dict(zip(hash_order, map(list, claims), strict=True))
        else:
            owner = None
            owned = {m: _existing(by_id[m].owned, limits) for m in hash_order}
            if len(set(chain.from_iterable(owned.values()))) < sum(map(len, owned.values())):
                owned, multiply_claimed = _settle_rival_claims(by_id, hash_order, owned)
        if subscriptions_equal is None:
            first_topics = by_id[hash_order[0]].topics if hash_order else frozenset()
            subscriptions_equal = all(member.topics == first_topics for member in ordered)
        return cls(
            counts=counts,
            members=by_id,
            hash_order=hash_order,
            owned=owned,
            multiply_claimed=multiply_claimed,
            max_generation=max((member.generation for member in ordered), default=-1),
            subscriptions_equal=subscriptions_equal,
            racks=StickyRacks.of(ordered, counts, partition_racks),
            owner=owner,
        )

    def subscriptions(self) -> tuple[dict[str, list[str]], dict[str, frozenset[str]]]:
        """Each topic's subscribers in hash order, and each member's subscribed topics."""
        subscribers: dict[str, list[str]] = {topic: [] for topic in self.counts}
        topics_of: dict[str, frozenset[str]] = {}
        classes: dict[frozenset[str], list[str]] = {}
        for member_id in self.hash_order:
            classes.setdefault(self.members[member_id].topics, []).append(member_id)
        if len(classes) * _FEW_SUBSCRIPTIONS > len(self.hash_order):
            for member_id in self.hash_order:
                topics = self.members[member_id].topics.intersection(self.counts)
                topics_of[member_id] = topics
                for topic in topics:
                    subscribers[topic].append(member_id)
            return subscribers, topics_of
        # Few distinct subscriptions (the usual group): a whole class of members at a time.
        merged: set[str] = set()
        for subscription, member_ids in classes.items():
            topics = subscription.intersection(self.counts)
            topics_of.update(zip(member_ids, repeat(topics)))
            for topic in topics:
                if subscribers[topic]:
                    merged.add(topic)
                subscribers[topic] += member_ids
        position = {member_id: index for index, member_id in enumerate(self.hash_order)}
        for topic in merged:
            subscribers[topic].sort(key=position.__getitem__)
        return subscribers, topics_of


def _settle_rival_claims(
    by_id: Mapping[str, Member],
    hash_order: Sequence[str],
    claims_of: Mapping[str, list[TopicPartition]],
) -> tuple[dict[str, list[TopicPartition]], set[TopicPartition]]:
    """Kafka's rules for partitions claimed by more than one member (module docstring)."""
    owned: dict[str, dict[TopicPartition, None]] = {}
    multiply_claimed: set[TopicPartition] = set()
    claimed_by: dict[TopicPartition, str] = {}
    for member_id in hash_order:
        generation = by_id[member_id].generation
        claims = owned[member_id] = dict.fromkeys(claims_of[member_id])
        for partition in list(claims):
            rival = claimed_by.get(partition)
            claimed_by[partition] = member_id
            if rival is None:
                continue
            rival_generation = by_id[rival].generation
            if generation == rival_generation:
                multiply_claimed.add(partition)
                owned[rival].pop(partition, None)
                del claims[partition]
            elif generation > rival_generation:
                owned[rival].pop(partition, None)
            else:
                del claims[partition]
                claimed_by[partition] = rival
    return {member_id: list(claims) for member_id, claims in owned.items()}, multiply_claimed


def sorted_members_by_id(members: Sequence[Member]) -> list[Member]:
    """Members by id in Java order (sticky ignores instance ids); duplicate ids are refused."""
    ordered = sorted_members(members)  # Kafka's order, and the duplicate-id check
    if any(member.instance_id is not None for member in ordered):
        # Kafka's order puts static members first; without any it is the id order already.
        ordered.sort(key=lambda member: member_id_key(member.id))
    return ordered


def _existing(
    partitions: Sequence[TopicPartition], limits: defaultdict[str, int]
) -> list[TopicPartition]:
    """The distinct partitions that exist among the subscribed topics, in the order given.

    ``limits`` maps each subscribed topic to its partition count (0 for any other topic). The
    check runs in C over whole lists, since a rebalance of a million partitions passes here.
    """
    if _all_exist(partitions, limits):
        return list(dict.fromkeys(partitions))
    return list(dict.fromkeys(tp for tp in partitions if 0 <= tp[1] < limits[tp[0]]))


def _all_exist(partitions: Sequence[TopicPartition], limits: defaultdict[str, int]) -> bool:
    """Whether every partition exists among the subscribed topics (``limits`` as above)."""
    if not partitions:
        return True
    numbers = list(map(itemgetter(1), partitions))
    if min(numbers) < 0:
        return False
    # Usually every claimed topic has more partitions than the highest number claimed: then
    # the numbers need not be paired with their topics' counts one by one.
    topics = set(map(itemgetter(0), partitions))
    if max(numbers) < min(map(limits.__getitem__, topics)):
        return True
    return all(map(lt, numbers, map(limits.__getitem__, map(itemgetter(0), partitions))))
