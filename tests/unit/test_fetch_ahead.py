"""Fetching ahead of the claim: what was fetched is kept only where its start still stands."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance.consumer import _fetch, _starts
from client_balance.consumer._buffers import HeldPartition
from client_balance.consumer._commits import Committer
from client_balance.consumer._fetch import Fetcher
from client_balance.consumer._shelf import Shelf
from client_balance.consumer._starts import DEFERRED_MAX_S, Starter, StartRules
from client_balance.keys import RESUME_OFFSET, TopicPartition
from client_balance.settings import ClientBalanceSettings

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
LOW, HIGH = 0, 100
NO_OFFSET = -1001


class _Client:
    """A Consumer whose log spans 0..100 and whose group commits are set by the test."""

    def __init__(self) -> None:
        self.committed_offsets: dict[int, int] = {}
        self.assigned: list[tuple[int, int]] = []
        self.unassigned: list[int] = []
        self.commits: list[tuple[int, int]] = []
        self.answer = threading.Event()
        """Commits are answered once this is set (the test may hold them back)."""
        self.answer.set()
        self.watermark_queries = 0
        self.highs: dict[int, int] = {}
        """Log ends other than HIGH, by partition."""
        self.paused: list[int] = []
        self.resumed: list[int] = []
        self.calls: list[tuple[str, int]] = []
        """Assigns, pauses and resumes in the order they were made."""

    def offsets_for_times(self, partitions: list[Any], timeout: float) -> list[Any]:
        """The log start for OFFSET_BEGINNING (-2), the end for OFFSET_END (-1)."""
        self.watermark_queries += 1
        return [
            KafkaTopicPartition(
                tp.topic,
                tp.partition,
                LOW if tp.offset == -2 else self.highs.get(tp.partition, HIGH),
            )
            for tp in partitions
        ]

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        """What the test says the group committed."""
        return [
            KafkaTopicPartition(
                tp.topic, tp.partition, self.committed_offsets.get(tp.partition, NO_OFFSET)
            )
            for tp in partitions
        ]

    def incremental_assign(self, partitions: list[Any]) -> None:
        """Noted."""
        self.assigned += [(tp.partition, tp.offset) for tp in partitions]
        self.calls += [("assign", tp.partition) for tp in partitions]

    def incremental_unassign(self, partitions: list[Any]) -> None:
        """Noted."""
        self.unassigned += [tp.partition for tp in partitions]

    def pause(self, partitions: list[Any]) -> None:
        """Noted, in order with the assigns."""
        self.paused += [tp.partition for tp in partitions]
        self.calls += [("pause", tp.partition) for tp in partitions]

    def resume(self, partitions: list[Any]) -> None:
        """Noted, in order with the assigns."""
        self.resumed += [tp.partition for tp in partitions]
        self.calls += [("resume", tp.partition) for tp in partitions]

    def commit(self, offsets: list[Any], asynchronous: bool) -> list[Any]:
        """Noted once answered, and taken as the group's committed offsets."""
        assert self.answer.wait(10), "the test never answered the commit"
        for tp in offsets:
            self.commits.append((tp.partition, tp.offset))
            self.committed_offsets[tp.partition] = tp.offset
        return []

    def poll(self, timeout: float) -> None:
        """Nothing to serve."""

    def close(self) -> None:
        """Nothing to free."""


def _starter() -> tuple[Starter, _Client, dict[TopicPartition, HeldPartition]]:
    client = _Client()
    held: dict[TopicPartition, HeldPartition] = {}
    lock = threading.Condition()
    shelf = Shelf(held, 10, 1 << 20, "type")
    commits = Committer(lambda: client, "g", 5.0, lock)
    starter = Starter(
        client, held=held, lock=lock, shelf=shelf, commits=commits, timeout_s=1.0,  # type: ignore[arg-type]
    )  # fmt: skip
    return starter, client, held


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "never came to pass"
        time.sleep(0.005)


def _rules(*partitions: TopicPartition, earliest: bool = True) -> StartRules:
    return StartRules(dict.fromkeys(partitions, RESUME_OFFSET), frozenset(), lambda tp: earliest)


def _run(partition: int, offsets: range) -> list[Any]:
    return [Message(topic="t", partition=partition, offset=o, value=b"v") for o in offsets]


