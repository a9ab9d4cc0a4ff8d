"""Status records that cannot break or forge the group state: validation, signatures, replays."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client_balance import ClientBalanceSettings, ConfigError, GroupConflictError, TopicPartition
from client_balance.membership import (
    MAX_LEASE_S,
    GroupState,
    HeldPartition,
    MemberReport,
    StatusMember,
    StatusReader,
    _checks,
    _log,
    _renewal,
    claim_key,
    member_key,
    parse_key,
    pid_space,
    status_secret,
)
from client_balance.membership._checks import _died_here
from client_balance.membership._signing import HEADER, RecordGate, RecordSigner
from tests.unit.test_status_member import FakeReader, FakeWriter, answered

GROUP = "billing"
P0 = TopicPartition("orders", 0)
SECRET = b"0123456789abcdef-shared-by-the-group"


def report_fields(consumer_id: str = "a", **changes: Any) -> dict[str, Any]:
    """A valid report as JSON data, with ``changes`` applied."""
    data: dict[str, Any] = json.loads(
        MemberReport(
            consumer_id=consumer_id, host="h", pid=1, node_id=0, source_count=2,
            topics=("orders",), strategy="modulo", version="v", lease_timeout_s=30.0,
            held={"orders:0": HeldPartition(5, 5, 9)}, join_offset=0, pinned=["orders:1"],
            filters={"orders": ["x"]},
        ).encode()
    )  # fmt: skip
    data.update(changes)
    return data


def encoded(data: dict[str, Any]) -> bytes:
    """A report value as a writer would send it."""
    return json.dumps(data).encode()


HELD = {"confirmed": 5, "committed": 5, "high": 9}
BAD_REPORTS: dict[str, dict[str, Any]] = {
    "consumer_id not a string": {"consumer_id": 1},
    "consumer_id empty": {"consumer_id": ""},
    "host null": {"host": None},
    "pid a string": {"pid": "1"},
    "pid a float": {"pid": 1.5},
    "pid a bool": {"pid": True},
    "pid negative": {"pid": -1},
    "node_id a string": {"node_id": "0"},
    "source_count a string": {"source_count": "2"},
    "source_count null": {"source_count": None},
    "topics a string": {"topics": "orders"},
    "topics of numbers": {"topics": [1]},
    "topic not a Kafka name": {"topics": ["or ders"]},
    "topic '.'": {"topics": ["."]},
    "topic '..'": {"topics": [".."]},
    "held key of the topic '.'": {"held": {".:0": HELD}},
    "pinned key of the topic '..'": {"pinned": ["..:1"]},
    "pid past a C int": {"pid": 2**31},
    "pid_space a number": {"pid_space": 1},
    "lease an int past a float's range": {"lease_timeout_s": 10**400},
    "strategy null": {"strategy": None},
    "version a number": {"version": 1},
    "lease a string": {"lease_timeout_s": "x"},
    "lease null": {"lease_timeout_s": None},
    "lease zero": {"lease_timeout_s": 0},
    "lease negative": {"lease_timeout_s": -1.0},
    "lease huge": {"lease_timeout_s": 1e300},
    "lease over the maximum": {"lease_timeout_s": MAX_LEASE_S + 1},
    "lease a bool": {"lease_timeout_s": True},
    "held a list": {"held": []},
    "held key without partition": {"held": {"orders": HELD}},
    "held key with a bad partition": {"held": {"orders:x": HELD}},
    "held key with a negative partition": {"held": {"orders:-1": HELD}},
    "held position a string": {"held": {"orders:0": {**HELD, "confirmed": "5"}}},
    "held position missing": {"held": {"orders:0": {"confirmed": 5}}},
    "held position a list": {"held": {"orders:0": [5, 5, 9]}},
    "join_offset negative": {"join_offset": -1},
    "join_offset a string": {"join_offset": "7"},
    "fenced a string": {"fenced": "false"},
    "fenced a number": {"fenced": 0},
    "mode a number": {"mode": 1},
    "mode empty": {"mode": ""},
    "status_partitions negative": {"status_partitions": -1},
    "filters values a string": {"filters": {"orders": "x"}},
    "filters values numbers": {"filters": {"orders": [1]}},
    "pinned a string": {"pinned": "orders:1"},
    "pinned key without partition": {"pinned": ["orders"]},
    "consumer_id other than the key's": {"consumer_id": "someone-else"},
}
BAD_VALUES: dict[str, bytes] = {
    "not JSON": b"{not json",
    "a JSON array": b"[1, 2]",
    "a JSON string": b'"report"',
    "empty": b"",
    "not UTF-8": b"\xff\xfe",
    "deeply nested": b"[" * 100_000 + b"]" * 100_000,
    "NaN lease": encoded(report_fields()).replace(b"30.0", b"NaN"),
    "a required field missing": encoded({k: v for k, v in report_fields().items() if k != "pid"}),
}


class Log:
    """Applies records with increasing offsets, as the reader does."""

    def __init__(self, verdicts_of: str | None = None) -> None:
        self.state = GroupState(GROUP, verdicts_of=verdicts_of)
        self.offset = 0

    def add(self, key: bytes, value: bytes | None, at_ms: int = 1_000) -> bool:
        """Apply a record; whether it changed the group."""
        self.offset += 1
        return self.state.apply(key, value, self.offset - 1, at_ms)


def test_a_poison_report_before_a_claim_no_longer_raises_from_apply() -> None:
    """A report whose lease is "x" made the next claim's liveness check raise inside apply."""
    log = Log()
    log.add(member_key(GROUP, "a"), encoded(report_fields(lease_timeout_s="x")))
    log.add(claim_key(GROUP, P0, "a"), b"{}")  # raised ValueError from lease_ms before the fix
    log.add(claim_key(GROUP, P0, "b"), b"{}")
    assert log.state.skipped == {"malformed": 1}
    assert log.state.live_holders() == {P0: "a"}  # a's claim: a member with the default lease


