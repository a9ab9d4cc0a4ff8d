"""The partitions a member should hold, decided afresh each round; and its pins.

The target comes from the ``assigner`` callback if there is one, else from the group mode:
node mode's strategy over the nodes ``0 .. source_count - 1`` and the **full configured**
partition set (so a partition without a leader does not reshuffle anyone else's), elastic
mode's strategy over the live elastic members, or, in manual mode, what the application
connected. Then pins: partitions pinned by another live member are taken out, this member's
own pins are put in. Pins are subtracted from the strategy's answer rather than withheld from
its input: a pin then moves exactly the partition pinned, where renumbering the rest would
move most of its topic each time a pin comes or goes (docs/design-decisions.md).

An ``assigner`` that raises or answers something that is not a set of configured partitions
leaves the previous target in force; its failure waits for the application's next call.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping
from types import MappingProxyType

from client_balance._logging import get_logger
from client_balance.consumer._hooks import PartitionHooks
from client_balance.consumer._meta import MetaCache
from client_balance.consumer._results import AssignmentContext, MemberView, PartitionMeta
from client_balance.consumer._setup import MemberSetup, user_target
from client_balance.errors import ClientBalanceError, ConfigError, PinConflictError
from client_balance.keys import RESUME_OFFSET, TopicPartition, to_topic_partition
from client_balance.membership import MemberReport, StatusMember
from client_balance.settings import GroupMode
from client_balance.strategies import Member, get_strategy
from client_balance.strategies._nodes import node_share, partition_counts

__all__ = ["TargetPlanner", "check_pin_topics"]

_log = get_logger("reconcile")

_WATERMARKS_MAX_AGE_S = 1.0
"""An assigner's watermarks are at most this old: one query for all partitions per second."""


