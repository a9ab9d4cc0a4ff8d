"""The operator's view of a client-balanced group, and the list of groups.

:class:`GroupView` reads the group's records from the status topic once (the same records the
members decide by), adds the group's committed offsets and the high watermarks from Kafka, and
derives what operators ask: who holds what, how far behind each partition is, which partitions
nobody holds, and what contradicts TubeMQ's rules (node ids twice, differing source counts).
Members are live while their last record is within their lease of the newest record or of
this host's clock, whichever is later (a group whose members all died would otherwise look
alive forever); ``broker_clock=True`` takes the broker's time instead, as members do, for
verdicts that act (``reset_offsets``): a host clock ahead of the broker's makes live members
look dead.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from client_balance._kafka import partition_offsets
from client_balance.admin._read import read_group, read_group_at
from client_balance.keys import TopicPartition
from client_balance.membership import (
    GroupState,
    StatusReader,
    ensure_status_topic,
    parse_key,
    status_secret,
)
from client_balance.settings import ClientBalanceSettings

__all__ = ["GroupView", "MemberView", "PartitionView", "list_groups", "read_group"]


@dataclass(frozen=True)
class MemberView:
    """One member as its last report shows it."""

    consumer_id: str
    host: str
    pid: int
    node_id: int
    source_count: int
    mode: str
    """Its group mode: ``node``, ``manual``, ``elastic``, or ``spark`` (a streaming query)."""
    topics: tuple[str, ...]
    strategy: str
    version: str
    live: bool
    fenced: bool
    last_seen_s: float
    """Seconds since its last record (by the view's ``clock``)."""
    holds: tuple[str, ...]
    """``topic:partition`` keys it holds by its claims."""
    lag: int | None
    """Sum of its partitions' lag (high watermark minus the group's committed offset)."""
    pinned: tuple[str, ...] = ()
    """``topic:partition`` keys it pinned: no other member takes them."""


@dataclass(frozen=True)
class PartitionView:
    """One partition of the group's topics."""

    topic: str
    partition: int
    holder: str | None
    committed: int | None
    high: int | None
    position: int | None = None
    """Its holder's confirmed offset as the holder last reported it (a report interval old at
    most); None when nobody holds it or the report does not list it."""

    @property
    def lag(self) -> int | None:
        """Messages after the committed offset (all of them when nothing is committed)."""
        if self.high is None:
            return None
        return max(self.high - (self.committed or 0), 0)


@dataclass(frozen=True)
class GroupView:
    """Members, partitions, offsets, orphans and conflicts of one client-balanced group."""

    group: str
    members: tuple[MemberView, ...]
    partitions: tuple[PartitionView, ...]
    conflicts: tuple[str, ...] = field(default=())
    skipped_records: int = 0
    """The group's status records that were not applied: malformed, or (with
    ``status_secret``) without a valid signature or replayed. Not 0: someone writes records
    this version cannot read, a member has another secret, or a client forges records."""
    clock: str = "local"
    """What liveness and ``last_seen_s`` were judged by: ``broker`` (the broker's time, as
    members judge) or ``local`` (the later of the newest record's time and this host's clock:
    a host clock ahead of the broker's shows live members as dead)."""

    @property
    def live_members(self) -> tuple[MemberView, ...]:
        """The members whose lease has not run out."""
        return tuple(member for member in self.members if member.live)

    @property
    def orphaned(self) -> tuple[PartitionView, ...]:
        """Partitions of the group's topics that no live member holds."""
        return tuple(p for p in self.partitions if p.holder is None)

    @property
    def total_lag(self) -> int:
        """Lag summed over the partitions whose high watermark is known."""
        return sum(p.lag or 0 for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "group": self.group,
            "members": [asdict(m) for m in self.members],
            "partitions": [{**asdict(p), "lag": p.lag} for p in self.partitions],
            "orphaned": [f"{p.topic}:{p.partition}" for p in self.orphaned],
            "conflicts": list(self.conflicts),
            "skipped_records": self.skipped_records,
            "total_lag": self.total_lag,
            "clock": self.clock,
        }

    @classmethod
    def load(
        cls,
        settings: ClientBalanceSettings,
        group: str | None = None,
        *,
        timeout_s: float = 30.0,
        broker_clock: bool = False,
        must_exist: bool = False,
    ) -> GroupView:
        """Read ``group`` (default ``settings.group_id``) from the status topic and Kafka.

        ``broker_clock``: judge leases by the broker's time, read from a record this writes to
        the status topic (so it needs Write there), instead of this host's clock. A status
        topic that does not exist is not made: the group has no members, or with
        ``must_exist`` it is a :class:`ConfigError` naming the topic.
        """
        group = group or settings.group_id
        state, _, now_ms = read_group_at(
            settings, group, timeout_s, broker_clock=broker_clock, must_exist=must_exist
        )
        holders = state.live_holders(now_ms)
        members = []
        topics: set[str] = set()
        for consumer_id, member in sorted(state.members.items()):
            report = member.report
            if report is None:
                continue
            live = state.is_alive(consumer_id, now_ms)
            if live:
                topics.update(report.topics)
            members.append(
                MemberView(
                    consumer_id=consumer_id,
                    host=report.host,
                    pid=report.pid,
                    node_id=report.node_id,
                    source_count=report.source_count,
                    mode=report.mode,
                    topics=report.topics,
                    strategy=report.strategy,
                    version=report.version,
                    live=live,
                    fenced=report.fenced,
                    last_seen_s=round((now_ms - member.last_seen_ms) / 1000, 1),
                    holds=tuple(
                        f"{tp.topic}:{tp.partition}"
                        for tp, holder in holders.items()
                        if holder == consumer_id
                    ),
                    lag=None,
                    pinned=tuple(report.pinned),
                )
            )
        positions = {}
        for tp, holder in holders.items():
            report = state.members[holder].report if holder in state.members else None
            held = report.held.get(f"{tp.topic}:{tp.partition}") if report else None
            if held is not None:
                positions[tp] = held.confirmed
        partitions = _partitions(
            settings, group, topics, holders, positions=positions, timeout_s=timeout_s
        )
        # A member's lag from the group's committed offsets, like the partitions' (its own
        # report can be a report interval old).
        lags: dict[str, int] = {}
        for partition in partitions:
            if partition.holder is not None and partition.lag is not None:
                lags[partition.holder] = lags.get(partition.holder, 0) + partition.lag
        members = [replace(m, lag=lags.get(m.consumer_id)) for m in members]
        skipped = sum(state.skipped.values())
        clock = "broker" if broker_clock else "local"
        return cls(group, tuple(members), partitions, _conflicts(members), skipped, clock)


def _partitions(
    settings: ClientBalanceSettings,
    group: str,
    topics: set[str],
    holders: Mapping[TopicPartition, str],
    *,
    positions: Mapping[TopicPartition, int],
    timeout_s: float,
) -> tuple[PartitionView, ...]:
    offsets = partition_offsets(
        settings.bootstrap_servers, group, sorted(topics),
        timeout_s=timeout_s, kafka=settings.admin_config(), skip_missing=True,
    )  # fmt: skip
    return tuple(
        PartitionView(tp.topic, tp.partition, holders.get(tp), committed, high, positions.get(tp))
        for tp, (_, high, committed) in sorted(offsets.items())
    )


def _conflicts(members: list[MemberView]) -> tuple[str, ...]:
    live = [m for m in members if m.live]
    found = []
    counts = sorted({m.source_count for m in live if m.mode == "node"})
    if len(counts) > 1:
        found.append(f"live members disagree on source_count: {counts}")
    by_node: dict[int, list[str]] = {}
    for member in live:
        if member.mode == "node":
            by_node.setdefault(member.node_id, []).append(member.consumer_id)
    found.extend(
        f"node_id {node} is held by {len(ids)} live members: {', '.join(ids)}"
        for node, ids in sorted(by_node.items())
        if len(ids) > 1
    )
    return tuple(found)


def list_groups(settings: ClientBalanceSettings, *, timeout_s: float = 30.0) -> dict[str, int]:
    """Client-balanced groups with members in the status topic -> how many are live."""
    kafka = settings.admin_config()
    count = ensure_status_topic(
        settings.bootstrap_servers, settings.status_topic, kafka=kafka, timeout_s=timeout_s,
        allow_single_replica=True,  # an operator must see a group whatever its topic is like
        create=False,  # none yet: no group has run with it, and a listing changes nothing
    )  # fmt: skip
    states: dict[str, GroupState] = {}
    for partition in range(count):
        reader = StatusReader(
            settings.bootstrap_servers, settings.status_topic, partition, f"?{uuid.uuid4()}",
            kafka=kafka, timeout_s=timeout_s, follow=False, keep_records=True,
            secret=status_secret(settings),
        )  # fmt: skip
        try:
            reader.read_to_end(timeout_s)
        finally:
            reader.close()
        for key, value, offset, stamp in reader.records or ():
            parsed = parse_key(key)
            if parsed is not None:
                group = parsed[1]
                states.setdefault(group, GroupState(group)).apply(key, value, offset, stamp)
    now_ms = int(time.time() * 1000)
    return {
        group: len(state.live_reports(max(state.last_ms, now_ms)))
        for group, state in sorted(states.items())
        if state.members
    }
