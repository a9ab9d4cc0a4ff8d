"""The group state replayed from status records: claims, leases, reports, tombstones."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, cast

import pytest

from client_balance.keys import TopicPartition
from client_balance.membership import (
    GroupState,
    HeldPartition,
    MemberReport,
    claim_key,
    member_key,
    parse_key,
)
from client_balance.membership._lookups import GroupLookups

if TYPE_CHECKING:
    from client_balance.membership._log import StatusReader

GROUP = "billing"
P0 = TopicPartition("orders", 0)
P1 = TopicPartition("orders", 1)


def report(consumer_id: str, *, node_id: int = 0, lease_s: float = 30.0) -> bytes:
    """A member report as its owner would write it."""
    return MemberReport(
        consumer_id=consumer_id,
        host="h",
        pid=1,
        node_id=node_id,
        source_count=2,
        topics=("orders",),
        strategy="modulo",
        version="v",
        lease_timeout_s=lease_s,
        held={"orders:0": HeldPartition(5, 5, 9)},
    ).encode()


class Log:
    """Applies records with increasing offsets to one state, as the reader does."""

    def __init__(self, keep_verdicts_of: str | None = None) -> None:
        self.state = GroupState(GROUP, verdicts_of=keep_verdicts_of)
        self.offset = 0

    def add(self, key: bytes, value: bytes | None, at_ms: int) -> int:
        """Apply a record at broker time ``at_ms``; its offset."""
        offset = self.offset
        self.state.apply(key, value, offset, at_ms)
        self.offset += 1
        return offset

    def claim(self, consumer_id: str, partition: TopicPartition, at_ms: int) -> str | None:
        """Claim and return the verdict (None = won, else the holder)."""
        offset = self.add(claim_key(GROUP, partition, consumer_id), b"{}", at_ms)
        return self.state.verdicts.get(offset)


def test_keys_round_trip_and_foreign_keys_are_ignored() -> None:
    """Member and claim keys parse back; keys of other shapes parse to None."""
    assert parse_key(member_key("g|x", "c:1")) == ("member", "g|x", "c:1", None)
    assert parse_key(claim_key("g", P1, "c")) == ("claim", "g", "c", P1)
    foreign_keys = [None, b"", b"not json", b"[]", b'["member", "g"]', b'["claim","g","t","1","c"]']
    for foreign in foreign_keys:
        assert parse_key(foreign) is None


def test_report_round_trips_with_lag() -> None:
    """A report decodes to what was encoded; lag is high minus confirmed."""
    decoded = MemberReport.decode(report("a"))
    assert decoded.held["orders:0"].lag == 4
    assert decoded.held_partitions() == {P0}
    assert decoded.encode() == report("a")


def test_earliest_live_claim_wins_and_the_other_loses() -> None:
    """Of two live claims on one partition the earlier wins; the later is told who holds it."""
    log = Log(keep_verdicts_of="b")
    log.add(member_key(GROUP, "a"), report("a"), 1_000)
    log.add(member_key(GROUP, "b"), report("b", node_id=1), 1_000)
    log.claim("a", P0, 1_001)
    assert log.claim("b", P0, 1_002) == "a"
    assert log.state.live_holders() == {P0: "a"}


def test_withdrawn_claim_frees_the_partition() -> None:
    """After the holder withdraws, the next claim wins."""
    log = Log(keep_verdicts_of="b")
    log.add(member_key(GROUP, "a"), report("a"), 0)
    log.claim("a", P0, 1)
    log.add(claim_key(GROUP, P0, "a"), None, 2)
    assert log.claim("b", P0, 3) is None
    assert log.state.live_holders() == {P0: "b"}


def test_claims_of_a_silent_member_lapse_after_its_lease() -> None:
    """A holder silent for longer than its lease loses the partition to a new claim."""
    log = Log(keep_verdicts_of="b")
    log.add(member_key(GROUP, "a"), report("a", lease_s=10), 0)
    log.claim("a", P0, 100)
    assert log.claim("b", P0, 10_100) == "a"  # exactly at the lease: still alive
    assert log.claim("b", P0, 10_101) is None
    assert log.state.live_holders() == {P0: "b"}


def test_clean_shutdown_removes_member_and_claims() -> None:
    """A report tombstone removes the member and every claim it held."""
    log = Log()
    log.add(member_key(GROUP, "a"), report("a"), 0)
    log.claim("a", P0, 1)
    log.claim("a", P1, 1)
    log.add(member_key(GROUP, "a"), None, 2)
    assert log.state.live_holders() == {}
    assert log.state.live_reports() == {}


def test_other_groups_records_are_ignored() -> None:
    """Records of another group sharing the status partition change nothing."""
    log = Log()
    log.add(member_key("other", "x"), report("x"), 0)
    log.add(claim_key("other", P0, "x"), b"{}", 0)
    assert log.state.members == {}
    assert log.state.holders == {}
    assert log.state.position == 2


def test_groups_whose_names_contain_each_other_stay_apart() -> None:
    """Records of "billing-eu", "xbilling" and a consumer id quoting the group do not count."""
    log = Log()
    for other in (f"{GROUP}-eu", f"x{GROUP}", f'"{GROUP}"'):
        log.add(member_key(other, "x"), report("x"), 0)
        log.add(claim_key(other, P0, "x"), b"{}", 0)
    log.add(member_key("other", f'"{GROUP}", '), report(f'"{GROUP}", '), 0)
    assert log.state.members == {}
    assert log.state.holders == {}
    log.add(member_key(GROUP, "a"), report("a"), 0)
    assert log.state.members.keys() == {"a"}


def test_another_groups_record_still_moves_the_clock_and_ends_a_lease() -> None:
    """Skipped unparsed, a foreign record still advances position and time: a lapse shows."""
    state = GroupState(GROUP)
    assert state.apply(member_key(GROUP, "a"), report("a", lease_s=10), 0, 1_000)
    assert state.apply(member_key("other", "x"), report("x"), 1, 12_000)  # a lapsed by then
    assert state.position == 2
    assert state.last_ms == 12_000
    assert state.live_reports() == {}


def test_join_order_survives_compaction() -> None:
    """A later report carries its member's first offset, so join order holds after compaction."""
    log = Log()
    log.offset = 50
    later = MemberReport.decode(report("a"))
    compacted = type(later)(**{**later.__dict__, "join_offset": 7})
    log.add(member_key(GROUP, "a"), compacted.encode(), 0)
    log.add(member_key(GROUP, "b"), report("b"), 0)
    assert log.state.join_order("a") < log.state.join_order("b")


