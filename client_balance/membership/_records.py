"""The status log's records and the group state that replaying them builds (no Kafka here).

Two kinds of record share the compacted status topic, told apart by their key (a JSON array,
so group ids and consumer ids may contain any character):

- ``["member", group, consumer_id]``: a member report (:class:`MemberReport` as JSON), written
  on change and every ``report_interval_s``; a tombstone when the member shuts down cleanly.
- ``["claim", group, topic, partition, consumer_id]``: a claim on a partition, written before
  the partition is registered; a tombstone withdraws it.

Every record carries the broker's log-append time, and all records of a group sit in one
partition of the topic, so every reader applies the same records in the same order with the
same clock. :class:`GroupState` decides each claim when it applies it: the claim wins unless
another member holds the partition and is alive at the claim's timestamp (its last record is
at most its lease old). Every reader therefore reaches the same verdict on every claim, and a
claimant learns its verdict by reading its own claim back. Compaction keeps the last record
per key, which is all the verdicts need: a holder's claim, and its last report (for its lease).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from client_balance.keys import TopicPartition

__all__ = [
    "DEFAULT_LEASE_MS",
    "Claim",
    "GroupState",
    "HeldPartition",
    "MemberReport",
    "claim_key",
    "member_key",
    "parse_key",
]

DEFAULT_LEASE_MS = 30_000
"""Lease of a member whose report was never seen (a claim written before any report)."""
_MEMBER, _CLAIM = "member", "claim"


def member_key(group: str, consumer_id: str) -> bytes:
    """The key of a member's reports."""
    return json.dumps([_MEMBER, group, consumer_id]).encode()


def claim_key(group: str, partition: TopicPartition, consumer_id: str) -> bytes:
    """The key of a member's claim on a partition."""
    return json.dumps([_CLAIM, group, partition.topic, partition.partition, consumer_id]).encode()


def parse_key(raw: bytes | None) -> tuple[str, str, str, TopicPartition | None] | None:
    """(kind, group, consumer id, partition or None) of a status key; None if foreign."""
    try:
        parts = json.loads(raw or b"")
    except ValueError:
        return None
    if not isinstance(parts, list) or not parts:
        return None
    kind = parts[0]
    if kind == _MEMBER and len(parts) == 3 and all(isinstance(p, str) for p in parts):  # noqa: PLR2004 - the key's shape
        return _MEMBER, parts[1], parts[2], None
    if (
        kind == _CLAIM
        and len(parts) == 5  # noqa: PLR2004 - the key's shape
        and isinstance(parts[1], str)
        and isinstance(parts[2], str)
        and type(parts[3]) is int
        and isinstance(parts[4], str)
    ):
        return _CLAIM, parts[1], parts[4], TopicPartition(parts[2], parts[3])
    return None


@dataclass(frozen=True)
class HeldPartition:
    """A partition in a member report: where the member stands in it."""

    confirmed: int
    committed: int | None
    high: int | None

    @property
    def lag(self) -> int | None:
        """Messages between the confirmed position and the high watermark."""
        return None if self.high is None else max(self.high - self.confirmed, 0)


