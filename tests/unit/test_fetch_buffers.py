"""The fetcher's buffers: the byte bound, the caller's own batch, the split (no broker)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from itertools import groupby
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message
from hypothesis import given
from hypothesis import strategies as st

from client_balance import ClientBalanceSettings
from client_balance._kafka._clients import fetch_queue_kbytes
from client_balance.consumer import _fetch, _starts
from client_balance.consumer._buffers import ByteBudget, FetchErrors, HeldPartition, split_runs
from client_balance.consumer._fetch import Fetcher
from client_balance.consumer._shelf import Shelf, fetch_size
from client_balance.errors import ClientBalanceError
from client_balance.keys import TopicPartition

KIB = 1024
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _messages(partition: int, offsets: range, size: int) -> list[Any]:
    return [Message(topic="t", partition=partition, offset=o, value=b"x" * size) for o in offsets]


def _shelf(limit: int, batch_max: int = 10) -> tuple[Shelf, dict[TopicPartition, HeldPartition]]:
    held = {tp: HeldPartition(tp, None, 0, None) for tp in (T0, T1)}
    shelf = Shelf(held, batch_max, limit, "type")
    shelf.topics_assigned.add("t")
    return shelf, held


def test_a_fetch_is_always_allowed_with_nothing_buffered() -> None:
    """An empty budget lets a fetch through even when one message is bigger than the bound."""
    budget = ByteBudget(64 * KIB)
    budget.saw(1, 100 * KIB)
    assert budget.has_room()
    assert budget.fetch_count(batch_max=10) == 1
    budget.add(100 * KIB)
    assert not budget.has_room()


def test_each_fetch_asks_for_no_more_than_fits() -> None:
    """consume() is asked for what fits in the bound at the last fetch's message size."""
    budget = ByteBudget(64 * KIB)
    assert budget.fetch_count(batch_max=50) == 50  # no size seen yet
    budget.saw(2, 2000)
    assert budget.fetch_count(batch_max=50) == 50
    budget.add(60_000)
    assert budget.fetch_count(batch_max=50) == 5
    budget.add(5_000)
    assert not budget.has_room()


def test_buffers_stay_within_the_bound_and_fetching_resumes_once_taken() -> None:
    """Once a size is known, fetches stop at the bound; taking batches lets them go on."""
    shelf, _ = _shelf(limit=64 * KIB, batch_max=3)
    first: list[Any] = []  # the first fetch (a caller's) teaches the size
    shelf.share_out(_messages(1, range(1), 10 * KIB), first)
    assert first
    assert shelf.budget.used == 0
    fetched = fetches = 0
    while shelf.may_fetch():
        count = shelf.fetch_count()
        shelf.share_out(_messages(0, range(fetched, fetched + count), 10 * KIB), None)
        fetched += count
        fetches += 1
        assert shelf.budget.used <= 64 * KIB
    assert (fetches, fetched) == (1, 6)  # two batches' worth fit: asked for in one consume()
    assert shelf.budget.peak <= 64 * KIB
    batch = shelf.take()
    assert batch is not None
    assert [m.offset() for m in batch.messages] == list(range(len(batch.messages)))
    assert shelf.may_fetch()


def test_small_batches_are_fetched_several_at_a_time_once_sizes_are_known() -> None:
    """Batches of 10: one batch before any size is known, then ten per consume() (or what fits)."""
    shelf, _ = _shelf(limit=64 * KIB, batch_max=10)
    assert shelf.fetch_count() == 10
    first: list[Any] = []
    shelf.share_out(_messages(0, range(10), 100), first)
    assert shelf.fetch_count() == 100
    big, _ = _shelf(limit=64 * KIB, batch_max=10)
    big.share_out(_messages(0, range(1), 10 * KIB), [])
    assert big.fetch_count() == 6  # the byte bound still rules
    assert (_shelf(limit=64 * KIB, batch_max=100)[0].fetch_count(), fetch_size(100)) == (100, 100)
    assert [fetch_size(b) for b in (1, 7, 10, 99, 100, 5000)] == [100, 105, 100, 198, 100, 5000]


def test_a_caller_fetch_of_several_batches_hands_out_one_and_buffers_the_rest() -> None:
    """A consume() of 25 messages with batches of 10: 10 go out now, then 10 and 5 in order."""
    shelf, held = _shelf(limit=64 * KIB, batch_max=10)
    taken: list[Any] = []
    shelf.share_out(_messages(0, range(25), 100), taken)
    assert [(b.start, b.end, len(b.messages)) for b in taken] == [(0, 10, 10)]
    assert held[T0].buffered == 15
    assert shelf.budget.used == 1500  # only what stays behind counts against the bound
    got = []
    for _ in range(2):
        state = held[T0]
        assert state.batch is not None
        state.confirmed, state.batch = state.batch.end, None  # what the fetcher's settle does
        shelf.ready.append(T0)
        batch = shelf.take()
        assert batch is not None
        got.append([m.offset() for m in batch.messages])
    assert got == [list(range(10, 20)), list(range(20, 25))]
    assert shelf.budget.used == 0


