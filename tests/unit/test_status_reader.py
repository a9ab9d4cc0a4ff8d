"""The status reader passes over other groups' records exactly as applying them would."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Message
from hypothesis import given, settings
from hypothesis import strategies as st

from client_balance.membership import StatusReader, _log, claim_key, member_key
from client_balance.membership._keys import quoted_group
from client_balance.membership._signing import RecordSigner
from tests.unit.test_status_records import GROUP, P0, SECRET, encoded, report_fields
from tests.unit.test_status_records import _Client as Client

LOG_APPEND_TIME = 2


def _record(
    key: bytes | None, value: bytes | None, offset: int, stamp_ms: int, headers: Any
) -> Message:
    """A record as librdkafka hands it to the reader (stamped with the log-append time)."""
    return Message(
        topic="t", partition=0, offset=offset, key=key, value=value, headers=headers,
        timestamp=(LOG_APPEND_TIME, stamp_ms),
    )  # fmt: skip


# One record: (whose group, member, kind, milliseconds after the previous record).
_RECORDS = st.lists(
    st.tuples(
        st.sampled_from([GROUP, "other", f"{GROUP}-eu"]),
        st.sampled_from(["a", "b"]),
        st.sampled_from(["report", "claim", "leave", "withdraw", "keyless"]),
        st.integers(0, 20_000),
    ),
    max_size=25,
)


def _messages(records: list[tuple[str, str, str, int]], signer: RecordSigner | None) -> list[Any]:
    messages, now_ms = [], 1_000
    for offset, (group, member, kind, after_ms) in enumerate(records):
        now_ms += after_ms
        key: bytes | None = claim_key(group, P0, member)
        value: bytes | None = b"{}"
        if kind in ("report", "leave"):
            key = member_key(group, member)
            value = encoded(report_fields(member, lease_timeout_s=10.0))
        if kind in ("leave", "withdraw"):
            value = None
        if kind == "keyless":
            key = None
        headers = None if signer is None or key is None else signer.headers(key, value)
        messages.append(_record(key, value, offset, now_ms, headers))
    return messages


def _reader(monkeypatch: pytest.MonkeyPatch, *, keep: bool, secret: bytes | None) -> StatusReader:
    monkeypatch.setattr(_log, "reader_client", lambda config: Client())
    return StatusReader(
        "x:1", "t", 0, GROUP, kafka={}, timeout_s=1, follow=False, keep_records=keep, secret=secret
    )


@settings(max_examples=300, deadline=None)
@given(records=_RECORDS, split=st.integers(0, 25), signed=st.booleans())
def test_passing_over_other_groups_records_ends_in_the_state_applying_them_would(
    records: list[tuple[str, str, str, int]], split: int, signed: bool
) -> None:
    """Same position, clock, members, holders and change verdicts as the full path, read in two."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        secret = SECRET if signed else None
        messages = _messages(records, RecordSigner(SECRET) if signed else None)
        fast = _reader(monkeypatch, keep=False, secret=secret)
        full = _reader(monkeypatch, keep=True, secret=secret)  # kept records take the full path
        for part in (messages[:split], messages[split:]):
            assert fast._apply_all(part) == full._apply_all(part)
        for name in ("position", "last_ms", "members", "holders", "skipped"):
            assert getattr(fast.state, name) == getattr(full.state, name), name
        assert fast.state.live_reports() == full.state.live_reports()