@dataclass(frozen=True)
class MemberReport:
    """What a member says about itself: who and where it is, its settings, what it holds."""

    consumer_id: str
    host: str
    pid: int
    node_id: int
    source_count: int
    topics: tuple[str, ...]
    strategy: str
    version: str
    lease_timeout_s: float
    held: dict[str, HeldPartition] = field(default_factory=dict)
    """``"topic:partition"`` -> position."""
    join_offset: int | None = None
    """Offset of the member's first report (None in that report itself): who came first."""
    fenced: bool = False
    mode: str = "node"
    """The member's group mode (``node``, ``manual``, ``elastic``)."""
    status_partitions: int = 0
    """Its ``status_topic_partitions`` (0: a report from before the setting existed)."""
    filters: dict[str, list[str]] = field(default_factory=dict)
    """Topic -> its filter values, sorted, for the topics started with a filter set."""
    pinned: list[str] = field(default_factory=list)
    """``"topic:partition"`` of the partitions it pinned, sorted: no other member takes them."""

    def encode(self) -> bytes:
        """The record value."""
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> MemberReport:
        """Parse a record value (ValueError/TypeError/KeyError if it is not a report)."""
        data: dict[str, Any] = json.loads(raw)
        # A newer member's report may carry fields this version does not know: still a member.
        data = {name: value for name, value in data.items() if name in _REPORT_FIELDS}
        data["topics"] = tuple(data["topics"])
        data["held"] = {key: HeldPartition(**value) for key, value in data["held"].items()}
        # Reports written before modes were explicit: a positive source_count was a node, -1
        # an elastic member, 0 the application's own.
        count = data["source_count"]
        data.setdefault("mode", "node" if count > 0 else "elastic" if count < 0 else "manual")
        return cls(**data)

    def held_partitions(self) -> set[TopicPartition]:
        """The held partitions as (topic, partition)."""
        return {_identity(key) for key in self.held}

    def pinned_partitions(self) -> set[TopicPartition]:
        """The pinned partitions as (topic, partition)."""
        return {_identity(key) for key in self.pinned}


_REPORT_FIELDS = frozenset(MemberReport.__dataclass_fields__)


def _identity(key: str) -> TopicPartition:
    topic, _, number = key.rpartition(":")
    return TopicPartition(topic, int(number))


@dataclass
class _Member:
    report: MemberReport | None
    last_seen_ms: int
    join_offset: int

    @property
    def lease_ms(self) -> int:
        if self.report is None:
            return DEFAULT_LEASE_MS
        return int(self.report.lease_timeout_s * 1000)


@dataclass(frozen=True)
class Claim:
    """A winning claim: who holds the partition since which record."""

    consumer_id: str
    offset: int
    timestamp_ms: int