def test_a_caller_fetch_hands_its_first_run_out_and_buffers_the_rest() -> None:
    """The caller's batch skips the buffer; only what stays behind counts against the bound."""
    shelf, held = _shelf(limit=64 * KIB)
    taken: list[Any] = []
    shelf.share_out(_messages(0, range(3), 1000) + _messages(1, range(2), 700), taken)
    assert len(taken) == 1
    assert (taken[0].partition, taken[0].start, taken[0].end) == (T0, 0, 3)
    assert held[T0].buffered == 0
    assert held[T1].buffered == 2
    assert shelf.budget.used == 1400
    shelf.drop(held[T1])
    assert shelf.budget.used == 0


def test_a_batch_taken_across_runs_counts_out_exactly_its_bytes() -> None:
    """Runs cut at the batch size leave the remainder's bytes in the budget."""
    shelf, held = _shelf(limit=64 * KIB, batch_max=4)
    shelf.share_out(_messages(0, range(3), 100), None)
    shelf.share_out(_messages(0, range(3, 6), 200), None)
    batch = shelf.take()
    assert batch is not None
    assert [m.offset() for m in batch.messages] == [0, 1, 2, 3]
    assert shelf.budget.used == held[T0].buffered_bytes == 400


class _Logs:
    """librdkafka as a shelf sees it: two partitions' logs, a fetch position each, pauses."""

    def __init__(self, length: int, size: int) -> None:
        self.length, self.size = length, size
        self.next = {0: 0, 1: 0}
        self.paused: set[int] = set()

    def fetch(self, count: int) -> list[Any]:
        """One consume() of ``count``: a run of each partition not paused, half each."""
        messages: list[Any] = []
        for partition in (0, 1):
            if partition in self.paused:
                continue
            share = count - len(messages) if partition else max(1, count // 2)
            start = self.next[partition]
            end = min(start + share, self.length)
            messages += _messages(partition, range(start, end), self.size)
            self.next[partition] = end
        return messages


def _fetch_into(shelf: Shelf, logs: _Logs) -> None:
    # What the fetcher does when it finds nothing to take: fetch if it may, pause as told.
    assert shelf.may_fetch(for_caller=True), "nothing to hand out, no fetch: all partitions wait"
    messages = logs.fetch(shelf.fetch_count())
    if messages:
        logs.paused.update(tp.partition for tp in shelf.share_out(messages, None))


def _take_all(shelf: Shelf, logs: _Logs, partition: TopicPartition, count: int) -> list[int | None]:
    # Takes and confirms batches until ``count`` messages of ``partition`` came.
    offsets: list[int | None] = []
    for _ in range(10 * count):
        if len(offsets) >= count:
            break
        batch = shelf.take()
        if batch is None:
            _fetch_into(shelf, logs)
            continue
        assert batch.partition == partition
        offsets += [m.offset() for m in batch.messages]
        shelf.settle(shelf._held[partition], consumed=True, until=None)
    return offsets


@pytest.mark.parametrize(
    ("consumed", "until", "goes_on_at"), [(True, None, 10), (False, None, 0), (True, 4, 4)]
)
def test_a_batch_held_out_stalls_no_other_partition_and_its_own_goes_on_where_settled(
    consumed: bool, until: int | None, goes_on_at: int
) -> None:
    """A batch out stalls no other partition; its own goes on from exactly where it settled."""
    # Partition 0's batch out unconfirmed while the budget fills: partition 1 still comes in
    # full, in order; once settled (confirmed, rolled back, confirmed in part), partition 0
    # goes on from exactly its confirmed position, no gap, no duplicate, within the bound.
    shelf, held = _shelf(limit=64 * KIB, batch_max=10)
    logs = _Logs(length=300, size=1000)
    slow: list[Any] = []
    shelf.share_out(_messages(0, range(10), 1000), slow)  # a caller's fetch: the slow batch
    logs.next[0] = 10
    assert [(b.partition, b.start, b.end) for b in slow] == [(T0, 0, 10)]
    assert _take_all(shelf, logs, T1, 300) == list(range(300))
    _, rewind_to = shelf.settle(held[T0], consumed, until)
    if rewind_to is not None:  # what Fetcher._rewind does: fetch it again from there
        shelf.drop(held[T0])
        held[T0].paused = held[T0].rewinding = False
        logs.next[0] = rewind_to
        logs.paused.discard(0)
    assert _take_all(shelf, logs, T0, 300 - goes_on_at) == list(range(goes_on_at, 300))
    assert shelf.budget.peak <= 64 * KIB


def test_no_buffer_is_dropped_while_another_partition_has_a_batch_to_hand_out() -> None:
    """A full budget with a batch to take drains by taking it: nothing is fetched twice."""
    shelf, held = _shelf(limit=64 * KIB, batch_max=10)
    shelf.share_out(_messages(0, range(10), 1000), [])  # partition 0's batch goes out
    shelf.share_out(_messages(0, range(10, 40), 1000) + _messages(1, range(35), 1000), None)
    assert not shelf.may_fetch()
    assert (held[T0].buffered, held[T1].buffered) == (30, 35)
    batch = shelf.take()
    assert batch is not None
    assert batch.partition == T1
    assert held[T0].buffered == 30


def test_with_the_other_partition_idle_a_batch_out_pauses_and_keeps_its_buffer() -> None:
    """Nothing for the idle partition: the slow one is paused, not dropped, and goes on after."""
    shelf, held = _shelf(limit=64 * KIB, batch_max=10)
    shelf.share_out(_messages(0, range(10), 1000), [])  # partition 0's batch goes out
    assert shelf.share_out(_messages(0, range(10, 75), 1000), None) == [T0]
    assert held[T0].paused
    assert shelf.may_fetch(for_caller=True)  # a caller may look for partition 1's messages
    assert not shelf.may_fetch()  # the fetch thread may not
    _, rewind_to = shelf.settle(held[T0], consumed=True, until=None)  # partition 1 had none
    assert rewind_to is None
    assert shelf.drained(held[T0])
    batch = shelf.take()
    assert batch is not None
    assert (batch.partition, batch.start, [m.offset() for m in batch.messages]) == (
        T0, 10, list(range(10, 20))
    )  # fmt: skip


@pytest.mark.parametrize(
    ("partitions", "runs"),
    [
        ([0, 0, 0], [(0, 3)]),
        ([0, 0, 1, 1, 0], [(0, 2), (1, 2), (0, 1)]),
        ([0, 1, 1], [(0, 1), (1, 2)]),
        ([2], [(2, 1)]),
    ],
)
def test_split_runs_cuts_at_every_change_of_partition(
    partitions: list[int], runs: list[tuple[int, int]]
) -> None:
    """Consecutive messages of one partition make one run, however they interleave."""
    messages = [Message(topic="t", partition=p, offset=i) for i, p in enumerate(partitions)]
    assert split_runs(messages, {"t"}) == [(("t", p), n) for p, n in runs]


@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=60))
def test_split_runs_agrees_with_grouping_any_sequence_of_partitions(partitions: list[int]) -> None:
    """For any order of partitions, the runs are exactly the groups of equal neighbours."""
    messages = [Message(topic="t", partition=p, offset=i) for i, p in enumerate(partitions)]
    expected = [(("t", p), len(list(group))) for p, group in groupby(partitions)]
    assert split_runs(messages, {"t"}) == expected