@pytest.mark.parametrize("silent_ms", [29_999, 30_000, 30_001])
def test_live_reports_use_the_latest_broker_time(silent_ms: int) -> None:
    """A member is live while its last record is at most its lease older than the newest one."""
    log = Log()
    log.add(member_key(GROUP, "a"), report("a"), 0)
    log.add(member_key(GROUP, "b"), report("b"), silent_ms)
    assert ("a" in log.state.live_reports()) == (silent_ms <= 30_000)


def test_a_member_whose_lease_ran_out_is_a_change_of_the_group() -> None:
    """The first record past a silent member's lease says the group changed, and only that one.

    The reader wakes the reconcile round on a change; without it the members that take over a
    crashed member's partitions would wait for their next round to notice.
    """
    log = Log()
    state = log.state
    assert state.apply(member_key(GROUP, "a"), report("a", lease_s=10), 0, 1_000)
    assert state.apply(member_key(GROUP, "b"), report("b", lease_s=10), 1, 1_000)
    state.apply(claim_key(GROUP, P0, "a"), b"{}", 2, 1_100)
    assert not state.apply(member_key(GROUP, "b"), report("b", lease_s=10), 3, 6_000)
    assert not state.apply(member_key(GROUP, "b"), report("b", lease_s=10), 4, 11_100)
    assert state.apply(member_key(GROUP, "b"), report("b", lease_s=10), 5, 11_101)  # a lapsed
    assert not state.apply(member_key(GROUP, "b"), report("b", lease_s=10), 6, 12_000)
    assert state.live_reports().keys() == {"b"}
    assert state.live_holders() == {}