@dataclass
class GroupState:
    """One group's members and partition holders, from its status records in log order."""

    group: str
    members: dict[str, _Member] = field(default_factory=dict)
    holders: dict[TopicPartition, Claim] = field(default_factory=dict)
    verdicts: dict[int, str | None] = field(default_factory=dict)
    """Claim offset -> None if it won, else the holder it lost to (``verdicts_of``'s claims)."""
    verdicts_of: str | None = None
    """The member whose verdicts are kept (its own reader's member); None keeps none."""
    last_ms: int = 0
    """Broker time of the latest record applied."""
    position: int = 0
    """Offset after the latest record applied."""
    _defeated: dict[bytes, None] = field(default_factory=dict)
    """Keys of claims that lost to ``verdicts_of``'s member and are not withdrawn (in order)."""

    def apply(  # noqa: PLR0911 - one return per verdict reads best here
        self, key: bytes | None, value: bytes | None, offset: int, timestamp_ms: int
    ) -> bool:
        """Apply one record of the status partition; True if it changed members or holders."""
        self.position = max(self.position, offset + 1)
        self.last_ms = max(self.last_ms, timestamp_ms)
        parsed = parse_key(key)
        if parsed is None or parsed[1] != self.group:
            return False
        kind, _, consumer_id, partition = parsed
        if kind == _MEMBER:
            return self._apply_report(consumer_id, value, offset, timestamp_ms)
        assert partition is not None  # noqa: S101 - claim keys always name one
        holder = self.holders.get(partition)
        if value is None:  # withdrawn
            # No sign of life: the winner of a contest or a reaper may write it for the member.
            self._defeated.pop(key, None)  # type: ignore[arg-type]  # a claim key is bytes
            if holder is not None and holder.consumer_id == consumer_id:
                del self.holders[partition]
                return True
            return False
        self._seen(consumer_id, timestamp_ms, offset)
        keep = consumer_id == self.verdicts_of
        if (
            holder is not None
            and holder.consumer_id != consumer_id
            and self.is_alive(holder.consumer_id, timestamp_ms)
        ):
            if keep:
                self.verdicts[offset] = holder.consumer_id
            if holder.consumer_id == self.verdicts_of and key is not None:
                self._defeated[key] = None
            return False
        if keep:
            self.verdicts[offset] = None
        if holder is not None and holder.consumer_id == consumer_id:
            return False  # a repeated claim keeps its first place
        self.holders[partition] = Claim(consumer_id, offset, timestamp_ms)
        return True

    def take_defeated(self) -> list[bytes]:
        """Keys of claims that lost to ``verdicts_of``'s member since the last call.

        That member tombstones them: the verdict depended on its reports between its claim
        and the contest, which compaction deletes, so a claim left standing (its member killed
        before withdrawing it) would be judged a win by a reader replaying the compacted log.
        """
        keys, self._defeated = list(self._defeated), {}
        return keys

    def dead_records(self, now_ms: int, grace_ms: int) -> dict[str, list[bytes]]:
        """Members dead for longer than ``grace_ms`` past their lease -> keys to tombstone.

        The keys are the member's report and its standing claims: compaction keeps a dead
        member's last records forever otherwise, and every start replays them.
        """
        dead = {
            consumer_id
            for consumer_id, member in self.members.items()
            if now_ms - member.last_seen_ms > member.lease_ms + grace_ms
        }
        keys: dict[str, list[bytes]] = {consumer_id: [] for consumer_id in sorted(dead)}
        for partition, claim in sorted(self.holders.items()):
            if claim.consumer_id in dead:
                keys[claim.consumer_id].append(claim_key(self.group, partition, claim.consumer_id))
        for consumer_id, member_keys in keys.items():  # the report last: it ends the member
            member_keys.append(member_key(self.group, consumer_id))
        return keys

    def defeated_again(self, keys: list[bytes]) -> None:
        """Hand ``keys`` out again (their tombstones could not be written)."""
        self._defeated.update(dict.fromkeys(keys))

    def _apply_report(
        self, consumer_id: str, value: bytes | None, offset: int, timestamp_ms: int
    ) -> bool:
        if value is None:  # a clean shutdown: the member and its claims are gone
            self.members.pop(consumer_id, None)
            for partition in [p for p, c in self.holders.items() if c.consumer_id == consumer_id]:
                del self.holders[partition]
            return True
        try:
            report = MemberReport.decode(value)
        except (ValueError, TypeError, KeyError):
            return False
        joined = consumer_id not in self.members
        member = self._seen(consumer_id, timestamp_ms, offset)
        before = member.report
        changed = (
            joined
            or before is None
            or (before.fenced, before.pinned)
            != (
                report.fenced,
                report.pinned,
            )
        )
        member.report = report
        member.join_offset = report.join_offset if report.join_offset is not None else offset
        return changed

    def _seen(self, consumer_id: str, timestamp_ms: int, offset: int) -> _Member:
        member = self.members.get(consumer_id)
        if member is None:
            member = self.members[consumer_id] = _Member(None, timestamp_ms, offset)
        member.last_seen_ms = max(member.last_seen_ms, timestamp_ms)
        return member

    def is_alive(self, consumer_id: str, now_ms: int) -> bool:
        """Whether the member's last record is at most its lease old at ``now_ms``."""
        member = self.members.get(consumer_id)
        return member is not None and now_ms - member.last_seen_ms <= member.lease_ms

    def live_reports(self, now_ms: int | None = None) -> dict[str, MemberReport]:
        """Reports of the members alive at ``now_ms`` (default: the latest record's time)."""
        now = self.last_ms if now_ms is None else now_ms
        return {
            consumer_id: member.report
            for consumer_id, member in sorted(self.members.items())
            if member.report is not None and self.is_alive(consumer_id, now)
        }

    def join_order(self, consumer_id: str) -> tuple[int, str]:
        """Sort key of who joined first (earliest first report, then id)."""
        member = self.members.get(consumer_id)
        return (member.join_offset if member is not None else 1 << 62, consumer_id)

    def live_holders(self, now_ms: int | None = None) -> dict[TopicPartition, str]:
        """Partition -> holder, for holders alive at ``now_ms`` (default: latest record's)."""
        now = self.last_ms if now_ms is None else now_ms
        return {
            partition: claim.consumer_id
            for partition, claim in sorted(self.holders.items())
            if self.is_alive(claim.consumer_id, now)
        }