def test_librdkafkas_queue_is_a_quarter_of_the_buffer_bound() -> None:
    """queued.max.messages.kbytes follows max_buffered_bytes, within 1 MiB .. 64 MiB."""
    assert fetch_queue_kbytes(64 * KIB * KIB) == 16 * KIB
    assert fetch_queue_kbytes(64 * KIB) == KIB
    assert fetch_queue_kbytes(64 * KIB**3) == 64 * KIB


class _FakeClient:
    """A confluent-kafka Consumer with a fixed backlog: consume() takes from it."""

    def __init__(self, messages: list[Any]) -> None:
        self._backlog = deque(messages)
        self._lock = threading.Lock()

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        with self._lock:
            count = min(num_messages, len(self._backlog))
            taken = [self._backlog.popleft() for _ in range(count)]
        if not taken:
            time.sleep(min(timeout, 0.01))
        return taken

    def commit(self, offsets: list[Any], asynchronous: bool) -> list[Any]:
        return []

    def __getattr__(self, name: str) -> Any:  # assign, unassign, pause, resume, close
        return lambda *args, **kwargs: None


@pytest.fixture
def fetcher(monkeypatch: pytest.MonkeyPatch) -> Iterator[Fetcher]:
    """A Fetcher on one partition whose first message is bigger than max_buffered_bytes."""
    backlog = _messages(0, range(1), 200 * KIB) + _messages(0, range(1, 31), 10 * KIB)
    monkeypatch.setattr(
        _fetch, "fetch_client", lambda settings, on_error, statistics=None: _FakeClient(backlog)
    )
    monkeypatch.setattr(_fetch, "commit_client", lambda settings: _FakeClient([]))
    monkeypatch.setattr(
        _starts, "read_starts", lambda consumer, wanted, timeout, **_: ({T0: (0, 31)}, {})
    )
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", max_buffered_bytes=64 * KIB,
        batch_max_messages=4,
    )  # fmt: skip
    made = Fetcher(settings)
    made.hold({T0: None}, lambda partition, committed, low, high: (0, _starts.StartCommit.NONE))
    made.announce([T0])
    yield made
    made.close(0.0)


