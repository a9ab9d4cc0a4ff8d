"""Kafka's ``RangeAssignor`` (``"range"``), rack-aware as in KIP-881."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import product, repeat

from client_balance.keys import TopicPartition
from client_balance.strategies._base import (
    Assignment,
    Member,
    PartitionRacks,
    paused_gc,
    sorted_members,
    subscribed_partition_counts,
    subscribed_topics,
)
from client_balance.strategies._racks import declared_racks, racks_can_help, replica_racks

__all__ = ["RangeStrategy"]


class RangeStrategy:
    """Per topic, contiguous runs of partitions, as Kafka's ``RangeAssignor``.

    For each topic the subscribers are sorted (static members first by ``instance_id``, then by
    member id, comparing as Java strings); with ``P`` partitions and ``C`` subscribers each gets
    ``P // C`` and the first ``P % C`` one more. Topics with the same partition count and the
    same subscribers are co-partitioned: every member gets the same partition numbers of each.
    Balance is per topic only: the extras of every topic go to the first members.

    Two topics of 3 partitions, C0 and C1 subscribing both::

        member  t0        t1
        C0      t0p0 p1   t1p0 p1     (4 partitions)
        C1      t0p2      t1p2        (2 partitions)

    **Racks** (KIP-881, with KAFKA-14891's fix for co-partitioned topics). Given
    ``partition_racks`` and members' racks, and if Kafka's switch says matching can help for at
    least one topic (see ``_racks``), partitions are first matched to members on one of their
    replicas' racks, without changing how many each member gets of each topic:

    - co-partitioned topics (same subscribers with their racks, same partition count, at least
      one subscriber with a rack) stay co-partitioned: partition ``p`` of all of them goes to the
      first member, in the order above, that still has room and whose rack holds ``p`` of every
      one of them (a member without a rack fits anywhere);
    - any other topic that needs it runs the range walk over members, each taking only
      partitions on its own rack;
    - then the plain range walk hands out what is left.

    A member without a rack takes what it is given. Alignment is best effort; co-partitioning
    and per-topic balance come first. The same two topics, partition 0 of each on rack ``a``,
    partitions 1 and 2 on rack ``b``, C0 on rack ``b`` and C1 on rack ``a``::

        member  rack  t0        t1
        C0      b     t0p1 p2   t1p1 p2
        C1      a     t0p0      t1p0
    """

    name = "range"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        """Assign each topic's partitions in runs to its sorted subscribers, matching racks."""
        ordered = sorted_members(members)
        topics, equal = subscribed_topics(ordered)
        counts = subscribed_partition_counts(partitions, ordered, topics)
        assignment: Assignment = {member.id: [] for member in ordered}
        rack_placed: dict[str, list[int]] = {}
        with paused_gc(sum(counts.values())):
            if partition_racks is not None and any(member.rack for member in ordered):
                rack_placed = _rack_aware_owners(counts, ordered, partition_racks)
            for run, subscribers, count in _runs(counts, ordered, equal=equal):
                if run[0] in rack_placed:
                    for topic in run:
                        for partition, owner in enumerate(rack_placed[topic]):
                            if owner >= 0:  # as Java would; always, the quotas add up
                                assignment[ordered[owner].id].append(
                                    TopicPartition(topic, partition)
                                )
                    continue
                share, extra = divmod(count, len(subscribers))
                start = 0
                for index, member_id in enumerate(subscribers):
                    end = start + share + (1 if index < extra else 0)
                    if end > start:
                        # The same run of numbers of every topic of the run, topic by topic.
                        assignment[member_id] += map(
                            tuple.__new__,
                            repeat(TopicPartition),
                            product(run, range(start, end)),
                        )
                    start = end
        return assignment


def _runs(
    counts: Mapping[str, int], ordered: Sequence[Member], *, equal: bool
) -> Iterator[tuple[list[str], list[str], int]]:
    """Consecutive topics (by name) with the same subscribers and partition count.

    Range gives every topic of such a run the same partition numbers per member, so a member's
    share of a whole run is built at once; with a million partitions that is one step per
    member instead of one per member and topic. A run never spans a rack-matched topic and
    another one: rack matching groups topics by the same subscribers and count, so all topics
    of a run are matched together or not at all.
    """
    # Members with the same topics subscribe the same topics: test each set once per topic.
    classes: dict[frozenset[str], list[int]] = {}
    if equal and ordered:  # known already (``subscribed_topics``): spare comparing sets again
        classes[ordered[0].topics] = list(range(len(ordered)))
    else:
        for index, member in enumerate(ordered):
            classes.setdefault(member.topics, []).append(index)
    sets = list(classes.items())
    subscribers_of: dict[tuple[int, ...], list[str]] = {}
    run: list[str] = []
    key: tuple[tuple[int, ...], int] | None = None
    for topic, count in counts.items():
        signature = tuple(i for i, (topics, _) in enumerate(sets) if topic in topics)
        if (signature, count) != key:
            if key is not None:
                yield run, subscribers_of[key[0]], key[1]
            run, key = [], (signature, count)
            if signature not in subscribers_of:
                indices = sorted(i for c in signature for i in sets[c][1])
                subscribers_of[signature] = [ordered[i].id for i in indices]
        run.append(topic)
    if key is not None:
        yield run, subscribers_of[key[0]], key[1]


class _Ledger:
    """Who holds which partition of one topic, or of a co-partitioned set of topics.

    Java keeps one ``TopicAssignmentState`` per topic; the topics of a co-partitioned set are
    always given the same partition numbers by the same members, so their states never differ
    and one ledger serves them all. Quota rule, as Java's: a subscriber may hold
    ``share + 1`` while some of the ``extra`` larger shares are still unclaimed, else ``share``;
    each time a subscriber ends up above ``share``, one larger share is claimed.
    """

    __slots__ = ("extra_left", "held", "owner", "share", "subscribers")

    def __init__(self, subscribers: Sequence[int], count: int) -> None:
        self.subscribers = subscribers  # member indices, in Kafka's member order
        self.owner = [-1] * count  # member index per partition; -1 while unassigned
        self.held = [0] * len(subscribers)  # per subscriber position
        self.share, self.extra_left = divmod(count, len(subscribers))

    def room(self, position: int) -> int:
        """How many more partitions the subscriber at ``position`` may take now."""
        limit = self.share + (1 if self.extra_left > 0 else 0)
        return max(0, limit - self.held[position])

    def give(self, position: int, partitions: Sequence[int]) -> None:
        """Hand ``partitions`` to the subscriber at ``position``."""
        member = self.subscribers[position]
        for partition in partitions:
            self.owner[partition] = member
        self.held[position] += len(partitions)
        if self.held[position] > self.share:
            self.extra_left -= 1


def _rack_aware_owners(
    counts: Mapping[str, int], ordered: Sequence[Member], partition_racks: PartitionRacks
) -> dict[str, list[int]]:
    """Owner (index into ``ordered``) of every partition of each topic that rack matching touched.

    Empty if Kafka's switch is off for every topic; topics left out get the plain ranges.
    """
    member_racks = [member.rack for member in ordered]
    subscribers_of: dict[str, tuple[int, ...]] = {}
    racks_of: dict[str, list[frozenset[str]]] = {}
    needs_racks: dict[str, bool] = {}
    for topic, count in counts.items():
        subscribers = tuple(i for i, member in enumerate(ordered) if topic in member.topics)
        subscribers_of[topic] = subscribers
        subscriber_racks = declared_racks(member_racks[i] for i in subscribers)
        if not subscriber_racks:
            continue  # Java's rack pass does nothing for it: no subscriber has a rack to match
        racks = [replica_racks(partition_racks, TopicPartition(topic, p)) for p in range(count)]
        racks_of[topic] = racks
        needs_racks[topic] = racks_can_help(subscriber_racks, racks)
    if not any(needs_racks.values()):
        return {}

    # Java groups topics by subscribers (with their racks, fixed per member) and partition count.
    groups: dict[tuple[tuple[int, ...], int], list[str]] = {}
    for topic in racks_of:  # counts, hence racks_of, is sorted by topic name
        groups.setdefault((subscribers_of[topic], counts[topic]), []).append(topic)

    owners: dict[str, list[int]] = {}
    for (subscribers, count), topics in groups.items():
        ledger = _Ledger(subscribers, count)
        if len(topics) > 1:
            shared = [
                frozenset.intersection(*(racks_of[t][p] for t in topics)) for p in range(count)
            ]
            _match_copartitioned(ledger, shared, member_racks)
        elif needs_racks[topics[0]]:
            _walk_ranges(ledger, _partitions_by_rack(racks_of[topics[0]]), member_racks)
        else:
            continue  # a lone topic whose racks cannot help gets the plain ranges
        _walk_ranges(ledger, None, member_racks)
        for topic in topics:
            owners[topic] = ledger.owner
    return owners


def _partitions_by_rack(racks_per_partition: Sequence[frozenset[str]]) -> dict[str, list[int]]:
    """Rack -> the partitions with a replica on it, ascending."""
    by_rack: dict[str, list[int]] = {}
    for partition, racks in enumerate(racks_per_partition):
        for rack in racks:
            by_rack.setdefault(rack, []).append(partition)
    return by_rack


def _walk_ranges(
    ledger: _Ledger, on_rack: Mapping[str, list[int]] | None, member_racks: Sequence[str | None]
) -> None:
    """Java's ``assignRanges``: in order, each subscriber takes the lowest free partitions it may.

    Each takes at most its room. With ``on_rack``, a subscriber with a rack may take only
    partitions on that rack; without it (the plain walk), anyone may take anything.
    """
    everything = range(len(ledger.owner))
    # Per list of eligible partitions, how far it is known to be assigned: later subscribers
    # scanning the same list resume there, so each walk is linear in the partitions.
    scanned: dict[str | None, int] = {}
    owner = ledger.owner
    for position, member in enumerate(ledger.subscribers):
        room = ledger.room(position)
        if room == 0:
            continue
        rack = None if on_rack is None else member_racks[member]
        eligible: Sequence[int] = (
            everything if on_rack is None or rack is None else on_rack.get(rack, ())
        )
        index = scanned.get(rack, 0)
        taken: list[int] = []
        while len(taken) < room and index < len(eligible):
            if owner[eligible[index]] < 0:
                taken.append(eligible[index])
            index += 1
        scanned[rack] = index
        if taken:
            ledger.give(position, taken)


def _match_copartitioned(
    ledger: _Ledger, shared_racks: Sequence[frozenset[str]], member_racks: Sequence[str | None]
) -> None:
    """Java's ``assignCoPartitionedWithRackMatching``, partition by partition.

    Partition ``p`` (of every topic of the set) goes to the first subscriber with room whose rack
    is in ``shared_racks[p]``, the racks holding ``p`` of every topic; a subscriber without a
    rack fits every ``p``; if none fits, ``p`` is left to the plain walk.
    """
    # Subscriber positions per rack (None: no rack), ascending. Room never grows, so those
    # found without room are skipped for good by moving the head.
    queues: dict[str | None, list[int]] = {}
    for position, member in enumerate(ledger.subscribers):
        queues.setdefault(member_racks[member], []).append(position)
    heads = dict.fromkeys(queues, 0)

    def first_with_room(rack: str | None) -> int | None:
        queue = queues.get(rack)
        if queue is None:
            return None
        head = heads[rack]
        while head < len(queue) and ledger.room(queue[head]) == 0:
            head += 1
        heads[rack] = head
        return queue[head] if head < len(queue) else None

    for partition, racks in enumerate(shared_racks):
        # The earliest candidate over all fitting racks: a minimum, so set order is irrelevant.
        candidates = [first_with_room(rack) for rack in (None, *racks)]
        found = [position for position in candidates if position is not None]
        if found:
            ledger.give(min(found), (partition,))