@pytest.mark.parametrize("changes", BAD_REPORTS.values(), ids=list(BAD_REPORTS))
def test_a_report_of_the_wrong_shape_is_skipped_and_counted(changes: dict[str, Any]) -> None:
    """Each wrong type, null, bound or nested shape: the report is skipped; the state reads on."""
    log = Log()
    assert not log.add(member_key(GROUP, "a"), encoded(report_fields(**changes)))
    assert log.state.members == {}
    assert log.state.skipped == {"malformed": 1}
    assert log.state.last_skipped is not None
    assert log.state.last_skipped.offset == 0
    assert log.add(member_key(GROUP, "b"), encoded(report_fields("b")))
    assert set(log.state.live_reports()) == {"b"}
    assert log.state.position == 2


@pytest.mark.parametrize("value", BAD_VALUES.values(), ids=list(BAD_VALUES))
def test_a_report_value_that_is_no_report_is_skipped(value: bytes) -> None:
    """Values that are not JSON objects, or miss a field, are skipped and counted."""
    log = Log()
    assert not log.add(member_key(GROUP, "a"), value)
    assert log.state.members == {}
    assert log.state.skipped == {"malformed": 1}


def test_the_valid_report_decodes_to_what_was_written() -> None:
    """The strict model takes every field as its writer wrote it, and parses its partitions."""
    decoded = MemberReport.decode(encoded(report_fields()))
    assert decoded.topics == ("orders",)
    assert decoded.held == {"orders:0": HeldPartition(5, 5, 9)}
    assert decoded.held_partitions() == {P0}
    assert decoded.pinned_partitions() == {TopicPartition("orders", 1)}
    assert decoded.mode == "node"  # derived from the positive source_count of an old report