def test_a_member_that_left_cleanly_does_not_lapse_later() -> None:
    """A member gone with its tombstone was a change once; its old lease running out is not."""
    log = Log()
    state = log.state
    state.apply(member_key(GROUP, "a"), report("a", lease_s=10), 0, 1_000)
    state.apply(member_key(GROUP, "b"), report("b", lease_s=10), 1, 1_000)
    assert state.apply(member_key(GROUP, "a"), None, 2, 2_000)
    assert not state.apply(member_key(GROUP, "b"), report("b", lease_s=10), 3, 6_000)
    assert not state.apply(member_key(GROUP, "b"), report("b", lease_s=10), 4, 11_500)


def _compacted(
    records: list[tuple[bytes, bytes | None, int, int]],
) -> list[tuple[bytes, bytes | None, int, int]]:
    """What log compaction leaves: the last record of each key (tombstones too), in order."""
    last = {key: (key, value, offset, at) for key, value, offset, at in records}
    return sorted(last.values(), key=lambda record: record[2])


def _replay(records: list[tuple[bytes, bytes | None, int, int]]) -> GroupState:
    state = GroupState(GROUP)
    for key, value, offset, at in records:
        state.apply(key, value, offset, at)
    return state


def test_a_defeated_claim_is_judged_the_same_on_the_full_and_the_compacted_log() -> None:
    """A claim that lost, and that its loser never withdrew (killed), stays lost after compaction.

    The verdict hung on the holder's reports between its claim and the contest; compaction
    keeps only its last report, so a later reader judged the holder dead at the contest and
    the loser the owner: two owners. The holder now tombstones claims that lost to it.
    """
    records: list[tuple[bytes, bytes | None, int, int]] = []
    state = GroupState(GROUP, verdicts_of="holder")

    def write(key: bytes, value: bytes | None, at_s: int) -> None:
        offset = len(records)
        records.append((key, value, offset, at_s * 1000))
        state.apply(key, value, offset, at_s * 1000)

    write(member_key(GROUP, "holder"), report("holder"), 0)
    write(claim_key(GROUP, P0, "holder"), b"{}", 0)
    for second in range(10, 41, 10):
        write(member_key(GROUP, "holder"), report("holder"), second)
    write(member_key(GROUP, "loser"), report("loser"), 41)
    write(claim_key(GROUP, P0, "loser"), b"{}", 41)  # loses: the holder reported at 40
    assert state.live_holders() == {P0: "holder"}
    for key in state.take_defeated():  # what the holder's report thread writes
        write(key, None, 42)
    write(member_key(GROUP, "holder"), report("holder"), 50)  # the loser was killed: no more

    for log in (records, _compacted(records)):
        assert _replay(log).live_holders(50_000) == {P0: "holder"}


def test_only_claims_defeated_by_this_member_are_handed_out_once() -> None:
    """take_defeated() names the keys of claims that lost to verdicts_of's member, once."""
    log = Log(keep_verdicts_of="holder")
    log.add(member_key(GROUP, "holder"), report("holder"), 0)
    log.add(member_key(GROUP, "other"), report("other"), 0)
    assert log.claim("holder", P0, 1) is None
    assert log.claim("other", P1, 1) is None
    log.claim("loser", P0, 2)  # lost to holder
    log.claim("loser", P1, 2)  # lost to other: not ours to tombstone
    log.claim("gone", P0, 3)
    log.add(claim_key(GROUP, P0, "gone"), None, 4)  # withdrew by itself
    assert log.state.take_defeated() == [claim_key(GROUP, P0, "loser")]
    assert log.state.take_defeated() == []


