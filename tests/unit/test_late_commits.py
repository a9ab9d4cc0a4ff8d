"""Commits answered late, and the re-commit of the others when a member returns (fakes)."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance.consumer._arrivals import Arrivals
from client_balance.consumer._buffers import HeldPartition
from client_balance.consumer._commit_sender import CommitSender
from client_balance.consumer._commits import Committer
from client_balance.errors import ClientBalanceError, KafkaClientError
from client_balance.keys import TopicPartition
from client_balance.membership import MemberReport


class _SlowConsumer:
    """A consumer whose commit runs ``during`` before answering (a held request)."""

    def __init__(self, during: Any = lambda: None) -> None:
        self.during = during
        self.commits: list[list[int]] = []
        self.closed = False

    def commit(self, *, offsets: list[KafkaTopicPartition], asynchronous: bool) -> list[Any]:
        self.during()
        self.commits.append([tp.offset for tp in offsets])
        return []

    def poll(self, timeout: float) -> None:
        """Nothing to serve."""

    def close(self) -> None:
        """Noted."""
        self.closed = True


def _committing(
    consumer: _SlowConsumer, now: list[float], **options: Any
) -> tuple[list[HeldPartition], Committer]:
    """One held state confirmed at 7 (3 committed), and a committer of it on the clock ``now``."""
    states = [HeldPartition(TopicPartition("orders", 0), None, confirmed=7, committed=3)]
    commits = Committer(
        lambda: consumer, "g", 5.0, threading.Condition(),
        held=lambda: states, clock=lambda: now[0], **options,
    )  # fmt: skip
    return states, commits


def _no_failure(error: ClientBalanceError) -> None:
    pytest.fail(f"a commit failed: {error}")


def _held(*confirmed: int) -> list[HeldPartition]:
    return [
        HeldPartition(TopicPartition("orders", n), None, confirmed=at, committed=at)
        for n, at in enumerate(confirmed)
    ]


class _RefreshFailingOnce(_SlowConsumer):
    """Its second poll() raises, as confluent-kafka raises an oauth_cb's failure from poll()."""

    def __init__(self) -> None:
        super().__init__()
        self.polls = 0

    def poll(self, timeout: float) -> None:
        self.polls += 1
        if self.polls == 2:
            raise ValueError("token endpoint unavailable")


def test_a_callback_that_raises_in_the_idle_poll_leaves_the_commits_going() -> None:
    """The sender's thread serves the client between commits; a callback's failure ends nothing.

    It ended the thread: every later commit waited for nothing, settled() stayed False, and no
    failure reached the application (the review of 2026-11-29).
    """
    consumer = _RefreshFailingOnce()
    now = [0.0]
    states, commits = _committing(consumer, now)
    commits.start()
    deadline = time.monotonic() + 5.0
    while consumer.polls < 3:  # past the failing poll, idle polls go on
        assert time.monotonic() < deadline
        time.sleep(0.05)
    commits.commit(states)
    assert consumer.commits == [[7]]
    assert commits.settled()
    commits.close()


def test_a_commit_answered_after_the_lease_lapsed_counts_for_nothing() -> None:
    """The lease lapses while the commit waits: it raises LEASE_LAPSED and marks nothing."""
    lease = {"ok": True}
    states = [HeldPartition(TopicPartition("orders", 0), None, confirmed=7, committed=3)]
    commits: Committer

    def held_until_the_lease_lapsed() -> None:
        assert not commits.settled()  # the member waits for this answer before returning
        lease["ok"] = False

    consumer = _SlowConsumer(held_until_the_lease_lapsed)
    commits = Committer(
        lambda: consumer, "g", 5.0, threading.Condition(), may_commit=lambda: lease["ok"]
    )
    with pytest.raises(KafkaClientError, match="lease may have lapsed") as raised:
        commits.commit(states)
    assert raised.value.kafka_name == "LEASE_LAPSED"
    assert states[0].committed == 3
    assert commits.settled()