def test_an_idle_reader_lets_the_broker_hold_its_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The status reader's long poll is librdkafka's 500 ms, not a fetch every 10 ms.

    The broker answers a held fetch as soon as a record lands, so a short one bought no speed:
    with 10 ms every idle member sent 100 fetches a second, and 8 idle members took 7.6% of a
    local broker's CPU (2.7% with 500 ms; docs/design-decisions.md).
    """
    configs: list[dict[str, Any]] = []

    def made(config: dict[str, Any]) -> Client:
        configs.append(config)
        return Client()

    monkeypatch.setattr(_log, "reader_client", made)
    StatusReader("x:1", "t", 0, GROUP, kafka={}, timeout_s=1, follow=False).close()
    assert configs[0]["fetch.wait.max.ms"] >= 500


def test_a_failed_read_is_logged_without_a_secret_of_kafka(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """What librdkafka says of a failed read passes the scrub, as on every other path."""
    secret = "s3cr3t-Passw0rd"  # noqa: S105 - a test value

    class Refusing(Client):
        def poll(self, timeout: float) -> None:
            raise KafkaException(KafkaError(KafkaError._AUTHENTICATION, f"bad login {secret}"))

    monkeypatch.setattr(_log, "reader_client", lambda config: Refusing())
    kafka = {"security.protocol": "SASL_SSL", "sasl.password": secret}
    reader = StatusReader("x:1", "t", 0, GROUP, kafka=kafka, timeout_s=1, follow=False)
    with caplog.at_level(logging.WARNING, "client_balance.membership"):
        reader._read_once()
    reader.close()
    failed = [r for r in caplog.records if r.getMessage() == "reading the status topic failed"]
    assert len(failed) == 1
    assert secret not in str(failed[0].__dict__)
    assert "bad login **********" in failed[0].error  # type: ignore[attr-defined]


def test_a_run_of_other_groups_records_is_passed_over_in_one_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A start's replay of 1,000 foreign records moves the state once, not once per record.

    The reader thread holds the interpreter while it replays; record by record, that was the
    longest stretch of Python of a start, which the start's other threads waited out.
    """
    foreign = [claim_key("other", P0, "a")] * 1_000
    messages = [_record(key, b"{}", offset, 5_000 + offset, None) for offset, key in
                enumerate(foreign)]  # fmt: skip
    reader = _reader(monkeypatch, keep=False, secret=None)
    steps: list[tuple[int, int]] = []
    real = type(reader.state).pass_over

    def counted(state: Any, offset: int, stamp: int) -> None:
        steps.append((offset, stamp))
        real(state, offset, stamp)

    monkeypatch.setattr(type(reader.state), "pass_over", counted)
    assert reader._apply_all(messages) is False
    assert steps == [(999, 5_999)]
    assert (reader.state.position, reader.state.last_ms) == (1_000, 5_999)


def test_records_the_one_step_cannot_judge_take_the_loop() -> None:
    """A keyless record, one stamped by its producer, or an event: record by record."""
    mine, theirs = member_key(GROUP, "a"), claim_key("other", P0, "a")
    quoted = quoted_group(GROUP)
    plain = [_record(theirs, b"{}", 0, 1, None), _record(mine, None, 1, 2, None)]
    assert _log._own_records(plain, quoted) == ([1], [0, 1], [1, 2])
    keyless = [*plain, _record(None, b"{}", 2, 3, None)]
    created = [*plain, Message(topic="t", partition=0, offset=2, key=theirs, timestamp=(1, 3))]
    event = [*plain, Message(topic="t", partition=0, error=KafkaError(KafkaError._PARTITION_EOF))]
    assert [_log._own_records(messages, quoted) for messages in (keyless, created, event)] == [
        None,
        None,
        None,
    ]


def test_offsets_that_go_back_are_a_new_log_applied_only_once_begun_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An offset below the position is a log made anew: not applied on the old state.

    Found by the status-log review: the new log's records went on top of the old state, and
    wait_applied() of their lower offsets returned at once. Begun anew, the reader reads the
    new log into a fresh state.
    """
    reader = _reader(monkeypatch, keep=False, secret=None)
    told: list[bool] = []
    reader._on_new_log = lambda: told.append(True)
    old = [_record(member_key(GROUP, "a"), encoded(report_fields("a")), n, 1_000, None)
           for n in range(5)]  # fmt: skip
    reader._apply_all(old)
    assert reader.state.position == 5
    new = [_record(claim_key(GROUP, P0, "b"), b"{}", 1, 2_000, None)]
    assert not reader._apply_all(new)
    assert reader.stale
    assert reader.state.holders == {}
    assert not reader.wait_applied(1, 0)  # the old position is past the new log's offset
    assert reader.begin_anew(1)
    assert not reader.stale
    assert (reader.state.position, reader.state.members) == (0, {})
    joined = _record(member_key(GROUP, "b"), encoded(report_fields("b")), 0, 3_000, None)
    reader._apply_all([joined])
    assert set(reader.state.live_reports()) == {"b"}
    assert reader.wait_applied(0, 0)


def test_a_record_of_ours_landing_below_the_position_is_a_new_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A write's offset below what was read: the log the reader read is not the topic's."""
    reader = _reader(monkeypatch, keep=False, secret=None)
    told: list[bool] = []
    reader._on_new_log = lambda: told.append(True)
    reader._apply_all([_record(b"other", b"x", n, 1_000, None) for n in range(5)])
    reader.landed(5, 5)
    reader.landed(3, 3)  # read past meanwhile: the position now says nothing
    assert not reader.stale
    reader.landed(2, 5)
    assert reader.stale
    assert told == [True]
