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
at most its lease old). Every reader thus reaches the same verdict on every claim; a claimant
learns its verdict by reading its own claim back. Compaction keeps the last record per key,
which is all the verdicts need: a holder's claim, and its last report (for its lease).

A record of the group that does not validate (``_report.py``) is skipped and counted, never
raised; with ``status_secret`` only validly signed records are applied (``_signing.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from client_balance.keys import TopicPartition
from client_balance.membership._keys import (
    MEMBER,
    claim_key,
    member_key,
    parse_key,
    quoted_group,
)
from client_balance.membership._report import HeldPartition, MemberReport, is_claim_value

__all__ = [
    "DEFAULT_LEASE_MS",
    "Claim",
    "GroupState",
    "HeldPartition",
    "MemberReport",
    "Skipped",
]

DEFAULT_LEASE_MS = 30_000
"""Lease of a member whose report was never seen (a claim written before any report)."""


MALFORMED, UNSIGNED, REPLAYED = "malformed", "unsigned", "replayed"
"""Why a record of the group was skipped: invalid; no valid signature; a signed record again."""


@dataclass
class _Member:
    report: MemberReport | None
    last_seen_ms: int
    join_offset: int
    signed: bool = False
    """Whether its last report carried a signature (what a reader without the secret sees)."""
    report_raw: bytes | None = None
    """The record value ``report`` was decoded from: the same bytes again need no decoding."""

    @property
    def lease_ms(self) -> int:
        return DEFAULT_LEASE_MS if self.report is None else int(self.report.lease_timeout_s * 1000)


@dataclass(frozen=True)
class Claim:
    """A winning claim: who holds the partition since which record."""

    consumer_id: str
    offset: int
    timestamp_ms: int


@dataclass(frozen=True)
class Skipped:
    """A record of the group that was not applied, and why (for the reader's log)."""

    offset: int
    key: str
    """The key as text, cut short: it may be anything its writer chose."""
    reason: str
    """``malformed``, ``unsigned`` or ``replayed``."""
    detail: str


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
    skipped: dict[str, int] = field(default_factory=dict)
    """Records of the group not applied, by reason (``malformed``, ``unsigned``, ``replayed``)."""
    last_skipped: Skipped | None = None
    """The latest of them."""
    unsigned: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Consumer id -> (broker ms, lease ms) of its latest well-formed report that was skipped
    as unsigned: a member without the secret, if it goes on reporting (or a forger)."""
    _defeated: dict[bytes, None] = field(default_factory=dict)
    """Keys of claims that lost to ``verdicts_of``'s member and are not withdrawn (in order)."""
    _open_claims: dict[str, set[TopicPartition]] = field(default_factory=dict)
    """Member -> partitions of its claim records not withdrawn: won, lost or taken over since.
    All of a dead member's go with it (``dead_records``): compaction keeps each one otherwise."""
    _watched: set[str] = field(default_factory=set)
    """Members alive when last looked at, whose lapse is a change (see ``lapsed``)."""
    _next_lapse_ms: float = float("inf")
    """The broker time at which the first of ``_watched`` lapses, or earlier."""

    def apply(
        self,
        key: bytes | None,
        value: bytes | None,
        offset: int,
        timestamp_ms: int,
        *,
        signed: bool = False,
    ) -> bool:
        """Apply one record of the status partition; True if it changed members or holders.

        A member whose lease ran out by this record's time is a change too: nothing else
        would say so, and the members that take over its partitions should not wait for
        their next round to notice. A record of the group that does not validate is skipped
        and counted (``skipped``), never raised. ``signed``: the record carried a signature.
        """
        changed = self._apply(key, value, offset, timestamp_ms, signed=signed)
        return self.lapsed() or changed

    def lapsed(self) -> bool:
        """Whether a watched member lapsed by ``last_ms`` (then the watch starts afresh)."""
        if self.last_ms < self._next_lapse_ms:
            return False
        lapsed = any(not self.is_alive(member_id, self.last_ms) for member_id in self._watched)
        self._watched = {m for m in self.members if self.is_alive(m, self.last_ms)}
        self._next_lapse_ms = min(
            (self._lapse_ms(member_id) for member_id in self._watched), default=float("inf")
        )
        return lapsed

    def _watch(self, consumer_id: str) -> None:
        self._watched.add(consumer_id)
        self._next_lapse_ms = min(self._next_lapse_ms, self._lapse_ms(consumer_id))

    def _lapse_ms(self, consumer_id: str) -> int:
        member = self.members[consumer_id]
        return member.last_seen_ms + member.lease_ms + 1  # alive while at most its lease old

    def pass_over(self, offset: int, timestamp_ms: int) -> None:
        """Move the position and the clock past a record, as any record applied does."""
        self.position = max(self.position, offset + 1)
        self.last_ms = max(self.last_ms, timestamp_ms)

    def _apply(  # noqa: PLR0911 - one return per verdict reads best here
        self, key: bytes | None, value: bytes | None, offset: int, timestamp_ms: int,
        *, signed: bool = False,
    ) -> bool:  # fmt: skip
        self.pass_over(offset, timestamp_ms)
        if key is None or quoted_group(self.group) not in key:  # the status topic is shared:
            return False  # most of it is other groups', told apart without parsing JSON
        parsed = parse_key(key)
        if parsed is None or parsed[1] != self.group:
            return False
        kind, _, consumer_id, partition = parsed
        if kind == MEMBER:
            return self._apply_report(key, consumer_id, value, offset, timestamp_ms, signed=signed)
        assert partition is not None  # noqa: S101 - claim keys always name one
        if value is not None and not is_claim_value(value):
            self._skip(key, offset, MALFORMED, "a claim's value must be a JSON object")
            return False
        holder = self.holders.get(partition)
        if value is None:  # withdrawn
            # No sign of life: the winner of a contest or a reaper may write it for the member.
            self._defeated.pop(key, None)
            self._open_claims.get(consumer_id, set()).discard(partition)
            if holder is not None and holder.consumer_id == consumer_id:
                del self.holders[partition]
                return True
            return False
        self._seen(consumer_id, timestamp_ms, offset)
        self._open_claims.setdefault(consumer_id, set()).add(partition)
        keep = consumer_id == self.verdicts_of
        if (
            holder is not None
            and holder.consumer_id != consumer_id
            and self.is_alive(holder.consumer_id, timestamp_ms)
        ):
            if keep:
                self.verdicts[offset] = holder.consumer_id
            if holder.consumer_id == self.verdicts_of:
                self._defeated[key] = None
            return False
        if holder is not None and holder.consumer_id == consumer_id:
            # A repeated claim keeps its first place; no verdict is kept for it (a claim's
            # missing verdict reads as won), so claims re-asserted on every report pile nothing up.
            return False
        if keep:
            self.verdicts[offset] = None
        self.holders[partition] = Claim(consumer_id, offset, timestamp_ms)
        return True

    def reject(
        self, key: bytes | None, value: bytes | None, offset: int, timestamp_ms: int, reason: str
    ) -> None:
        """Pass over a record the reader will not apply (``unsigned``, ``replayed``).

        It moves the position only: a record nobody may trust says nothing of time or life.
        An unsigned report is remembered (``unsigned``) so that a member can name the members
        that write without the secret.
        """
        self.position = max(self.position, offset + 1)
        parsed = parse_key(key)
        if parsed is None or parsed[1] != self.group:
            return
        assert key is not None  # noqa: S101 - parse_key named a record of the group
        kind, _, consumer_id, _ = parsed
        self._skip(key, offset, reason, "" if reason != UNSIGNED else "no valid signature")
        if reason != UNSIGNED or kind != MEMBER:
            return
        if value is None:
            self.unsigned.pop(consumer_id, None)
            return
        try:
            report = MemberReport.decode(value)
        except ValueError:
            return
        self.unsigned[consumer_id] = (timestamp_ms, int(report.lease_timeout_s * 1000))

    def unsigned_live(self, now_ms: int | None = None) -> list[str]:
        """Ids whose latest unsigned report is at most its lease old at ``now_ms``."""
        now = self.last_ms if now_ms is None else now_ms
        return sorted(m for m, (at, lease) in self.unsigned.items() if now - at <= lease)

    def signed_live(self, now_ms: int | None = None) -> list[str]:
        """Live members whose last report carried a signature."""
        now = self.last_ms if now_ms is None else now_ms
        return sorted(
            member_id
            for member_id, member in self.members.items()
            if member.signed and self.is_alive(member_id, now)
        )

    def _skip(self, key: bytes, offset: int, reason: str, detail: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        text = key.decode(errors="replace")
        self.last_skipped = Skipped(offset, text[:200], reason, detail)

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

        The keys are the member's report and every claim of its not withdrawn, held or not:
        compaction keeps a dead member's last records forever otherwise, and every start
        replays them (a claim record alone brings the member back to a reader).
        """
        dead = {
            consumer_id
            for consumer_id, member in self.members.items()
            if now_ms - member.last_seen_ms > member.lease_ms + grace_ms
        }
        return {
            consumer_id: [
                *(
                    claim_key(self.group, partition, consumer_id)
                    for partition in sorted(self._open_claims.get(consumer_id, ()))
                ),
                member_key(self.group, consumer_id),  # the report last: it ends the member
            ]
            for consumer_id in sorted(dead)
        }

    def defeated_again(self, keys: list[bytes]) -> None:
        """Hand ``keys`` out again (their tombstones could not be written), if still defeated.

        Not a claim withdrawn meanwhile, nor one whose member holds the partition: it may have
        claimed again, under the same key, and won; the tombstone would withdraw that claim.
        """
        for key in keys:
            _, _, consumer_id, partition = parse_key(key) or ("", "", "", None)
            if partition is None or partition not in self._open_claims.get(consumer_id, ()):
                continue
            holder = self.holders.get(partition)
            if holder is None or holder.consumer_id != consumer_id:
                self._defeated[key] = None

    def _apply_report(
        self,
        key: bytes,
        consumer_id: str,
        value: bytes | None,
        offset: int,
        timestamp_ms: int,
        *,
        signed: bool,
    ) -> bool:
        if value is None:  # a clean shutdown: the member and its claims are gone
            self.members.pop(consumer_id, None)
            self._open_claims.pop(consumer_id, None)
            self._watched.discard(consumer_id)
            for partition in [p for p, c in self.holders.items() if c.consumer_id == consumer_id]:
                del self.holders[partition]
            return True
        known = self.members.get(consumer_id)
        if known is not None and known.report is not None and known.report_raw == value:
            # A member's report changes only when what it holds moves, and every start replays
            # each one: 60,000 reports of a quiet group of 1,000 took 0.8 s to decode anew.
            report = known.report
        else:
            try:
                report = MemberReport.decode(value)
            except ValueError as error:
                self._skip(key, offset, MALFORMED, str(error))
                return False
            if report.consumer_id != consumer_id:
                self._skip(key, offset, MALFORMED, "consumer_id differs from the key's")
                return False
        joined = known is None
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
        member.report, member.signed, member.report_raw = report, signed, value
        member.join_offset = report.join_offset if report.join_offset is not None else offset
        self._watch(consumer_id)  # its lease is the report's now
        return changed

    def _seen(self, consumer_id: str, timestamp_ms: int, offset: int) -> _Member:
        member = self.members.get(consumer_id)
        if member is None:
            member = self.members[consumer_id] = _Member(None, timestamp_ms, offset)
        member.last_seen_ms = max(member.last_seen_ms, timestamp_ms)
        self._watch(consumer_id)
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