def test_recommit_soon_commits_every_held_position_at_the_next_check() -> None:
    """Positions already committed count as not committed, and the next check commits all."""
    states = _held(5, 9)
    consumer = _SlowConsumer()
    now = [0.0]
    commits = Committer(
        lambda: consumer, "g", 3600.0, threading.Condition(),
        held=lambda: states, clock=lambda: now[0],
    )  # fmt: skip
    commits.on_interval(_no_failure)
    assert consumer.commits == []  # nothing due, and the interval has not passed
    commits.recommit_soon()
    assert [state.committed for state in states] == [None, None]
    commits.on_interval(_no_failure)
    assert consumer.commits == [[5, 9]]
    assert [state.committed for state in states] == [5, 9]


def test_a_recommit_asked_while_a_commit_waits_for_its_answer_is_still_made() -> None:
    """The answer of a commit sent before recommit_soon() does not mark the positions committed.

    It did: a returning member's late commit, which recommit_soon() answers, then stood until
    the next confirm or the hourly re-commit (the review of 2026-11-29).
    """
    states = _held(5, 9)
    for state in states:
        state.committed = None
    commits: Committer
    consumer = _SlowConsumer(lambda: commits.recommit_soon())  # noqa: PLW0108 - bound below
    now = [0.0]
    commits = Committer(
        lambda: consumer, "g", 3600.0, threading.Condition(),
        held=lambda: states, clock=lambda: now[0],
    )  # fmt: skip
    commits.commit_due(states)  # its answer comes after a member returned
    assert consumer.commits == [[5, 9]]
    assert [state.committed for state in states] == [None, None]
    consumer.during = lambda: None
    commits.on_interval(_no_failure)
    assert consumer.commits == [[5, 9], [5, 9]]
    assert [state.committed for state in states] == [5, 9]


def _report(member: str, *, fenced: bool = False) -> MemberReport:
    return MemberReport(
        consumer_id=member, host="h", pid=1, node_id=-1, source_count=-1, topics=("orders",),
        strategy="sticky", version="v", lease_timeout_s=30.0, fenced=fenced,
    )  # fmt: skip


def test_returns_from_a_fence_or_a_lapse_count_and_new_members_do_not() -> None:
    """C1 joins (new: nothing), is fenced, comes back (counted); C2 lapses, comes back."""
    arrivals = Arrivals("me")
    me, c0 = _report("me"), _report("C0")
    known = ["me", "C0", "C1", "C2"]
    looks = [
        ({"me": me, "C0": c0}, ["me", "C0"]),
        ({"me": me, "C0": c0, "C1": _report("C1"), "C2": _report("C2")}, known),
        ({"me": me, "C0": c0, "C1": _report("C1", fenced=True)}, known),  # C2 lapsed
        ({"C2": _report("C2"), "C1": _report("C1"), "C0": c0, "me": me}, known),
    ]
    assert [arrivals.returned(live, known) for live, known in looks] == [
        [], [], [], ["C1", "C2"]
    ]  # fmt: skip


def test_an_interval_commit_skips_a_partition_released_after_its_states_were_taken() -> None:
    """A release without commit between taking the states and the commit: only t:1 commits."""
    states = [
        HeldPartition(TopicPartition("orders", n), None, confirmed=9, committed=3) for n in (0, 1)
    ]
    held = {state.partition: state for state in states}
    consumer = _SlowConsumer()

    def taken_then_released() -> list[HeldPartition]:
        taken = list(held.values())
        del held[states[0].partition]  # the topic re-created: released, nothing committed
        return taken

    commits = Committer(
        lambda: consumer, "g", 0.0, threading.Condition(),
        held=taken_then_released, holds=lambda state: held.get(state.partition) is state,
    )  # fmt: skip
    commits.on_interval(_no_failure)
    assert consumer.commits == [[9]]
    assert [state.committed for state in states] == [3, 9]