def test_unknown_fields_of_any_shape_are_still_dropped() -> None:
    """A newer member's extra fields, whatever their shape, do not make its report malformed."""
    log = Log()
    log.add(member_key(GROUP, "a"), encoded(report_fields(later={"x": [None]}, other="x")))
    assert set(log.state.live_reports()) == {"a"}
    assert log.state.skipped == {}


@pytest.mark.parametrize("value", [b"not json", b"[]", b'"x"', b"", b"null"])
def test_a_claim_whose_value_is_no_json_object_is_skipped(value: bytes) -> None:
    """A claim must carry a JSON object; anything else takes no partition."""
    log = Log()
    log.add(member_key(GROUP, "a"), encoded(report_fields()))
    assert not log.add(claim_key(GROUP, P0, "a"), value)
    assert log.state.holders == {}
    assert log.state.skipped == {"malformed": 1}


def test_hostile_keys_parse_to_foreign() -> None:
    """A key nested past json's recursion, or naming a negative partition, is no status key."""
    assert parse_key(b"[" * 100_000 + b"]" * 100_000) is None
    assert parse_key(b'["claim", "g", "t", -1, "c"]') is None


def test_ids_and_fields_holding_a_lone_surrogate_are_no_status_records() -> None:
    """A lone surrogate (JSON can encode one) in a key or a report: the record is skipped.

    A forged claim or report holding one crashed `status`, `lag` and every metrics scrape that
    printed its holder (the review of 2026-11-29).
    """
    assert parse_key(claim_key(GROUP, P0, "c\ud800")) is None
    assert parse_key(member_key(GROUP, "m\udfff")) is None
    assert parse_key(claim_key(GROUP, P0, "café")) == ("claim", GROUP, "café", P0)
    log = Log()
    assert not log.add(member_key(GROUP, "a"), encoded(report_fields(host="h\ud800")))
    assert log.state.skipped == {"malformed": 1}


# ----------------------------------------------------------------------------- signatures
class Reader:
    """A reader's path for one group: a gate in front of the state."""

    def __init__(self, secret: bytes | None, verdicts_of: str | None = None) -> None:
        self.gate = RecordGate(secret)
        self.state = GroupState(GROUP, verdicts_of=verdicts_of)
        self.offset = 0

    def add(self, key: bytes, value: bytes | None, headers: Any = None, at_ms: int = 1_000) -> bool:
        """Offer a record; whether it was applied."""
        self.offset += 1
        applied, _ = self.gate.admit(
            self.state, key, value, headers, offset=self.offset - 1, timestamp_ms=at_ms
        )
        return applied


@pytest.fixture
def victim() -> Iterator[tuple[Reader, RecordSigner]]:
    """A reader with the secret that has applied the victim's signed report and claim on P0."""
    reader, signer = Reader(SECRET), RecordSigner(SECRET)
    for key, value in ((member_key(GROUP, "victim"), encoded(report_fields("victim"))),
                       (claim_key(GROUP, P0, "victim"), b"{}")):  # fmt: skip
        assert reader.add(key, value, signer.headers(key, value))
    yield reader, signer
    assert reader.state.live_holders() == {P0: "victim"}  # whatever the test wrote


def test_unsigned_forged_records_change_nothing(victim: tuple[Reader, RecordSigner]) -> None:
    """Without the secret a forger neither deletes holdings nor claims, reports or goes first."""
    reader, _ = victim
    forged: list[tuple[bytes, bytes | None]] = [
        (member_key(GROUP, "victim"), None),
        (claim_key(GROUP, P0, "victim"), None),
        (claim_key(GROUP, P0, "forger"), b"{}"),
        (member_key(GROUP, "forger"), encoded(report_fields("forger", lease_timeout_s=600))),
    ]
    for key, value in forged:
        assert not reader.add(key, value)
    assert set(reader.state.members) == {"victim"}
    assert reader.state.skipped == {"unsigned": 4}
    assert reader.state.unsigned_live() == ["forger"]


