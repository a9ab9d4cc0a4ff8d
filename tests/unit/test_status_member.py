"""A member's side of the status topic with in-memory fakes: fencing and checks."""

from __future__ import annotations

import concurrent.futures
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from client_balance import (
    ClientBalanceError,
    ClientBalanceSettings,
    ConfigError,
    KafkaClientError,
    TopicPartition,
)
from client_balance._kafka import TopicState
from client_balance.membership import (
    GroupState,
    MemberReport,
    StatusMember,
    _log,
    _renewal,
    _topic,
    claim_key,
    member_key,
)


class FakeWriter:
    """Takes records (offsets count up) until told to fail like an unreachable cluster."""

    def __init__(self, *args: object, timeout_s: float = 1.0, **kwargs: object) -> None:
        self.failing = False
        self.fail_next = 0  # writes that fail at once, then land again
        self.attempts = 0
        self.hanging = False
        self.answers_lost = False  # the records land, the answer does not
        self.timeout_s = timeout_s
        self.bounds: list[float] = []
        self.next_offset = 0
        self.records: list[tuple[bytes, bytes | None]] = []

    def write(
        self, records: Iterable[tuple[bytes, bytes | None]], *, within_s: float | None = None
    ) -> list[tuple[int, int]]:
        """Store the records, or raise a retriable timeout (``hanging``: after the whole wait)."""
        self.attempts += 1
        wait_s = self.timeout_s if within_s is None else min(within_s, self.timeout_s)
        if self.hanging:  # a broker that takes the connection and never answers
            self.bounds.append(wait_s)
            time.sleep(wait_s)
        if self.fail_next:
            self.fail_next -= 1
            raise KafkaClientError("not the leader", kafka_code=6, kafka_name="NOT_LEADER")
        if self.failing or self.hanging:
            raise KafkaClientError("no broker", kafka_code=-185, kafka_name="_TIMED_OUT")
        taken = list(records)
        self.records += taken
        first, self.next_offset = self.next_offset, self.next_offset + len(taken)
        if self.answers_lost:
            raise KafkaClientError("no answer", kafka_code=-185, kafka_name="_TIMED_OUT")
        return [(first + i, 0) for i in range(len(taken))]

    def close(self) -> None:
        """Nothing to deliver."""


class FakeReader:
    """A reader that applies what ``writer`` wrote (offsets as written, time 0) when waited on.

    ``writer`` None stands for a reader that reads nothing more (another log, say).
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.state = GroupState(str(args[3]))
        self.lock = threading.Condition()
        self.writer: FakeWriter | None = None
        self.applied = 0
        self.stale = False
        self.began_anew = 0
        self.stopped_at: int | None = None

    def wait_applied(self, offset: int, timeout_s: float) -> bool:
        """Apply every record written so far."""
        with self.lock:
            records = [] if self.writer is None else self.writer.records[self.applied :]
            for at, (key, value) in enumerate(records, self.applied):
                self.state.apply(key, value, at, 0)
            self.applied += len(records)
        return not self.stale

    def landed(self, offset: int, read_before: int) -> None:
        """The writer's offsets never go back."""

    def begin_anew(self, timeout_s: float) -> bool:
        """A fresh state; the records written before are another log's."""
        with self.lock:
            verdicts_of, self.state = self.state.verdicts_of, GroupState(self.state.group)
            self.state.verdicts_of = verdicts_of
            self.applied = len(self.writer.records) if self.writer is not None else 0
            self.began_anew += 1
        return True

    def stop_following(self) -> None:
        """Note how many records were written when the member let the reader end."""
        self.stopped_at = None if self.writer is None else len(self.writer.records)

    def close(self) -> None:
        """Nothing to stop."""


def answered(topic_id: str) -> concurrent.futures.Future[str]:
    """A topic-id question answered ``topic_id`` ("": the topic does not exist)."""
    future: concurrent.futures.Future[str] = concurrent.futures.Future()
    future.set_result(topic_id)
    return future


def report() -> MemberReport:
    """What the member says about itself."""
    return MemberReport(
        consumer_id="me", host="h", pid=1, node_id=0, source_count=1, topics=("orders",),
        strategy="modulo", version="v", lease_timeout_s=0.6,
    )  # fmt: skip


def wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Poll until ``condition`` holds, or fail."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


@pytest.fixture
def fenced() -> list[bool]:
    """What on_fenced was called with, in order."""
    return []