def test_a_sync_confirm_commit_skips_a_partition_released_while_it_waited_its_turn() -> None:
    """The confirm's commit finds its partition released meanwhile: nothing is committed."""
    state = HeldPartition(TopicPartition("orders", 0), None, confirmed=9, committed=3)
    earlier = HeldPartition(TopicPartition("orders", 1), None, confirmed=4, committed=None)
    held = {state.partition: state, earlier.partition: earlier}
    answer = threading.Event()
    consumer = _SlowConsumer(during=lambda: answer.wait(10))
    commits = Committer(
        lambda: consumer, "g", 5.0, threading.Condition(),
        holds=lambda s: held.get(s.partition) is s,
    )  # fmt: skip
    commits.send([earlier])  # its answer is held back: the confirm's commit waits its turn
    outcome: list[bool] = []
    confirm = threading.Thread(target=lambda: outcome.append(commits.commit_confirmed(state)))
    confirm.start()
    _wait_for(lambda: len(commits._sender._jobs) == 1)  # the confirm's commit is queued
    del held[state.partition]  # another member took the partition over
    answer.set()
    confirm.join(10)
    assert outcome == [False]
    assert consumer.commits == [[4]]
    assert state.committed == 3


def test_commits_wait_out_a_coordinator_that_was_away_instead_of_holding_the_client() -> None:
    """After a commit found no coordinator, interval and sync-confirm commits skip a window."""
    now = [0.0]
    away = {"yes": True}
    attempts: list[float] = []

    def no_coordinator() -> None:
        attempts.append(now[0])
        if away["yes"]:
            raise KafkaException(KafkaError(KafkaError._WAIT_COORD, "Waiting for coordinator"))

    consumer = _SlowConsumer(during=no_coordinator)
    states, commits = _committing(consumer, now)
    assert commits.commit_confirmed(states[0]) is False  # tried: no coordinator
    now[0] = 4.0
    assert commits.commit_confirmed(states[0]) is False  # within 5 s: not tried
    now[0] = 5.0
    commits.on_interval(_no_failure)  # the window is over: tried, fails again
    now[0] = 14.0
    commits.on_interval(_no_failure)  # the window doubled to 10 s: not tried
    away["yes"] = False
    now[0] = 15.0
    commits.on_interval(_no_failure)  # back: committed
    assert attempts == [0.0, 5.0, 15.0]
    assert consumer.commits == [[7]]
    assert states[0].committed == 7


def test_a_commit_queued_behind_a_failing_one_does_not_try_again_within_the_window() -> None:
    """The interval's commit, queued behind a failing one, skips the window at its turn.

    The window was looked at before the lock was waited for: on a 3-node cluster, failures came
    in pairs 10 s apart, each holding the client lock (the chaos review).
    """
    now = [100.0]
    calls: list[float] = []
    first_in = threading.Event()
    release = threading.Event()

    def no_coordinator() -> None:
        calls.append(now[0])
        first_in.set()
        release.wait(5)  # librdkafka's wait for a coordinator
        raise KafkaException(KafkaError(KafkaError._WAIT_COORD, "Waiting for coordinator"))

    consumer = _SlowConsumer(during=no_coordinator)
    states, commits = _committing(consumer, now)
    confirm = threading.Thread(target=commits.commit_confirmed, args=(states[0],))
    confirm.start()
    assert first_in.wait(5)
    now[0] = 106.0  # the interval is due while the confirm's commit waits for its answer
    interval = threading.Thread(target=commits.on_interval, args=(_no_failure,))
    interval.start()
    _wait_for(lambda: len(commits._sender._jobs) == 1)  # the interval's commit waits its turn
    release.set()  # the first commit fails: the coordinator is away
    confirm.join(10)
    interval.join(10)
    assert len(calls) == 1, f"{len(calls)} commit attempts while the coordinator was away"