def test_a_partition_fetched_ahead_is_adopted_with_what_it_fetched() -> None:
    """Committed offset unchanged at the claim: no second start, and the buffer stays."""
    starter, client, held = _starter()
    client.committed_offsets[0] = 30
    starter.ahead({T0: None}, _rules(T0))
    assert held[T0].fetched_ahead == (LOW, HIGH)
    assert not held[T0].announced
    held[T0].add_run(_run(0, range(30, 40)), 10, 10, 1000)
    starts = starter.hold({T0: None}, _rules(T0))
    assert starts == {T0: 30}
    assert held[T0].fetched_ahead is None
    assert held[T0].buffered == 10
    assert client.assigned == [(0, 30)]
    assert client.watermark_queries == 2  # the ahead start's two ListOffsets, no more
    assert client.unassigned == []
    assert client.commits == []  # resumed from the group's offset: nothing to commit


def test_a_start_committed_at_the_claim_is_committed_then_not_before() -> None:
    """With nothing committed, the start is committed by hold, never while fetched ahead."""
    starter, client, held = _starter()
    starter.ahead({T0: None}, _rules(T0, earliest=False))
    assert client.commits == []
    starter.hold({T0: None}, _rules(T0, earliest=False))
    assert client.commits == [(0, HIGH)]  # "latest": made before the first batch goes out
    assert held[T0].committed == HIGH


def test_an_earliest_start_is_committed_without_waiting() -> None:
    """Nothing committed, start_position "earliest": the commit is sent, not waited for.

    Any next holder would start at the log start too, so the first batch need not wait; the
    state stays uncommitted, so the interval's commit makes sure of it.
    """
    starter, client, held = _starter()
    starter.ahead({T0: None}, _rules(T0))
    client.answer.clear()
    starter.hold({T0: None}, _rules(T0))  # returns while the commit waits for its answer
    client.answer.set()
    _wait_until(starter._commits.settled)
    assert client.commits == [(0, LOW)]
    assert held[T0].committed is None


def test_a_commit_made_while_fetching_ahead_restarts_the_partition_there() -> None:
    """Another member committed 40 meanwhile: the fetched messages go, and it starts at 40."""
    starter, client, held = _starter()
    client.committed_offsets[0] = 30
    starter.ahead({T0: None}, _rules(T0))
    ahead = held[T0]
    ahead.add_run(_run(0, range(30, 40)), 10, 10, 1000)
    client.committed_offsets[0] = 40
    starts = starter.hold({T0: None}, _rules(T0))
    assert starts == {T0: 40}
    assert client.unassigned == [0]
    assert client.assigned == [(0, 30), (0, 40)]
    assert held[T0] is not ahead
    assert held[T0].buffered == 0
    assert held[T0].fetched_ahead is None


def test_a_partition_fetched_ahead_but_not_held_is_forgotten() -> None:
    """Only the claimed partition is held; the other is unassigned and its buffer dropped."""
    starter, client, held = _starter()
    client.highs[0] = 50  # T1 has more to read: it is the one assigned ahead
    starter.ahead({T0: None, T1: None}, _rules(T0, T1))
    assert client.assigned == [(1, LOW)]
    held[T1].add_run(_run(1, range(5)), 5, 5, 1000)
    starter.hold({T0: None}, _rules(T0, T1))
    leftover = [state for state in held.values() if state.fetched_ahead is not None]
    assert [state.partition for state in leftover] == [T1]
    starter.forget(leftover)
    assert list(held) == [T0]
    assert client.unassigned == [1]


def test_only_the_partition_with_most_to_read_is_assigned_ahead() -> None:
    """The rest of the share is read ahead and assigned at the claim, without reading again."""
    starter, client, held = _starter()
    client.highs[1] = 60
    client.committed_offsets[1] = 20
    starter.ahead({T0: None, T1: None}, _rules(T0, T1))
    assert client.assigned == [(0, LOW)]
    assert list(held) == [T0]
    starts = starter.hold({T0: None, T1: None}, _rules(T0, T1))
    assert starts == {T0: LOW, T1: 20}
    assert client.assigned == [(0, LOW), (1, 20)]
    assert client.watermark_queries == 2  # read once, ahead
    _wait_until(starter._commits.settled)
    assert client.commits == [(0, LOW)]  # T0 had nothing committed; T1 resumes at 20
    assert all(state.fetched_ahead is None for state in held.values())