def member_on_fakes(
    monkeypatch: pytest.MonkeyPatch,
    fenced: list[bool],
    request_timeout_s: float = 0.25,
    topic_ids: list[str] | None = None,
    report_interval_s: float = 0.05,
    *,
    lease_timeout_s: float = 0.6,
    **options: Any,
) -> StatusMember:
    """A StatusMember on fakes, reporting every 50 ms with a 0.6 s lease (``options``: more).

    ``topic_ids[0]``: the status topic's id as the cluster tells it now ("": none).
    """
    topic_ids = topic_ids or ["id-1"]
    monkeypatch.setattr(_log, "ensure_status_topic", lambda *args, **kwargs: 1)
    monkeypatch.setattr(_log, "StatusWriter", FakeWriter)
    monkeypatch.setattr(_log, "StatusReader", FakeReader)
    monkeypatch.setattr(_renewal, "ask_topic_id", lambda *args: answered(topic_ids[0]))
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9092", group_id="g",
        report_interval_s=report_interval_s, lease_timeout_s=lease_timeout_s,
        request_timeout_s=request_timeout_s,
    )  # fmt: skip
    made = StatusMember(
        settings, "me", report, on_change=lambda: None, on_fenced=fenced.append, **options
    )
    assert isinstance(made._reader, FakeReader)
    assert isinstance(made._writer, FakeWriter)
    made._reader.writer = made._writer
    return made


def fence_then_let_writes_land(member: StatusMember, fenced: list[bool]) -> tuple[FakeWriter, int]:
    """Fail the member's writes until it fences, then let them land; its writer, records before."""
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    writer.failing = True
    wait_for(lambda: fenced == [True])
    written = len(writer.records)
    writer.failing = False
    return writer, written


@pytest.fixture
def member(monkeypatch: pytest.MonkeyPatch, fenced: list[bool]) -> StatusMember:
    """A StatusMember on fakes (``member_on_fakes``)."""
    return member_on_fakes(monkeypatch, fenced)


def test_member_fences_itself_when_reports_fail_and_recovers(
    member: StatusMember, fenced: list[bool]
) -> None:
    """No report within the lease (minus a margin) fences; the next report that lands unfences."""
    member.join()
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    began = time.monotonic()
    writer.failing = True
    wait_for(lambda: fenced == [True])
    assert member.fenced
    assert member.fences == 1  # counted: a round's claims read back before it are void
    # Fenced after the lease minus min(report interval, lease / 3): 0.55 s, not sooner.
    assert time.monotonic() - began >= 0.5
    writer.failing = False
    wait_for(lambda: fenced == [True, False])
    assert not member.fenced
    member.leave()
    assert writer.records[-1][1] is None  # the report's tombstone


def test_a_healthy_member_reporting_at_half_its_lease_never_fences(
    monkeypatch: pytest.MonkeyPatch, fenced: list[bool]
) -> None:
    """The longest report interval the settings allow (half the lease) leaves the fence alone."""
    member = member_on_fakes(monkeypatch, fenced, report_interval_s=0.3)
    member.join()
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    time.sleep(1.6)  # five reports
    assert len(writer.records) >= 5
    assert fenced == []
    member.leave()


def test_one_report_that_fails_at_once_is_tried_again_before_the_fence(
    monkeypatch: pytest.MonkeyPatch, fenced: list[bool]
) -> None:
    """A report refused at once is written again soon, not a whole interval later.

    The next attempt came an interval later, when the lease minus its margin had already
    passed: with the defaults (30 s lease, 10 s reports) one refused report fenced a healthy
    member 20 s after its last report, before it had tried again.
    """
    # As with the defaults, the interval is a third of the lease: the fence is due 1.0 s after
    # the last report, the next attempt after a failure at 0.5 s came at 1.0 s.
    member = member_on_fakes(monkeypatch, fenced, report_interval_s=0.5, lease_timeout_s=1.5)
    member.join()
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    written = len(writer.records)
    writer.fail_next = 1
    time.sleep(2.0)  # the refused report, then three more intervals
    assert writer.fail_next == 0
    assert len(writer.records) > written
    assert fenced == []
    member.leave()