def test_a_defeated_claim_withdrawn_while_its_tombstone_failed_is_not_handed_out_again() -> None:
    """The loser withdrew it meanwhile: a later tombstone would hit its next, winning claim.

    The holder's write of the tombstone got no answer while the loser withdrew by itself; handed
    out again, the tombstone landed after the loser had claimed the partition anew and won,
    and withdrew that claim: the partition was free in every view while its holder fetched it
    (the review of 2026-11-29).
    """
    log = Log(keep_verdicts_of="holder")
    log.add(member_key(GROUP, "holder"), report("holder"), 0)
    log.add(member_key(GROUP, "loser"), report("loser"), 0)
    assert log.claim("holder", P0, 1) is None
    log.claim("loser", P0, 2)  # lost to holder
    log.claim("loser", P1, 2)  # won: nobody held it
    keys = log.state.take_defeated()  # the holder's report thread writes their tombstones...
    assert keys == [claim_key(GROUP, P0, "loser")]
    log.add(claim_key(GROUP, P0, "loser"), None, 3)  # ...while the loser withdraws by itself
    log.state.defeated_again([*keys, claim_key(GROUP, P1, "loser")])  # the write failed
    assert log.state.take_defeated() == []
    log.add(claim_key(GROUP, P0, "holder"), None, 4)  # the holder lets go
    assert log.claim("loser", P0, 5) is None
    assert log.state.live_holders(5) == {P0: "loser", P1: "loser"}


def test_a_defeated_claim_still_standing_is_handed_out_again_after_a_failed_write() -> None:
    """Nobody withdrew it: its tombstone is still owed, and goes with the next report."""
    log = Log(keep_verdicts_of="holder")
    log.add(member_key(GROUP, "holder"), report("holder"), 0)
    assert log.claim("holder", P0, 1) is None
    log.claim("loser", P0, 2)
    keys = log.state.take_defeated()
    log.state.defeated_again(keys)
    assert log.state.take_defeated() == [claim_key(GROUP, P0, "loser")]


def test_dead_records_name_long_dead_members_and_their_claims_only() -> None:
    """Members silent past lease + grace give their report key and standing claim keys."""
    log = Log()
    log.add(member_key(GROUP, "dead"), report("dead", lease_s=1.0), 0)
    log.claim("dead", P0, 0)
    log.add(member_key(GROUP, "alive"), report("alive", lease_s=1.0), 0)
    log.claim("alive", P1, 0)
    log.add(member_key(GROUP, "alive"), report("alive", lease_s=1.0), 9_000)
    assert log.state.dead_records(9_000, grace_ms=5_000) == {
        "dead": [claim_key(GROUP, P0, "dead"), member_key(GROUP, "dead")]
    }
    assert log.state.dead_records(9_000, grace_ms=8_500) == {}  # within its grace still


def test_a_tombstone_written_for_a_member_is_no_sign_of_its_life() -> None:
    """A claim tombstone (its winner's or a reaper's) does not renew the member's lease."""
    log = Log()
    log.add(member_key(GROUP, "loser"), report("loser", lease_s=1.0), 0)
    log.add(claim_key(GROUP, P0, "loser"), None, 5_000)
    assert not log.state.is_alive("loser", 5_000)


def test_a_report_with_fields_this_version_does_not_know_still_counts_as_a_member() -> None:
    """A newer member's report (an unknown field) decodes; before, the member was invisible."""
    data = json.loads(report("a"))
    data["added_in_a_later_version"] = {"x": 1}
    log = Log()
    log.add(member_key(GROUP, "a"), json.dumps(data).encode(), at_ms=1_000)
    assert set(log.state.live_reports()) == {"a"}


def test_a_changed_pin_is_a_change_of_the_group() -> None:
    """A report whose pins differ from the last one wakes the readers (apply returns True)."""
    log = Log()
    log.add(member_key(GROUP, "a"), report("a"), at_ms=1_000)
    pinned = json.loads(report("a"))
    pinned["pinned"] = ["orders:1"]
    assert log.state.apply(member_key(GROUP, "a"), json.dumps(pinned).encode(), 9, 2_000)
    assert log.state.live_reports()["a"].pinned_partitions() == {P1}
    assert not log.state.apply(member_key(GROUP, "a"), json.dumps(pinned).encode(), 10, 3_000)