def test_the_rest_of_a_share_is_assigned_paused_until_the_first_batch_is_out() -> None:
    """T0 fetched ahead: T1 is paused before its assign (no fetch starts) and resumed later.

    Fetching its backlog beside T0's first batch had librdkafka parse a megabyte a partition
    just while that batch was handed out.
    """
    starter, client, held = _starter()
    client.highs[1] = 60
    starter.ahead({T0: None, T1: None}, _rules(T0, T1))
    starter.hold({T0: None, T1: None}, _rules(T0, T1))
    assert client.calls == [("assign", 0), ("resume", 0), ("pause", 1), ("assign", 1)]
    assert (held[T1].paused, starter.deferred, held[T0].paused) == (True, [held[T1]], False)
    assert 0 < starter.deferred_wait_s(lambda action: action()) <= DEFERRED_MAX_S
    starter.resume_deferred()
    assert client.calls[-1] == ("resume", 1)
    assert (held[T1].paused, starter.deferred) == (False, [])
    assert starter.deferred_wait_s(lambda action: action()) == float("inf")


def test_a_claim_with_nothing_fetched_ahead_assigns_and_resumes_at_once() -> None:
    """No partition fetched ahead (a callback's or a pin's): nothing is deferred."""
    starter, client, held = _starter()
    starter.hold({T0: None, T1: None}, _rules(T0, T1))
    assert client.paused == []
    assert sorted(client.resumed) == [0, 1]
    assert starter.deferred == []
    assert not held[T1].paused


def test_a_deferred_partition_released_meanwhile_is_not_resumed() -> None:
    """Resuming skips what is no longer held (released, or lost)."""
    starter, client, held = _starter()
    client.highs[1] = 60
    starter.ahead({T0: None, T1: None}, _rules(T0, T1))
    starter.hold({T0: None, T1: None}, _rules(T0, T1))
    del held[T1]
    starter.resume_deferred()
    assert client.resumed == [0]


def test_a_partition_read_ahead_whose_commit_moved_starts_where_it_now_should() -> None:
    """Another member committed meanwhile: the start read ahead is not used, nor unassigned."""
    starter, client, _held = _starter()
    client.highs[1] = 60
    starter.ahead({T0: None, T1: None}, _rules(T0, T1))
    client.committed_offsets[1] = 45
    starts = starter.hold({T0: None, T1: None}, _rules(T0, T1))
    assert starts == {T0: LOW, T1: 45}
    assert client.assigned == [(0, LOW), (1, 45)]
    assert client.unassigned == []


def test_a_share_with_nothing_to_read_is_assigned_whole_ahead() -> None:
    """No backlog anywhere: every partition's fetch waits for its first new message."""
    starter, client, _held = _starter()
    client.committed_offsets.update({0: HIGH, 1: HIGH})
    starter.ahead({T0: None, T1: None}, _rules(T0, T1))
    assert sorted(client.assigned) == [(0, HIGH), (1, HIGH)]


def test_partitions_read_ahead_are_forgotten_when_their_claim_is_over() -> None:
    """Read ahead, then not claimed: a later hold reads them afresh."""
    starter, client, _held = _starter()
    client.highs[1] = 60
    starter.ahead({T0: None, T1: None}, _rules(T0, T1))
    starter.drop_read_ahead()
    client.committed_offsets[1] = 10
    starts = starter.hold({T1: None}, _rules(T0, T1))
    assert starts == {T1: 10}
    assert client.watermark_queries == 4  # read again


def test_only_the_fetch_thread_fetches_ahead_and_only_until_a_batch_waits() -> None:
    """A caller never fetches for unannounced partitions; the fetch thread stops at one run."""
    held = {
        tp: HeldPartition(tp, None, 0, None, announced=False, fetched_ahead=(0, 9))
        for tp in (T0, T1)
    }
    shelf = Shelf(held, 10, 1 << 20, "type")
    assert shelf.may_fetch()
    assert not shelf.may_fetch(for_caller=True)
    held[T1].add_run(_run(1, range(5)), 5, 5, 1000)
    assert not shelf.may_fetch()
    held[T0].announced = True
    assert shelf.may_fetch(for_caller=True)


class _Admin:
    """An AdminClient whose ListOffsets answers the same log as ``_Client``."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    def list_offsets(self, specs: dict[Any, Any], **options: Any) -> dict[Any, Any]:
        """Each partition's log start or end, as a future already answered."""
        self.asked.append(sorted(tp.partition for tp in specs))
        answers = {}
        for tp, spec in specs.items():
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            future.set_result(
                SimpleNamespace(offset=LOW if "Earliest" in type(spec).__name__ else HIGH)
            )
            answers[tp] = future
        return answers