def test_a_message_bigger_than_the_bound_is_delivered_and_the_rest_follows(
    fetcher: Fetcher,
) -> None:
    """No deadlock: the oversized message comes out, then every other one, in order, once."""
    offsets: list[int] = []
    while len(offsets) < 31:
        batch = fetcher.take_batch(timeout_s=10.0)
        assert not isinstance(batch, int), f"no batch: {batch}"
        offsets += [m.offset() or 0 for m in batch.messages]
        assert fetcher.settle(batch.partition, batch.token, consumed=True) is not None
    assert offsets == list(range(31))
    assert fetcher.shelf.budget.used == 0


def test_a_rounds_metadata_names_its_one_topic_and_several_ask_for_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One topic is asked alone (a round's cost does not grow with the cluster's topics)."""
    asked: list[str | None] = []

    class Client(_FakeClient):
        def list_topics(self, topic: str | None = None, timeout: float = -1) -> str:
            asked.append(topic)
            return "metadata"

    monkeypatch.setattr(_fetch, "fetch_client", lambda *args: Client([]))
    monkeypatch.setattr(_fetch, "commit_client", lambda settings: Client([]))
    made = Fetcher(ClientBalanceSettings(bootstrap_servers="127.0.0.1:9", group_id="g"))
    try:
        assert made.metadata(["orders"]) == "metadata"
        assert made.metadata(["orders", "refunds"]) == "metadata"
    finally:
        made.close(0.0)
    assert asked == ["orders", None]


def test_the_fetch_thread_stays_out_while_a_caller_takes_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once a caller takes batches, only its thread calls consume(), even with data buffered.

    The fetch thread had gone on fetching while the caller took what it buffered (so the
    caller never fetched): every batch passed between threads, and batch 5,000 ran at 0.94 of
    the raw consumer.
    """
    fetched_by: list[str] = []
    arrived = threading.Condition()
    backlog: deque[Any] = deque()

    class Client(_FakeClient):
        """librdkafka's consume(): waits for ``num_messages`` or the timeout."""

        def consume(self, num_messages: int, timeout: float) -> list[Any]:
            with arrived:
                arrived.wait_for(lambda: len(backlog) >= num_messages, timeout)
                taken = [backlog.popleft() for _ in range(min(num_messages, len(backlog)))]
            if taken:
                fetched_by.append(threading.current_thread().name)
            return taken

    def feed() -> None:  # messages arrive from the broker a few at a time
        for start in range(0, 20_000, 50):
            with arrived:
                backlog.extend(_messages(0, range(start, start + 50), 10))
                arrived.notify_all()
            time.sleep(0.0005)

    monkeypatch.setattr(_fetch, "fetch_client", lambda *args: Client([]))
    monkeypatch.setattr(_fetch, "commit_client", lambda settings: Client([]))
    monkeypatch.setattr(
        _starts, "read_starts", lambda consumer, wanted, timeout, **_: ({T0: (0, 20_000)}, {})
    )
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", batch_max_messages=100
    )
    made = Fetcher(settings)
    feeder = threading.Thread(target=feed)
    try:
        made.hold({T0: None}, lambda partition, committed, low, high: (0, _starts.StartCommit.NONE))
        made.announce([T0])
        feeder.start()
        time.sleep(0.05)  # the fetch thread fetches before anyone asks
        offsets: list[int] = []
        asked_by_then: int | None = None
        while len(offsets) < 20_000:
            batch = made.take_batch(timeout_s=10.0)
            assert not isinstance(batch, int), f"no batch: {batch}"
            offsets += [m.offset() or 0 for m in batch.messages]
            made.settle(batch.partition, batch.token, consumed=True)
            if asked_by_then is None and len(offsets) >= 500:
                asked_by_then = len(fetched_by)
    finally:
        feeder.join()
        made.close(0.0)
    assert offsets == list(range(20_000))
    assert asked_by_then is not None
    assert set(fetched_by[asked_by_then + 1 :]) == {"MainThread"}