def test_reports_that_keep_failing_are_tried_less_and_less_often(
    monkeypatch: pytest.MonkeyPatch, fenced: list[bool]
) -> None:
    """Failed reports are retried a quarter interval later, then twice as late each time.

    A report refused for good (an ACL, say) was tried again every quarter interval for as
    long as the member lived (the review of 2026-11-29, later).
    """
    member = member_on_fakes(monkeypatch, fenced, report_interval_s=0.5, lease_timeout_s=1.5)
    member.join()
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    before = writer.attempts
    writer.failing = True
    time.sleep(2.2)  # retries after 0.125, 0.25, 0.5, 0.5, 0.5 s: not one every 0.125 s
    tried = writer.attempts - before
    writer.failing = False
    assert 3 <= tried <= 8, f"{tried} attempts in 2.2 s"
    member.leave()


def test_a_report_write_that_hangs_gives_up_in_time_for_the_fence(
    monkeypatch: pytest.MonkeyPatch, fenced: list[bool]
) -> None:
    """Each write waits at most until the fence is due, not the whole request timeout."""
    # Lease 0.6 s: fenced 0.55 s after a report; request_timeout_s may be half the lease.
    member = member_on_fakes(monkeypatch, fenced, request_timeout_s=0.3)
    member.join()
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    writer.hanging = True
    wait_for(lambda: fenced == [True])
    assert writer.bounds[0] <= 0.3
    assert sum(writer.bounds) <= 0.55 + 1e-6  # the waits end by the fence, however many
    writer.hanging = False
    wait_for(lambda: fenced == [True, False])
    member.leave()


def test_a_fenced_member_stays_fenced_until_its_commits_have_their_answers(
    monkeypatch: pytest.MonkeyPatch, fenced: list[bool]
) -> None:
    """A report that lands unfences only once no commit is held: the late one lands first.

    The reports meanwhile still go out, marked fenced, so the others see it alive and out.
    """
    settled = threading.Event()
    member = member_on_fakes(monkeypatch, fenced, commits_settled=settled.is_set)
    member.join()
    writer, written = fence_then_let_writes_land(member, fenced)
    wait_for(lambda: len(writer.records) > written + 2)  # reports land: one each interval
    assert fenced == [True]
    assert all(MemberReport.decode(value).fenced for _, value in writer.records[written:] if value)
    settled.set()
    wait_for(lambda: fenced == [True, False])
    member.leave()


def test_a_member_back_from_its_fence_withdraws_the_claims_it_dropped(
    member: StatusMember, fenced: list[bool]
) -> None:
    """Its claims are written off before it unfences: the others may never have seen it lapse.

    The fence comes before the lease ends for the others. Forgotten without a withdrawal, a
    claim the others still counted kept the partition from everyone while the member lived.
    """
    p0 = TopicPartition("orders", 0)
    member.join([p0])
    writer, written = fence_then_let_writes_land(member, fenced)
    wait_for(lambda: fenced == [True, False])
    assert (claim_key("g", p0, "me"), None) in writer.records[written:]
    assert member.claimed() == set()
    member.leave()


def test_leave_withdraws_claims_and_is_idempotent(member: StatusMember) -> None:
    """leave() writes a withdrawal per claim and a report tombstone, once."""
    member.join()
    assert member.claim([TopicPartition("orders", 1), TopicPartition("orders", 0)]) == {
        TopicPartition("orders", 0): None,
        TopicPartition("orders", 1): None,
    }
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    written = len(writer.records)
    member.leave()
    member.leave()
    tombstones = writer.records[written:]
    assert [value for _, value in tombstones] == [None, None, None]
    assert member.claimed() == set()


def test_leave_lets_the_reader_end_before_it_writes_the_leave(member: StatusMember) -> None:
    """The reader is told to stop before the leave is written: the read bringing it back ends it.

    Told after, the reader began another poll and the member's close waited that poll out.
    """
    member.join()
    writer, reader = member._writer, member._reader
    assert isinstance(writer, FakeWriter)
    assert isinstance(reader, FakeReader)
    written = len(writer.records)
    member.leave()
    assert reader.stopped_at == written
    assert len(writer.records) == written + 1  # the report's tombstone, after


def test_a_paused_process_is_fenced_by_its_clock_before_it_reports_again(
    member: StatusMember, fenced: list[bool]
) -> None:
    """A pause longer than the lease (no failed write to see) ends the lease at once.

    The report after the pause succeeds, so only the member's own clock can tell: lease_ok()
    is False from the moment the pause is over, the member fences and releases, and is
    unfenced only once a report has landed and been read back.
    """
    member.join()
    assert member.lease_ok()
    member._last_written_s -= 5.0  # stands for SIGSTOP: nothing ran, time went on
    assert not member.lease_ok()
    wait_for(lambda: fenced == [True, False])
    assert member.lease_ok()
    member.leave()