def test_starts_are_asked_through_the_admin_client_once_the_consumer_fetches() -> None:
    """The first hold asks the consumer; a hold while it fetches asks the admin client.

    A broker answers a connection's requests in turn: on the consumer's own connection the
    watermarks would wait behind its fetch (tests/integration/test_register_while_fetching.py).
    """
    starter, client, held = _starter()
    admin = _Admin()
    starter.admin = admin  # type: ignore[assignment]  # a fake admin client
    assert starter.hold({T0: None}, _rules(T0)) == {T0: LOW}
    assert (client.watermark_queries, admin.asked) == (2, [])
    assert starter.hold({T1: None}, _rules(T1)) == {T1: LOW}
    assert (client.watermark_queries, admin.asked) == (2, [[1], [1]])
    assert held[T1].high == HIGH


class _FetchingClient(_Client):
    """``_Client`` whose consume() hands out T0's backlog (10 messages) once."""

    def __init__(self) -> None:
        super().__init__()
        self.highs.update({0: 10, 1: 5})
        self._backlog = _run(0, range(10))
        self._lock = threading.Lock()

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        """What is left of the backlog, up to ``num_messages``."""
        with self._lock:
            taken, self._backlog = self._backlog[:num_messages], self._backlog[num_messages:]
        if not taken:
            time.sleep(min(timeout, 0.005))
        return taken

    def __getattr__(self, name: str) -> Any:  # close, list_topics, ...
        return lambda *args, **kwargs: None


def _claimed_fetcher(monkeypatch: pytest.MonkeyPatch) -> tuple[Fetcher, _FetchingClient]:
    """A Fetcher that fetched T0 ahead and then held T0 and T1 (T1 deferred)."""
    client = _FetchingClient()
    monkeypatch.setattr(_fetch, "fetch_client", lambda *args: client)
    monkeypatch.setattr(_fetch, "commit_client", lambda settings: client)
    monkeypatch.setattr(
        _starts, "read_starts",
        lambda consumer, wanted, timeout, **_: (
            {tp: (LOW, client.highs[tp.partition]) for tp in wanted}, {}
        ),
    )  # fmt: skip
    monkeypatch.setattr(_starts, "read_committed", lambda consumer, partitions, timeout, **_: {})
    made = Fetcher(ClientBalanceSettings(bootstrap_servers="127.0.0.1:9", group_id="g"))
    made.fetch_ahead({T0: None, T1: None}, _rules(T0, T1))
    made.hold({T0: None, T1: None}, _rules(T0, T1))
    made.announce([T0, T1])
    assert client.paused == [1]
    return made, client


def _resumed_within(client: _Client, partition: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while partition not in client.resumed and time.monotonic() < deadline:
        time.sleep(0.001)
    return partition in client.resumed


def test_the_first_batch_out_lets_the_deferred_rest_be_fetched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """get_message's first batch (T0's) resumes T1, well before the deadline."""
    made, client = _claimed_fetcher(monkeypatch)
    try:
        batch = made.take_batch(timeout_s=5.0)
        assert not isinstance(batch, int)
        assert batch.partition == T0
        assert _resumed_within(client, 1, timeout_s=DEFERRED_MAX_S / 2)
    finally:
        made.close(0.0)


def test_the_deferred_rest_is_fetched_after_the_deadline_without_a_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nobody takes a batch: the fetch thread resumes T1 once DEFERRED_MAX_S has passed."""
    made, client = _claimed_fetcher(monkeypatch)
    try:
        assert 1 not in client.resumed
        assert _resumed_within(client, 1, timeout_s=5.0)
    finally:
        made.close(0.0)


def test_a_round_starts_the_partitions_it_can_read_and_leaves_the_others() -> None:
    """One partition with no readable watermarks: the other is held and assigned, it is not."""
    starter, client, held = _starter()
    real = client.offsets_for_times

    def without_t1(partitions: list[Any], timeout: float) -> list[Any]:
        return [tp for tp in real(partitions, timeout) if tp.partition != T1.partition]

    def not_leader(tp: Any, timeout: float) -> tuple[int, int]:
        raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))

    client.offsets_for_times = without_t1  # type: ignore[method-assign]
    client.get_watermark_offsets = not_leader  # type: ignore[attr-defined]
    starts = starter.hold({T0: None, T1: None}, _rules(T0, T1), skip_unreadable=True)
    assert starts == {T0: LOW}
    assert set(held) == {T0}
    assert client.assigned == [(0, LOW)]