def test_a_commit_whose_answer_never_comes_gives_up_in_time_and_is_not_sent_again() -> None:
    """A commit in flight when the coordinator's link dropped: given up, the window begins.

    librdkafka waits for its answer until the link heals, holding the client lock with it: a
    sync member handed out nothing for a whole 75 s outage on a 3-node cluster (chaos re-run).
    """
    answer_lost, healed = threading.Event(), threading.Event()

    def no_answer() -> None:
        answer_lost.set()
        assert healed.wait(30), "the test never healed the link"

    consumer = _SlowConsumer(during=no_answer)
    states, commits = _committing(consumer, [100.0], answer_wait_s=0.2)
    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            commits.commit(states)
            outcome.append(None)
        except KafkaClientError as error:
            outcome.append(error)

    committing = threading.Thread(target=commit, daemon=True)
    committing.start()
    committing.join(10)
    assert not committing.is_alive(), "the commit waited for an answer that never comes"
    [given_up] = outcome
    assert isinstance(given_up, KafkaClientError)
    assert given_up.retriable
    assert not commits.settled()  # its answer may still come: a fence waits for it
    with pytest.raises(KafkaClientError, match="still waits for its answer"):
        commits.commit(states)  # not a second request behind the first
    assert commits.commit_confirmed(states[0]) is False  # the window
    commits.close()  # waits answer_wait_s: the commit's thread is inside the client
    assert not consumer.closed  # not freed under that thread
    healed.set()
    _wait_for(lambda: consumer.closed)  # answered: the sender closes it on its way out
    assert commits.settled()
    assert states[0].committed == 3  # given up: not counted, the next interval commits it again
    assert consumer.commits == [[7]]


def test_a_release_commit_waits_behind_a_given_up_commit_answered_in_time() -> None:
    """A release's commit queues behind a given-up one and lands once that one is answered.

    It was refused at once ("an earlier commit still waits for its answer"): a member cut off
    from the cluster and back raised it from ``shutdown()`` a moment after the link healed,
    while its commit from the cut was still on its way (fresh-clone make test, 2026-11-29).
    """
    healed = threading.Event()
    consumer = _SlowConsumer(during=lambda: healed.wait(10))
    states, commits = _committing(consumer, [100.0], answer_wait_s=0.5)
    with pytest.raises(KafkaClientError, match="no answer within"):
        commits.commit(states)  # the link is down: given up, still inside the client
    threading.Timer(0.1, healed.set).start()
    assert commits.commit_held(states)
    assert states[0].committed == 7
    assert consumer.commits == [[7], [7]]
    commits.close()