def test_claims_made_with_the_join_go_in_its_write_and_stand(member: StatusMember) -> None:
    """Report then claims, in order; a later claim of a standing one writes nothing."""
    p0, p1, p2 = (TopicPartition("orders", n) for n in range(3))
    member.join([p1, p0])
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    assert [key for key, _ in writer.records] == [
        member_key("g", "me"),
        claim_key("g", p0, "me"),
        claim_key("g", p1, "me"),
    ]
    assert member.claimed() == {p0, p1}
    written = len(writer.records)
    assert member.claim([p0, p2]) == {p0: None, p2: None}
    assert [key for key, _ in writer.records[written:]] == [claim_key("g", p2, "me")]
    member.leave()


def test_a_claim_lost_at_the_join_is_withdrawn_at_once(member: StatusMember) -> None:
    """A live member held orders-0 when the join's claim on it was applied: it is taken back."""
    p0, p1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    writer.write([(claim_key("g", p0, "other"), b"{}")])
    member.join([p0, p1])
    assert writer.records[-1] == (claim_key("g", p0, "me"), None)
    assert member.claimed() == {p1}
    member.leave()


def test_a_claim_whose_answer_was_lost_is_withdrawn_with_the_next_write(
    member: StatusMember,
) -> None:
    """A claim reported failed may have landed: its tombstone goes out, it is never re-asserted.

    It stood in the log, unknown to its member, refusing everyone else the partition.
    """
    p0, p1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    member.join()
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    writer.answers_lost = True
    with pytest.raises(KafkaClientError):
        member.claim([p0, p1])
    writer.answers_lost = False
    assert member.claimed() == set()
    assert member.claim([p1]) == {p1: None}  # claimed again: it stands, only p0 goes
    wait_for(lambda: (claim_key("g", p0, "me"), None) in writer.records)
    assert (claim_key("g", p1, "me"), None) not in writer.records
    assert member.claimed() == {p1}
    member.leave()


def test_a_claim_without_a_verdict_is_not_taken_for_a_win(member: StatusMember) -> None:
    """A claim the reader never judged (read on another log) is lost, not won.

    Found by the status-log review: a missing verdict read as a win, so a member whose reader
    followed a deleted status topic won a partition that a live member held in the new one.
    """
    p0, p1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    member.join()
    reader = member._reader
    assert isinstance(reader, FakeReader)
    member._writer.write([(claim_key("g", p0, "other"), b"{}")])
    reader.wait_applied(0, 0)
    reader.writer = None  # what is written now is not read back
    verdicts = member.claim([p0, p1])
    assert verdicts[p0] == "other"
    assert verdicts[p1] is not None  # nobody is seen to hold it, but the claim was not judged
    assert member.claimed() == set()
    member.leave()


def test_a_status_topic_made_anew_fences_at_once_and_joins_it_afresh(
    monkeypatch: pytest.MonkeyPatch, fenced: list[bool]
) -> None:
    """A new topic id fences at once, though writes land; the new log is read from its start.

    Its claims are forgotten (none is in the new log) and its first report there is a join.
    Found by the status-log review: the old state and position were kept under the new log.
    """
    topic_ids = ["id-1"]
    member = member_on_fakes(monkeypatch, fenced, topic_ids=topic_ids)
    p0 = TopicPartition("orders", 0)
    member.join([p0])
    reader, writer = member._reader, member._writer
    assert isinstance(reader, FakeReader)
    assert isinstance(writer, FakeWriter)
    wait_for(lambda: len(writer.records) > 3)  # reports go on: the first answer was heard
    topic_ids[0] = "id-2"
    wait_for(lambda: fenced == [True, False])
    assert reader.began_anew == 1
    assert member.claimed() == set()
    rejoin = next(
        MemberReport.decode(value)
        for key, value in writer.records[reader.applied - 1 :]
        if key == member_key("g", "me") and value is not None
    )
    assert rejoin.join_offset is None  # its first report in the new log: a join
    assert (claim_key("g", p0, "me"), None) not in writer.records  # forgotten, not withdrawn
    member.leave()