def test_records_signed_with_another_secret_or_tampered_are_unsigned(
    victim: tuple[Reader, RecordSigner],
) -> None:
    """A wrong secret, a value or key other than the one signed, or two headers: not applied."""
    reader, signer = victim
    key = claim_key(GROUP, P0, "victim")
    other = RecordSigner(b"another-secret-of-16-or-more")
    assert not reader.add(key, None, other.headers(key, None))
    assert not reader.add(key, None, signer.headers(key, b"{}"))  # signed a claim, sent a tombstone
    assert not reader.add(key, None, signer.headers(member_key(GROUP, "victim"), None))
    two = signer.headers(key, None) + signer.headers(key, None)
    assert not reader.add(key, None, two)
    assert not reader.add(key, None, [(HEADER, b"v1.garbage")])
    assert reader.state.skipped == {"unsigned": 5}


def test_a_signed_record_copied_back_is_a_replay(victim: tuple[Reader, RecordSigner]) -> None:
    """An old signed withdrawal written again does not withdraw the claim made since."""
    reader, signer = victim
    key = claim_key(GROUP, P0, "victim")
    withdrawal = signer.headers(key, None)
    assert reader.add(key, None, withdrawal)
    assert reader.add(key, b"{}", signer.headers(key, b"{}"))  # claimed again
    assert not reader.add(key, None, withdrawal)
    assert reader.state.skipped == {"replayed": 1}


def test_a_reader_without_the_secret_applies_all_and_sees_who_signs() -> None:
    """No secret: every record applies, and members whose reports were signed are known."""
    reader, signer = Reader(None), RecordSigner(SECRET)
    key = member_key(GROUP, "signs")
    assert reader.add(key, encoded(report_fields("signs")), signer.headers(key, b"x"))
    assert reader.add(member_key(GROUP, "plain"), encoded(report_fields("plain", node_id=1)))
    assert reader.state.signed_live() == ["signs"]


# ----------------------------------------------------------------------------- mixed groups
def test_a_member_without_the_secret_refuses_a_group_that_signs() -> None:
    """It cannot be seen by signed members, so it raises GroupConflictError naming them."""
    reader, signer = Reader(None), RecordSigner(SECRET)
    key = member_key(GROUP, "signs")
    value = encoded(report_fields("signs"))
    reader.add(key, value, signer.headers(key, value))
    with pytest.raises(GroupConflictError, match=r"\['signs'\].*same status_secret"):
        _checks.check_signing(reader.state, "me", GROUP, signs=False, warned=set())