class TargetPlanner:
    """The member's target each round (module docstring), and the pins it publishes."""

    def __init__(
        self,
        member: MemberSetup,
        meta: MetaCache,
        hooks: PartitionHooks,
        pins: Mapping[TopicPartition, int],
    ) -> None:
        self._member = member
        self._meta = meta
        self._hooks = hooks
        self._lock = threading.Lock()  # pin()/unpin() come from the application's threads
        self._pins = dict(pins)
        self._previous: dict[TopicPartition, int] = {}
        # The assigner's last answer that held: a round whose assigner fails keeps to it, with
        # the pins of now on top (the whole last target had an unpinned partition still in it).
        self._last_answer: dict[TopicPartition, int] = {}
        self._share_memo: tuple[object, tuple[TopicPartition, ...]] | None = None
        """A node's last share and what it was computed from (``_node_share``)."""

    # ------------------------------------------------------------------ pins
    def pins(self) -> dict[TopicPartition, int]:
        """The member's pins: partition -> bootstrap offset (-1 resumes)."""
        with self._lock:
            return dict(self._pins)

    def pinned_keys(self) -> list[str]:
        """The member's pins as ``"topic:partition"``, sorted, for its report."""
        return [str(partition) for partition in sorted(self.pins())]

    def pin(
        self, wanted: Mapping[TopicPartition, int], pinned_by: Mapping[TopicPartition, str]
    ) -> None:
        """Add pins, or raise :class:`PinConflictError` if another live member pinned one.

        ``pinned_by`` is every live pin of the group (partition -> the member that pinned it).
        """
        me = self._member.consumer_id
        check_pin_topics(self._member.topics, wanted)
        for partition in sorted(wanted):
            owner = pinned_by.get(partition)
            if owner is not None and owner != me:
                key = self._meta.key(partition)
                raise PinConflictError(
                    f"partition {key} is pinned by the live member {owner}; a partition has one "
                    "pinning member: unpin it there first",
                    key=key,
                    holder=owner,
                )
        with self._lock:
            self._pins.update(wanted)

    def unpin(self, partitions: Iterable[TopicPartition]) -> None:
        """Remove pins (those not pinned are ignored)."""
        with self._lock:
            for partition in partitions:
                self._pins.pop(partition, None)

    def _yield_contested(self, others: Mapping[TopicPartition, str]) -> None:
        """Drop pins another member pinned first (two pinned at once): it keeps them."""
        with self._lock:
            contested = sorted(self._pins.keys() & others.keys())
            for partition in contested:
                del self._pins[partition]
        for partition in contested:
            key = self._meta.key(partition)
            error = PinConflictError(
                f"partition {key} was pinned by the live member {others[partition]} first; "
                "this member's pin of it is dropped",
                key=key,
                holder=others[partition],
            )
            _log.warning("pin dropped", partition=key, pinned_by=others[partition])
            self._hooks.failures.store(error)

    # ------------------------------------------------------------------ the target
    def target(
        self,
        meta: Mapping[TopicPartition, PartitionMeta],
        held: set[TopicPartition],
        status: StatusMember | None,
    ) -> dict[TopicPartition, int]:
        """The partitions (-> bootstrap offsets) this member should hold now."""
        member = self._member
        pinned_by = status.pins() if status is not None else {}
        others = {tp: owner for tp, owner in pinned_by.items() if owner != member.consumer_id}
        self._yield_contested(others)
        if member.assigner is not None:
            target = self._ask_assigner(meta, held, status)
        elif member.mode is GroupMode.ELASTIC and status is not None:
            target = self._elastic_target(status, meta)
        elif member.mode is GroupMode.NODE:
            target = self._node_share(meta)
        else:
            target = dict.fromkeys((tp for tp in held if tp in meta), RESUME_OFFSET)
        for partition in others:
            target.pop(partition, None)
        target.update(self.pins())
        self._previous = target
        return dict(target)

    @property
    def expects_share(self) -> bool:
        """Whether the member is a node whose share follows from the metadata alone."""
        return self._member.assigner is None and self._member.mode is GroupMode.NODE

    def expected(self, meta: Mapping[TopicPartition, PartitionMeta]) -> dict[TopicPartition, int]:
        """What a node expects to hold before it knows its group: its share and its own pins.

        Only partitions that can be read now. Empty for any other member: what it holds
        depends on the group (or on its callback).
        """
        if not self.expects_share:
            return {}
        expected = self._node_share(meta)
        expected.update(self.pins())
        return {tp: o for tp, o in expected.items() if tp in meta and meta[tp].subscribable}

    def _node_share(
        self, meta: Mapping[TopicPartition, PartitionMeta]
    ) -> dict[TopicPartition, int]:
        member = self._member
        strategy = get_strategy(member.strategy_name)
        counts = partition_counts(meta)
        inputs = (strategy, sorted(counts.items()), member.source_count, member.node_id)
        memo = self._share_memo
        if memo is not None and memo[0] == inputs:
            # Every node computes the whole assignment on its own, so a strategy must answer
            # the same inputs the same way: the same counts, the same share. Asking again cost
            # a steady round at 15,000 partitions a quarter of its CPU.
            share = memo[1]
        else:
            share = tuple(sorted(node_share(strategy, counts, member.source_count, member.node_id)))
            self._share_memo = (inputs, share)
        return dict.fromkeys(share, RESUME_OFFSET)

    def _ask_assigner(
        self,
        meta: Mapping[TopicPartition, PartitionMeta],
        held: set[TopicPartition],
        status: StatusMember | None,
    ) -> dict[TopicPartition, int]:
        assert self._member.assigner is not None  # noqa: S101 - target() checked it
        context = self._context(held, status)
        try:
            answer = user_target(self._member.assigner(context))
        except ClientBalanceError as error:
            self._hooks.failed("assigner", f"answered something that is not partitions: {error}")
            return dict(self._last_answer)
        except Exception as error:  # whatever the callback raises waits for the next call
            self._hooks.failed("assigner", error)
            return dict(self._last_answer)
        unknown = sorted(tp for tp in answer if tp not in meta)
        if unknown:
            self._hooks.failed(
                "assigner",
                f"answered partitions outside the configured set of {sorted(self._member.topics)}"
                f": {[str(tp) for tp in unknown]}",
            )
            return dict(self._last_answer)
        self._last_answer = answer
        return dict(answer)

    def _context(self, held: set[TopicPartition], status: StatusMember | None) -> AssignmentContext:
        member = self._member
        holders = status.holders() if status is not None else {}
        full = self._meta.with_watermarks(_WATERMARKS_MAX_AGE_S, holders)
        reports = status.live_reports() if status is not None else {}
        return AssignmentContext(
            group_id=member.settings.group_id,
            consumer_id=member.consumer_id,
            mode=member.mode.value,
            source_count=member.source_count,
            node_id=member.node_id,
            topics=tuple(sorted(member.topics)),
            partitions=MappingProxyType({meta.key: meta for meta in full.values()}),
            members=tuple(self._view(report) for _, report in sorted(reports.items())),
            held=frozenset(self._meta.key(tp) for tp in held),
            pinned=frozenset(self._meta.key(tp) for tp in self.pins()),
            previous_target=frozenset(self._meta.key(tp) for tp in self._previous),
            round_number=self._hooks.round_number,
        )

    def _view(self, report: MemberReport) -> MemberView:
        held = {
            self._meta.key(to_topic_partition(key)): position.lag
            for key, position in sorted(report.held.items())
        }
        return MemberView(
            consumer_id=report.consumer_id,
            node_id=report.node_id,
            mode=report.mode,
            pinned=frozenset(self._meta.key(tp) for tp in report.pinned_partitions()),
            held=MappingProxyType(held),
            fenced=report.fenced,
        )

    def _elastic_target(
        self, status: StatusMember, meta: Mapping[TopicPartition, PartitionMeta]
    ) -> dict[TopicPartition, int]:
        """The share of this member when the members are the live elastic reporters."""
        members = status.elastic_members()
        if self._member.consumer_id not in members:
            return {}
        counts = partition_counts(meta)
        group = [
            Member(member_id, topics & counts.keys(), sorted(owned), generation=1)
            for member_id, (topics, owned) in sorted(members.items())
        ]
        assignment = get_strategy(self._member.strategy_name).assign(counts, group)
        return dict.fromkeys(assignment.get(self._member.consumer_id, ()), RESUME_OFFSET)


def check_pin_topics(topics: Collection[str], wanted: Iterable[TopicPartition]) -> None:
    """Raise :class:`ConfigError` for a pin of a topic the member does not consume."""
    for partition in sorted(wanted):
        if partition.topic not in topics:
            raise ConfigError(
                f"cannot pin {partition}: its topic is not one this member consumes "
                f"({sorted(topics)})"
            )