def test_a_status_log_cut_back_under_the_same_topic_withdraws_the_claims_it_renews_from(
    monkeypatch: pytest.MonkeyPatch, fenced: list[bool]
) -> None:
    """The same topic, its log cut back (an unclean election): claims withdrawn, not forgotten.

    They were forgotten as if the log were new, though they may still stand in it: nothing
    withdrew them afterwards, and every other member was refused those partitions for as long
    as this one lived (the review of 2026-11-29, later).
    """
    member = member_on_fakes(monkeypatch, fenced)
    p0 = TopicPartition("orders", 0)
    member.join([p0])
    reader, writer = member._reader, member._writer
    assert isinstance(reader, FakeReader)
    assert isinstance(writer, FakeWriter)
    wait_for(lambda: len(writer.records) > 3)
    reader.stale = True  # offsets went back under the same topic id
    wait_for(lambda: reader.began_anew == 1)
    reader.stale = False
    wait_for(lambda: fenced == [True, False])
    assert (claim_key("g", p0, "me"), None) in writer.records
    assert member.claimed() == set()
    member.leave()


def test_a_deleted_status_topic_is_made_again_as_at_the_start(
    monkeypatch: pytest.MonkeyPatch, fenced: list[bool]
) -> None:
    """No status topic: the member fences, creates it with its start's settings, and rejoins."""
    topic_ids = ["id-1"]
    made: list[dict[str, Any]] = []

    def ensure(*args: object, **kwargs: Any) -> int:
        made.append(kwargs)
        topic_ids[0] = "id-2"
        return 1

    member = member_on_fakes(monkeypatch, fenced, topic_ids=topic_ids)
    member.join()
    monkeypatch.setattr(_log, "ensure_status_topic", ensure)
    topic_ids[0] = ""
    wait_for(lambda: fenced == [True, False])
    assert len(made) == 1
    assert made[0]["partitions"] == 1
    assert made[0]["allow_single_replica"] is False
    member.leave()


def test_a_status_topic_that_cannot_be_made_again_is_named_in_the_next_error(
    monkeypatch: pytest.MonkeyPatch, fenced: list[bool]
) -> None:
    """Creating the deleted topic refused: the error handed on names the topic and the ACL.

    The member stays fenced meanwhile; the review saw only "no answer within 3 s" before.
    """
    failures: list[ClientBalanceError] = []
    topic_ids = ["id-1"]

    def refuse(*args: object, **kwargs: object) -> int:
        raise KafkaClientError(
            "preparing topic '__client_balance_status' failed: TOPIC_AUTHORIZATION_FAILED",
            kafka_code=29, kafka_name="TOPIC_AUTHORIZATION_FAILED",
        )  # fmt: skip

    member = member_on_fakes(monkeypatch, fenced, topic_ids=topic_ids, on_failure=failures.append)
    member.join()
    monkeypatch.setattr(_log, "ensure_status_topic", refuse)
    topic_ids[0] = ""
    wait_for(lambda: bool(failures))
    error = failures[0]
    assert isinstance(error, KafkaClientError)
    assert error.kafka_name == "TOPIC_AUTHORIZATION_FAILED"
    assert "status topic '__client_balance_status' (status_topic) is missing" in str(error)
    assert "Create" in str(error)
    assert member.fenced
    assert fenced == [True]
    member.leave()


def test_a_status_topic_made_anew_with_wrong_settings_is_not_joined_until_fixed(
    monkeypatch: pytest.MonkeyPatch, fenced: list[bool]
) -> None:
    """Made anew by hand with the broker's defaults: checked as at a start, refused, fenced.

    It was joined unchecked: a log that is not compacted loses the claims, and one stamped by
    its producers dated every record by the reader's clock (the review of 2026-11-29).
    """
    failures: list[ClientBalanceError] = []
    topic_ids = ["id-1"]
    checks: list[str] = []
    wrong = [True]

    def check(*args: object, **kwargs: object) -> int:
        checks.append(topic_ids[0])
        if wrong[0]:
            raise ConfigError(
                "status topic '__client_balance_status' has cleanup.policy=delete; it must be "
                "compacted"
            )
        return 1

    member = member_on_fakes(monkeypatch, fenced, topic_ids=topic_ids, on_failure=failures.append)
    member.join()
    monkeypatch.setattr(_log, "ensure_status_topic", check)
    topic_ids[0] = "id-2"
    wait_for(lambda: bool(failures))
    assert isinstance(failures[0], ConfigError)
    assert "cleanup.policy=delete" in str(failures[0])
    assert checks[0] == "id-2"
    assert member.fenced
    wrong[0] = False  # the operator fixes the topic's settings
    wait_for(lambda: fenced == [True, False])
    member.leave()