def _wait_for(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_a_start_commit_sent_behind_another_commits_the_position_it_was_asked_for() -> None:
    """A start commit waits its turn while the batch is confirmed: it still commits the start.

    Had it picked the position at its turn, it would commit past what ``on_revoked`` has yet to
    write (the checkpoint pattern of consumer.md).
    """
    earlier = HeldPartition(TopicPartition("orders", 1), None, confirmed=4, committed=None)
    state = HeldPartition(TopicPartition("orders", 0), None, confirmed=0, committed=None)
    answer = threading.Event()
    consumer = _SlowConsumer(during=lambda: answer.wait(10))
    commits = Committer(lambda: consumer, "g", 5.0, threading.Condition())
    commits.send([earlier])  # its answer is held back
    commits.send([state])  # the start, 0
    state.confirmed = 10  # a batch confirmed meanwhile
    answer.set()
    _wait_for(commits.settled)
    assert consumer.commits == [[4], [0]]


def test_a_commit_waiting_for_its_answer_holds_only_the_claims_of_its_own_partitions() -> None:
    """settled(partitions) waits only for a commit in flight that sent one of them.

    A start commit of one partition waiting for a coordinator's answer kept another partition's
    released claim from being withdrawn: the next member got 410 for it (fresh-clone make test).
    """
    sent = HeldPartition(TopicPartition("orders", 1), None, confirmed=4, committed=None)
    answer = threading.Event()
    consumer = _SlowConsumer(during=lambda: answer.wait(10))
    commits = Committer(lambda: consumer, "g", 5.0, threading.Condition())
    commits.send([sent])
    _wait_for(lambda: commits._sender._current is not None and bool(commits._sender._current.sent))
    assert not commits.settled()
    assert commits.settled([TopicPartition("orders", 0)])
    threading.Timer(0.2, answer.set).start()
    assert commits.settled([TopicPartition("orders", 1)])  # waited for, within answer_wait_s
    assert consumer.commits == [[4]]


def test_a_start_commit_given_up_before_its_turn_is_never_sent() -> None:
    """Queued behind a held commit, its waiter gave up: the claim may go, so the commit must.

    A start's commit picks its states whether held or not (they are not held yet); given up, it
    was still sent at its turn, after the registration had failed and withdrawn the claim, over
    whatever the next holder committed (the review of 2026-11-29).
    """
    answered = threading.Event()
    consumer = _SlowConsumer(lambda: answered.wait(5.0))
    now = [0.0]
    states, commits = _committing(consumer, now, answer_wait_s=0.2)
    held_up = threading.Thread(target=lambda: _raises_no_answer(commits, states))
    held_up.start()
    time.sleep(0.05)  # the first commit is in flight, its answer held back
    start = HeldPartition(TopicPartition("orders", 1), None, confirmed=50, committed=None)
    with pytest.raises(KafkaClientError, match=r"still waits for its answer|no answer within"):
        commits.commit([start])
    assert commits.settled([TopicPartition("orders", 1)])  # its claim may be withdrawn now
    answered.set()
    held_up.join()
    deadline = time.monotonic() + 5.0
    while not commits.settled():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert consumer.commits == [[7]]  # the held one only: never the start's 50
    commits.close()


def _raises_no_answer(commits: Committer, states: list[HeldPartition]) -> None:
    with pytest.raises(KafkaClientError):
        commits.commit(states)


def test_a_commit_whose_pick_is_under_way_is_not_settled() -> None:
    """Between its turn and the end of its pick a commit may send anything: not settled yet.

    A waiter that gave up just after the sender's check, while a long pick ran, found the
    commit settled (nothing sent yet) and withdrew the claim; the commit went out after (the
    review of 2026-11-29).
    """
    picking, go_on = threading.Event(), threading.Event()
    sender = CommitSender(_SlowConsumer, "g", threading.Condition())

    def pick() -> list[KafkaTopicPartition]:
        picking.set()
        go_on.wait(5.0)
        return [KafkaTopicPartition("orders", 1, 50)]

    job = sender.queue(pick)
    assert picking.wait(5.0)
    assert not sender.settled({("orders", 1)})  # mid-pick: it may send orders-1 yet
    go_on.set()
    assert job.done.wait(5.0)
    assert sender.settled({("orders", 1)})
    sender.close(1.0)


def test_commits_are_sent_one_at_a_time_in_the_order_they_were_asked() -> None:
    """Commits from many threads reach the client one at a time, in the order queued.

    A later commit landing before an earlier one would move a committed position back.
    """
    inside, overlaps = [0], [0]

    def one_at_a_time() -> None:
        inside[0] += 1
        overlaps[0] += inside[0] > 1
        time.sleep(0.002)
        inside[0] -= 1

    consumer = _SlowConsumer(during=one_at_a_time)
    sender = CommitSender(lambda: consumer, "g", threading.Condition())
    jobs = [sender.queue(functools.partial(_offset_of, at)) for at in range(1, 41)]
    for job in jobs:
        assert job.done.wait(5.0)
    assert consumer.commits == [[at] for at in range(1, 41)]
    assert overlaps == [0]
    sender.close(1.0)


def _offset_of(at: int) -> list[KafkaTopicPartition]:
    """A commit's pick: orders-0 at ``at``."""
    return [KafkaTopicPartition("orders", 0, at)]


def _refused(code: int, name: str) -> Any:
    def refuse() -> None:
        raise KafkaException(KafkaError(code, f"Broker: {name}"))

    return refuse


def test_a_refused_acl_is_raised_by_a_sync_confirm_and_stored_by_the_interval() -> None:
    """GROUP_AUTHORIZATION_FAILED names the ACL; a transport error stays a logged retry."""
    now = [0.0]
    states, commits = _committing(_SlowConsumer(during=_refused(30, "Group authorization")), now)
    with pytest.raises(KafkaClientError, match="lacks the ACL Read on group 'g'") as raised:
        commits.commit_confirmed(states[0])
    assert raised.value.kafka_name == "GROUP_AUTHORIZATION_FAILED"
    assert not raised.value.retriable
    stored: list[ClientBalanceError] = []
    now[0] = 10.0
    commits.on_interval(stored.append)
    assert [error.kafka_name for error in stored if isinstance(error, KafkaClientError)] == [
        "GROUP_AUTHORIZATION_FAILED"
    ]
    states, commits = _committing(_SlowConsumer(during=_refused(-195, "Transport")), now)
    assert commits.commit_confirmed(states[0]) is False
    now[0] = 100.0
    commits.on_interval(_no_failure)