def test_a_member_with_the_secret_warns_once_of_unsigned_live_members(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Unsigned live reports are named in one warning; the member runs on."""
    reader = Reader(SECRET)
    reader.add(member_key(GROUP, "plain"), encoded(report_fields("plain")))
    warned: set[str] = set()
    with caplog.at_level(logging.WARNING, "client_balance.membership"):
        for _ in range(3):
            _checks.check_signing(reader.state, "me", GROUP, signs=True, warned=warned)
    events = [r for r in caplog.records if r.getMessage().startswith("members write unsigned")]
    assert len(events) == 1
    assert events[0].members == ["plain"]  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- settings
@pytest.mark.parametrize(("given", "expected"), [(None, None), ("s" * 16, b"s" * 16)])
def test_status_secret_is_read_from_the_settings(given: str | None, expected: bytes | None) -> None:
    """The signing key is the setting's bytes; no setting, no signing."""
    settings = ClientBalanceSettings(bootstrap_servers="x:1", group_id="g", status_secret=given)
    assert status_secret(settings) == expected


def test_a_short_status_secret_is_refused() -> None:
    """A short secret put in by model_copy (unchecked) is still refused where it is used."""
    settings = ClientBalanceSettings(bootstrap_servers="x:1", group_id="g")
    settings = settings.model_copy(update={"status_secret": "short"})
    with pytest.raises(ConfigError, match="at least 16"):
        status_secret(settings)


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """StatusMember on the in-memory writer and reader of test_status_member."""
    monkeypatch.setattr(_log, "ensure_status_topic", lambda *args, **kwargs: 1)
    monkeypatch.setattr(_log, "StatusWriter", FakeWriter)
    monkeypatch.setattr(_log, "StatusReader", FakeReader)
    monkeypatch.setattr(_renewal, "ask_topic_id", lambda *args: answered("id-1"))


def _member_with(**settings: Any) -> StatusMember:
    values = {"bootstrap_servers": "x:1", "group_id": "g", "report_interval_s": 0.05,
              "lease_timeout_s": 0.6, "request_timeout_s": 0.25, **settings}  # fmt: skip
    report = MemberReport(
        consumer_id="me", host="h", pid=1, node_id=0, source_count=1, topics=("orders",),
        strategy="modulo", version="v", lease_timeout_s=0.6,
    )  # fmt: skip
    member = StatusMember(ClientBalanceSettings(**values), "me", lambda: report,
                          on_change=lambda: None, on_fenced=lambda _: None)  # fmt: skip
    assert isinstance(member._reader, FakeReader)
    assert isinstance(member._writer, FakeWriter)
    member._reader.writer = member._writer  # it reads back what the member writes
    return member


@pytest.mark.usefixtures("fakes")
def test_a_member_with_a_lease_longer_than_reports_may_carry_refuses_to_start() -> None:
    """Others would skip its reports as malformed: it says so at start, whatever built them."""
    settings = ClientBalanceSettings(bootstrap_servers="x:1", group_id="g")
    # The settings bound the lease too; settings built without validation reach the member.
    unchecked = settings.model_copy(update={"lease_timeout_s": MAX_LEASE_S + 1})
    with pytest.raises(ConfigError, match="longer than the status records allow"):
        StatusMember(unchecked, "me", lambda: MemberReport.decode(encoded(report_fields("me"))),
                     on_change=lambda: None, on_fenced=lambda _: None)  # fmt: skip


@pytest.mark.usefixtures("fakes")
@pytest.mark.parametrize("secret", [None, "s" * 16])
def test_members_of_a_signed_group_reassert_their_claims_with_each_report(
    secret: str | None,
) -> None:
    """With a secret every report is followed by the standing claims again; without, not."""
    member = _member_with(status_secret=secret)
    member.join()
    member.claim([P0])
    writer = member._writer
    assert isinstance(writer, FakeWriter)

    def reasserted() -> bool:
        after_join = writer.records[2:]  # the first report and the claim
        return any(key == claim_key("g", P0, "me") and value == b"{}" for key, value in after_join)

    deadline = time.monotonic() + 1.0  # 20 report intervals
    while not reasserted() and time.monotonic() < deadline:
        time.sleep(0.02)
    found = reasserted()
    member.leave()
    assert found == (secret is not None)
    assert writer.records[-2:] == [(claim_key("g", P0, "me"), None), (member_key("g", "me"), None)]


# ----------------------------------------------------------------------------- the reader
class _Message:
    """The parts of a Kafka message the reader uses."""

    def __init__(self, key: bytes, value: bytes | None, headers: Any = None) -> None:
        self._key, self._value, self._headers = key, value, headers

    def key(self) -> bytes:
        """The record key."""
        return self._key

    def value(self) -> bytes | None:
        """The record value."""
        return self._value

    def headers(self) -> Any:
        """The record headers."""
        return self._headers


class _Client:
    """A consumer that is never asked to read."""

    def assign(self, partitions: object) -> None:
        """Nothing to assign."""

    def close(self) -> None:
        """Nothing to close."""


def test_the_reader_logs_each_kind_of_skipped_record_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Poison records are skipped with one warning per reason; the rest are debug lines."""
    monkeypatch.setattr(_log, "reader_client", lambda config: _Client())
    reader = StatusReader("x:1", "t", 0, GROUP, kafka={}, timeout_s=1, follow=False)
    poison = encoded(report_fields(lease_timeout_s=None))
    with caplog.at_level(logging.WARNING, "client_balance.membership"):
        for offset in range(3):
            reader._apply(_Message(member_key(GROUP, "a"), poison), offset, 1_000)  # type: ignore[arg-type]
        reader._apply(_Message(member_key(GROUP, "b"), encoded(report_fields("b"))), 3, 1_000)  # type: ignore[arg-type]
    reader.close()
    skipped = [r for r in caplog.records if r.getMessage() == "status record skipped"]
    assert len(skipped) == 1
    assert skipped[0].reason == "malformed"  # type: ignore[attr-defined]
    assert "lease_timeout_s" in skipped[0].detail  # type: ignore[attr-defined]
    assert reader.state.skipped == {"malformed": 3}
    assert set(reader.state.live_reports()) == {"b"}


@pytest.mark.usefixtures("fakes")
def test_a_join_refused_once_written_withdraws_its_report() -> None:
    """A join that fails its checks after the write leaves at once, whoever called it.

    A Spark query's start keeps no member until its join succeeds: the report would otherwise
    stay in the log, looking alive, until its lease ran out.
    """
    member = _member_with()
    other = encoded(report_fields("other", status_partitions=3))
    member._reader.state.apply(member_key("g", "other"), other, 0, int(time.time() * 1000))
    with pytest.raises(ConfigError, match="differs from the live member other"):
        member.join()
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    assert writer.records[-1] == (member_key("g", "me"), None)


def test_a_dead_pid_counts_as_dead_only_in_this_pid_namespace() -> None:
    """Same host name, a pid not found: dead only if the report names this PID namespace.

    Containers sharing the host name (host networking) see none of each other's pids, so a
    live member in another one was taken for a dead predecessor and its checks were skipped:
    a second node 0 started beside it.
    """
    here: dict[str, Any] = {"host": socket.gethostname(), "pid": _unused_pid()}
    dead_here = MemberReport.decode(encoded(report_fields(**here, pid_space=pid_space())))
    elsewhere = MemberReport.decode(encoded(report_fields(**here, pid_space="other-boot:1")))
    unknown = MemberReport.decode(encoded(report_fields(**here)))
    assert pid_space() != ""
    assert _died_here(dead_here)
    assert not _died_here(elsewhere)
    assert not _died_here(unknown)


def _unused_pid() -> int:
    """A pid no process of this namespace has."""
    pid = os.getpid() + 100_000
    while Path(f"/proc/{pid}").exists():
        pid += 1
    return pid


def test_the_gate_remembers_one_sequence_per_writer_not_per_key() -> None:
    """A long-lived signed reader's memory grows with member starts, not with every key signed."""
    reader = Reader(SECRET)
    for start in range(50):  # members that joined, claimed 20 partitions each, and left
        signer, member = RecordSigner(SECRET), f"member-{start}"
        claims = [claim_key(GROUP, TopicPartition("orders", p), member) for p in range(20)]
        records: list[tuple[bytes, bytes | None]] = [
            (member_key(GROUP, member), encoded(report_fields(member)))
        ]
        records += [(key, b"{}") for key in claims] + [(key, None) for key in claims]
        records.append((member_key(GROUP, member), None))
        for key, value in records:
            assert reader.add(key, value, signer.headers(key, value))
    assert not reader.state.members
    assert len(reader.gate._seen) == 50


def test_an_older_record_of_a_writer_under_another_key_is_a_replay_too(
    victim: tuple[Reader, RecordSigner],
) -> None:
    """A writer's records land in order: one older than its latest applied is a copy, any key."""
    reader, signer = victim
    withdrawal = signer.headers(claim_key(GROUP, P0, "victim"), None)  # older, landing later
    key, report = member_key(GROUP, "victim"), encoded(report_fields("victim"))
    assert reader.add(key, report, signer.headers(key, report))
    assert not reader.add(claim_key(GROUP, P0, "victim"), None, withdrawal)
    assert reader.state.skipped == {"replayed": 1}