def test_one_answer_that_the_status_topic_is_missing_only_doubts_the_lease(
    monkeypatch: pytest.MonkeyPatch, fenced: list[bool]
) -> None:
    """Until asked again: lease_ok is False (nothing goes out), lease_in_doubt True (kept).

    The round that the answer wakes may run before the report thread asks again; it must see
    the doubt, not a lapse, or it drops every partition on one answer.
    """
    member = member_on_fakes(monkeypatch, fenced)
    member.join()
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    wait_for(lambda: len(writer.records) > 3)  # the first answer ("id-1") was heard
    second = threading.Event()
    seen: list[tuple[bool, bool]] = []

    def asked(*args: object) -> Any:
        if not seen:  # the first question after the switch: "missing"
            seen.append((member.lease_ok(), member.lease_in_doubt()))
            return answered("")
        seen.append((member.lease_ok(), member.lease_in_doubt()))  # the report thread's
        second.set()
        return answered("id-1")

    monkeypatch.setattr(_renewal, "ask_topic_id", asked)
    assert second.wait(5.0)
    assert seen[1] == (False, True)  # asked again while in doubt, nothing lapsed
    wait_for(member.lease_ok)
    assert not member.lease_in_doubt()
    assert fenced == []
    member.leave()


def test_one_answer_that_the_status_topic_is_missing_fences_nothing(
    monkeypatch: pytest.MonkeyPatch, fenced: list[bool]
) -> None:
    """A "missing" not repeated when asked again: no fence, and the claims stand.

    One such answer (a broker whose metadata lags) fenced a healthy member, which forgot its
    claims without withdrawing them: they stood in the log, refusing the partition to everyone
    (the review of this session's diff).
    """
    member = member_on_fakes(monkeypatch, fenced)
    p0 = TopicPartition("orders", 0)
    member.join([p0])
    writer = member._writer
    assert isinstance(writer, FakeWriter)
    wait_for(lambda: len(writer.records) > 3)  # the first answer ("id-1") was heard
    odd = [1]

    def once_missing(*args: object) -> Any:
        if odd[0]:
            odd[0] -= 1
            return answered("")
        return answered("id-1")

    monkeypatch.setattr(_renewal, "ask_topic_id", once_missing)
    wait_for(lambda: odd[0] == 0)
    written = len(writer.records)
    wait_for(lambda: len(writer.records) > written + 3)  # reports go on
    assert fenced == []
    assert member.claimed() == {p0}
    member.leave()


def test_a_claim_that_landed_but_was_not_read_back_is_withdrawn_with_the_next_write(
    monkeypatch: pytest.MonkeyPatch, member: StatusMember
) -> None:
    """A read-back that timed out leaves the claim unsure, as a failed write does: tombstoned."""
    p1 = TopicPartition("orders", 1)
    member.join()
    reader, writer = member._reader, member._writer
    assert isinstance(reader, FakeReader)
    assert isinstance(writer, FakeWriter)
    caught_up = reader.wait_applied
    monkeypatch.setattr(reader, "wait_applied", lambda offset, timeout_s: False)
    with pytest.raises(KafkaClientError):
        member.claim([p1])
    monkeypatch.setattr(reader, "wait_applied", caught_up)
    wait_for(lambda: (claim_key("g", p1, "me"), None) in writer.records)
    assert member.claimed() == set()
    member.leave()


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"cleanup.policy": "compact,delete"}, "cleanup.policy=compact,delete"),
        ({"unclean.leader.election.enable": "true"}, "unclean.leader.election.enable=true"),
    ],
)
def test_a_status_topic_that_retention_or_an_unclean_election_could_cut_is_refused(
    monkeypatch: pytest.MonkeyPatch, config: dict[str, str], named: str
) -> None:
    """compact,delete and unclean leader election are refused, as plain delete always was.

    Both passed: retention could delete a claim written once (an unsigned group's) and a
    later member win a partition held all along; an unclean election cuts claims and their
    withdrawals off the log (the review of 2026-11-29, later).
    """
    found = {
        "cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime", **config
    }  # fmt: skip
    state = TopicState(partitions=1, replication_factor=3, brokers=3, config=found)
    monkeypatch.setattr(_topic, "ensure_topic", lambda *args, **kwargs: state)
    with pytest.raises(ConfigError, match=re.escape(named)):
        _topic.ensure_status_topic("127.0.0.1:9", "status", kafka={}, timeout_s=1.0)