def test_a_caller_takes_what_is_queued_without_waiting_for_a_full_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Five messages queued, batches of 100: the caller gets them at once, as poll() would.

    librdkafka's consume() waits for a full batch or its timeout: the first message of a
    sparse topic waited the caller's whole wait for messages that were already there.
    """
    caller = threading.current_thread()
    asked: list[float] = []

    class Client(_FakeClient):
        def consume(self, num_messages: int, timeout: float) -> list[Any]:
            if threading.current_thread() is not caller:  # the fetch thread gets nothing
                time.sleep(min(timeout, 0.01))
                return []
            asked.append(timeout)
            if timeout > 0:  # as librdkafka: a full batch, or the whole timeout
                time.sleep(timeout)
            return super().consume(num_messages, 0)

    monkeypatch.setattr(_fetch, "fetch_client", lambda *args: Client(_messages(0, range(5), 10)))
    monkeypatch.setattr(_fetch, "commit_client", lambda settings: Client([]))
    monkeypatch.setattr(
        _starts, "read_starts", lambda consumer, wanted, timeout, **_: ({T0: (0, 5)}, {})
    )
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", batch_max_messages=100
    )
    made = Fetcher(settings)
    try:
        made.hold({T0: None}, lambda partition, committed, low, high: (0, _starts.StartCommit.NONE))
        made.announce([T0])
        batch = made.take_batch(timeout_s=5.0)
    finally:
        made.close(0.0)
    assert not isinstance(batch, int)
    assert [m.offset() for m in batch.messages] == list(range(5))
    assert asked == [0]


def test_a_fetch_past_a_full_budget_that_is_not_stuck_drops_no_buffer() -> None:
    """A fetch made to serve a queued call, with another partition's batch ready: nothing evicted.

    The fetch thread fetches whenever a call is queued; its fetch past a full budget dropped
    every buffer of a batch out though nothing was stuck, to be fetched again later (the
    review of this session's diff).
    """
    shelf, held = _shelf(limit=64 * KIB, batch_max=10)
    shelf.share_out(_messages(0, range(10), 1000), [])  # partition 0's batch goes out
    shelf.share_out(_messages(0, range(10, 40), 1000) + _messages(1, range(35), 1000), None)
    assert not shelf.stuck()  # partition 1 has batches to hand out
    shelf.share_out(_messages(1, range(35, 40), 1000), None)
    assert not held[T0].evicted
    assert held[T0].buffered == 30


def test_a_refused_fetch_is_handed_on_once_a_minute_and_a_passing_error_never() -> None:
    """TOPIC_AUTHORIZATION_FAILED goes to ``refused``, naming the topic; a transport error not."""
    now = [0.0]
    refused: list[ClientBalanceError] = []
    errors = FetchErrors(clock=lambda: now[0], refused=refused.append)
    denied = Message(topic="t", partition=0, error=KafkaError(29, "Topic authorization failed"))
    down = Message(topic="t", partition=1, error=KafkaError(-195, "Connection refused"))
    kept, _ = errors.drop([denied, *_messages(0, range(2), 1), denied])
    assert len(kept) == 2
    assert [str(error) for error in refused] == [
        "fetching failed: TOPIC_AUTHORIZATION_FAILED: Topic authorization failed. Not authorized: "
        "this client's principal lacks the ACL Read on topic 't'; grant it (docs/security.md "
        "lists the ACLs of each role)"
    ]
    now[0] = 30.0  # another error taking turns with it makes it no newer
    for _ in range(3):
        errors.drop([down])
        errors.drop([denied])
    assert len(refused) == 1
    other = Message(topic="u", partition=0, error=KafkaError(29, "Topic authorization failed"))
    errors.drop([other])  # another topic, worded alike: named at once
    assert "Read on topic 'u'" in str(refused[-1])
    now[0] = 61.0
    errors.drop([down, denied])
    assert len(refused) == 3


def test_a_truncated_partitions_messages_in_the_same_fetch_are_left_out() -> None:
    """The old leader's messages ahead of the truncation event are dropped; others are kept.

    They were handed out, and the same offsets came again from the new leader: a duplicate,
    and a confirmed position that went back (the review of 2026-11-29, third round).
    """
    reset = Message(topic="t", partition=0, error=KafkaError(KafkaError._AUTO_OFFSET_RESET))
    other = _messages(1, range(3, 5), 1)
    kept, out_of_range = FetchErrors().drop([*_messages(0, range(10, 12), 1), *other, reset])
    assert kept == other
    assert out_of_range == [("t", 0, None)]