def test_a_report_repeated_byte_for_byte_is_not_decoded_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only new report bytes are parsed: a start replays each member's every report."""
    decoded: list[bytes] = []
    decode = MemberReport.decode

    def counting(raw: bytes) -> MemberReport:
        decoded.append(raw)
        return decode(raw)

    monkeypatch.setattr(MemberReport, "decode", staticmethod(counting))
    log = Log()
    for at_ms in (1_000, 11_000, 21_000):
        log.add(member_key(GROUP, "a"), report("a"), at_ms)
    log.add(member_key(GROUP, "a"), report("a", lease_s=20.0), at_ms=31_000)
    assert len(decoded) == 2
    assert log.state.live_reports()["a"].lease_timeout_s == 20.0
    assert log.state.is_alive("a", 51_000)
    assert not log.state.is_alive("a", 51_001)  # the lease of the report that changed


def test_a_report_that_comes_back_after_a_tombstone_or_as_garbage_is_decoded_again() -> None:
    """The bytes are reused only while they are the member's standing report."""
    log = Log()
    key = member_key(GROUP, "a")
    log.add(key, report("a"), at_ms=1_000)
    log.add(key, None, at_ms=2_000)  # left
    log.add(key, report("b"), at_ms=3_000)  # another member's report under a's key
    assert log.state.live_reports() == {}
    assert log.state.skipped == {"malformed": 1}
    log.add(key, report("a"), at_ms=4_000)
    assert set(log.state.live_reports()) == {"a"}


def test_keys_parse_the_same_whether_short_and_remembered_or_long() -> None:
    """A long key is parsed each time and a short one once, to the same answer."""
    long_id = "x" * 600
    for consumer_id in ("a", long_id):
        for _ in range(2):
            assert parse_key(member_key(GROUP, consumer_id)) == ("member", GROUP, consumer_id, None)
            assert parse_key(claim_key(GROUP, P1, consumer_id)) == ("claim", GROUP, consumer_id, P1)
    assert parse_key(b"[" * 100_000) is None
    assert parse_key(None) is None


def test_dead_records_name_a_dead_members_claim_that_another_member_took_over() -> None:
    """A lapsed claim superseded by a new holder's is still the dead member's: it is tombstoned.

    Left in the log, every replay brought the dead member back and each reaper reaped it again.
    """
    log = Log()
    log.add(member_key(GROUP, "dead"), report("dead", lease_s=1.0), 0)
    log.claim("dead", P0, 0)
    log.add(member_key(GROUP, "taker"), report("taker", lease_s=1.0), 2_000)
    assert log.claim("taker", P0, 2_000) is None  # the dead member's lease had lapsed
    log.add(member_key(GROUP, "taker"), report("taker", lease_s=1.0), 9_000)
    assert log.state.dead_records(9_000, grace_ms=5_000) == {
        "dead": [claim_key(GROUP, P0, "dead"), member_key(GROUP, "dead")]
    }
    log.add(claim_key(GROUP, P0, "dead"), None, 9_001)  # the reaper's tombstones
    log.add(member_key(GROUP, "dead"), None, 9_001)
    assert log.state.dead_records(20_000, grace_ms=5_000) == {"taker": [
        claim_key(GROUP, P0, "taker"), member_key(GROUP, "taker")
    ]}  # fmt: skip


def test_two_pins_of_one_partition_go_to_the_member_that_joined_first() -> None:
    """pins() names the earliest to join of two pinning members, whatever their ids' order."""
    log = Log()
    for member_id in ("zeta", "alpha"):  # zeta joins first; alpha sorts first
        pinned = MemberReport.decode(report(member_id))
        record = type(pinned)(**{**pinned.__dict__, "pinned": ["orders:1"]})
        log.add(member_key(GROUP, member_id), record.encode(), 0)
    lookups = GroupLookups()
    lookups._reader = cast("StatusReader", _Reader(log.state))  # its lock and state only
    lookups._id = "alpha"
    assert lookups.pins() == {P1: "zeta"}


class _Reader:
    """What ``GroupLookups`` reads of a ``StatusReader``: its lock and its state."""

    def __init__(self, state: GroupState) -> None:
        self.lock = threading.Lock()
        self.state = state
