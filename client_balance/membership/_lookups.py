"""What a member reads of its group's state: holders, pins, live reports (``StatusMember``'s)."""

from __future__ import annotations

from collections.abc import Iterable

from client_balance.keys import TopicPartition
from client_balance.membership._log import StatusReader
from client_balance.membership._records import MemberReport

__all__ = ["GroupLookups"]


class GroupLookups:
    """Questions answered from the group's state as the member's reader has it now."""

    _reader: StatusReader
    _id: str

    def claimable(self, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Those of ``partitions`` no other live member holds, as the view stands.

        A claim on the others would lose, and cost a write, its withdrawal and the holder's
        tombstone of it; the holder's withdrawal, or its lapse, changes the view (and wakes
        the reconcile round) when the partition is free.
        """
        with self._reader.lock:
            holders = self._reader.state.live_holders()
        return {tp for tp in partitions if holders.get(tp) in (None, self._id)}

    def holders(self) -> dict[TopicPartition, str]:
        """Live holder of each held partition, as the view stands."""
        with self._reader.lock:
            return self._reader.state.live_holders()

    def pins(self) -> dict[TopicPartition, str]:
        """Pinned partition -> the live member that pinned it (the earliest to join, if two)."""
        with self._reader.lock:
            state = self._reader.state
            reports = state.live_reports()
            order = sorted(reports, key=state.join_order)
        pins: dict[TopicPartition, str] = {}
        for member_id in order:
            for partition in sorted(reports[member_id].pinned_partitions()):
                pins.setdefault(partition, member_id)
        return pins

    def live_reports(self) -> dict[str, MemberReport]:
        """The live members' last reports, by consumer id (sorted)."""
        with self._reader.lock:
            return self._reader.state.live_reports()

    def known_members(self) -> set[str]:
        """Every member with a record in the status log read so far, live or not."""
        with self._reader.lock:
            return set(self._reader.state.members)

    def elastic_members(self) -> dict[str, tuple[frozenset[str], set[TopicPartition]]]:
        """Live elastic members (mode ``elastic``): id -> (topics, partitions held)."""
        with self._reader.lock:
            state = self._reader.state
            holders = state.live_holders()
            members = {
                member_id: (frozenset(report.topics), set[TopicPartition]())
                for member_id, report in state.live_reports().items()
                if report.mode == "elastic" and not report.fenced
            }
        for partition, holder in holders.items():
            if holder in members:
                members[holder][1].add(partition)
        return members
