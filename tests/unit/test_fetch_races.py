"""The fetcher where its threads meet: a rollback against a release, a caller against the lease."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from client_balance import ClientBalanceSettings
from client_balance._metrics import NO_METRICS
from client_balance.consumer import _commits, _fetch, _starts
from client_balance.consumer._buffers import Batch, HeldPartition
from client_balance.consumer._fetch import Fetcher
from client_balance.consumer._hooks import PartitionHooks
from client_balance.consumer._keeper import PartitionKeeper
from client_balance.consumer._launch import Running
from client_balance.consumer._redelivery import Redeliveries
from client_balance.errors import NoMessageError
from client_balance.keys import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _meta(**more: Any) -> SimpleNamespace:
    """A partition meta cache whose keys are the partitions' names; ``more``: its other parts."""
    return SimpleNamespace(key=str, holding_key=str, hold_keys=list, drop_keys=list, **more)


class _Client:
    """A Consumer of 50 messages of 2 KiB on t:0, behaving as librdkafka does where it counts.

    It waits out its timeout when it has nothing, refuses to unassign what is not assigned,
    and records every assignment with its offset.
    """

    def __init__(self) -> None:
        self.assigned: dict[int, int] = {}
        self.assigns: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self._next = 0

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        with self._lock:
            first = self._next
            if 0 in self.assigned:
                self._next = min(50, self._next + num_messages)
            offsets = range(first, self._next)
        if not offsets:
            time.sleep(min(timeout, 0.05))
        return [Message(topic="t", partition=0, offset=o, value=b"x" * 2048) for o in offsets]

    def incremental_assign(self, partitions: list[Any]) -> None:
        with self._lock:
            for tp in partitions:
                self.assigned[tp.partition] = tp.offset
                self.assigns.append((tp.partition, tp.offset))
                self._next = max(tp.offset, 0)

    def incremental_unassign(self, partitions: list[Any]) -> None:
        with self._lock:
            for tp in partitions:
                if tp.partition not in self.assigned:
                    raise KafkaException(
                        KafkaError(KafkaError._INVALID_ARG, "Can't subtract from empty assignment")
                    )
                del self.assigned[tp.partition]

    def commit(self, offsets: list[Any], asynchronous: bool) -> list[Any]:
        return offsets

    def __getattr__(self, name: str) -> Any:  # pause, resume, close, committed ...
        return lambda *args, **kwargs: None


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> _Client:
    """The fake client every Fetcher of the test gets."""
    made = _Client()
    monkeypatch.setattr(_fetch, "fetch_client", lambda *args, **kwargs: made)
    monkeypatch.setattr(_fetch, "commit_client", lambda settings: made)
    monkeypatch.setattr(
        _starts, "read_starts", lambda consumer, wanted, timeout, **_: ({T0: (0, 50)}, {})
    )
    return made


@pytest.fixture
def fetcher(client: _Client) -> Iterator[Fetcher]:
    """A Fetcher holding t:0 from offset 0, batches of 10, 64 KiB of buffers (32 messages)."""
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", batch_max_messages=10,
        max_buffered_bytes=64 * 1024,
    )  # fmt: skip
    made = Fetcher(settings)
    _hold(made)
    yield made
    made.close(0.0)


def _hold(fetcher: Fetcher, start: int = 0) -> None:
    fetcher.hold({T0: None}, lambda *_: (start, _starts.StartCommit.NONE))
    fetcher.announce([T0])


def _rewinds_after(fetcher: Fetcher, meanwhile: Callable[[], None]) -> None:
    """Make the next client call of this thread (a rollback's rewind) wait for ``meanwhile``."""
    gate, call = fetcher._gate, fetcher._gate.call
    rolling_back = threading.current_thread()

    def late_call(action: Callable[[], Any]) -> Any:
        if threading.current_thread() is rolling_back:
            gate.call = call  # type: ignore[method-assign]
            meanwhile()
        return call(action)

    gate.call = late_call  # type: ignore[method-assign]


def _commits_after(fetcher: Fetcher, meanwhile: Callable[[], None]) -> None:
    """Make the next commit asked for wait for ``meanwhile`` before it is queued."""
    sender = fetcher.commits._sender
    queue = sender.queue

    def late_queue(*args: Any, **kwargs: Any) -> Any:
        sender.queue = queue  # type: ignore[method-assign]
        meanwhile()
        return queue(*args, **kwargs)

    sender.queue = late_queue  # type: ignore[method-assign]


def _release_in_thread(fetcher: Fetcher) -> threading.Thread:
    """release([T0]) in a thread of its own: it waits in quiesce for the batch out."""
    releasing = threading.Thread(target=fetcher.release, args=([T0], 10.0))
    releasing.start()
    return releasing


def test_a_rollback_whose_partition_was_released_meanwhile_settles_quietly(
    fetcher: Fetcher, client: _Client
) -> None:
    """The rewind of a partition released since the rollback leaves the client alone."""
    batch = fetcher.take_batch(timeout_s=5.0)
    assert not isinstance(batch, int)
    releasing = _release_in_thread(fetcher)
    _rewinds_after(fetcher, lambda: releasing.join(10.0))
    settled = fetcher.settle(batch.partition, batch.token, consumed=False)
    assert settled is not None
    assert settled.position == 0
    assert fetcher.held() == set()
    assert client.assigned == {}


def test_a_rollback_does_not_move_back_a_partition_held_again_meanwhile(
    fetcher: Fetcher, client: _Client
) -> None:
    """Held again from 10 and fetched before the rewind: nothing comes twice, nothing is lost."""
    first = fetcher.take_batch(timeout_s=5.0)
    assert not isinstance(first, int)
    fetcher.settle(first.partition, first.token, consumed=True)
    batch = fetcher.take_batch(timeout_s=5.0)
    assert not isinstance(batch, int)
    assert (batch.start, batch.end) == (10, 20)
    releasing = _release_in_thread(fetcher)

    def release_and_hold_again() -> None:
        releasing.join(10.0)
        _hold(fetcher, start=10)
        deadline = time.monotonic() + 10.0
        while not fetcher.shelf.ready:  # the new hold has fetched what follows 10
            assert time.monotonic() < deadline, "nothing fetched after the new hold"
            time.sleep(0.01)

    _rewinds_after(fetcher, release_and_hold_again)
    fetcher.settle(batch.partition, batch.token, consumed=False)
    assert client.assigns[-1] == (0, 10)
    assert client.assigned == {0: 10}
    offsets: list[int] = []
    while len(offsets) < 40:
        again = fetcher.take_batch(timeout_s=5.0)
        assert not isinstance(again, int), f"no batch: {again}"
        assert again.start <= again.end
        offsets += [m.offset() or 0 for m in again.messages]
        fetcher.settle(again.partition, again.token, consumed=True)
    assert offsets == list(range(10, 50))


def test_no_batch_says_why_of_the_held_partitions_only(client: _Client) -> None:
    """406 and 408 hold while a partition is fetched ahead of its claim or being released."""
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", batch_max_messages=10
    )
    fetcher = Fetcher(settings)
    try:
        with fetcher._lock:  # what fetch_ahead leaves: a partition being read, not held
            fetcher._held[T1] = HeldPartition(
                T1, None, 0, None, announced=False, fetched_ahead=(0, 50)
            )
        assert fetcher.take_batch(timeout_s=0.0) == 406  # nothing held: 407 before
        _hold(fetcher)
        batch = fetcher.take_batch(timeout_s=5.0)
        assert not isinstance(batch, int)
        assert fetcher.take_batch(timeout_s=0.0) == 408  # the one held has its batch out
        with fetcher._lock:
            del fetcher._held[T1]
            fetcher._held[T1] = HeldPartition(T1, None, 0, None, releasing=True)
        assert fetcher.take_batch(timeout_s=0.0) == 408  # the other one is on its way out
    finally:
        fetcher.close(0.0)


def test_a_caller_waits_instead_of_spinning_while_the_lease_is_in_doubt(
    fetcher: Fetcher,
) -> None:
    """Buffers full, lease in doubt: take_batch sleeps between looks, then says 407."""
    first = fetcher.take_batch(timeout_s=5.0)
    assert not isinstance(first, int)
    fetcher.settle(first.partition, first.token, consumed=True)
    fetcher.shelf.lease_ok = lambda: False
    deadline = time.monotonic() + 10.0
    while fetcher.shelf.budget.has_room():  # the fetch thread fills the buffers
        assert time.monotonic() < deadline, "the buffers did not fill"
        time.sleep(0.01)
    looks = 0
    take = fetcher.shelf.take

    def counted_take() -> Any:
        nonlocal looks
        looks += 1
        return take()

    fetcher.shelf.take = counted_take  # type: ignore[method-assign]
    try:
        assert fetcher.take_batch(timeout_s=0.5) == 407
    finally:
        fetcher.shelf.lease_ok = lambda: True  # renewed: the teardown's release may commit
    # A wait is 50 ms at most: some ten looks in 0.5 s. Spinning made hundreds of thousands.
    assert looks < 100


def test_a_batch_set_aside_leaves_the_wait_only_what_is_left_of_timeout_s() -> None:
    """redelivery_policy="skip": get_message(timeout_s) is one deadline, not one per batch."""
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", max_redeliveries=0,
        redelivery_policy="skip",
    )  # fmt: skip
    redeliveries = Redeliveries(settings)
    redeliveries.rolled_back(T0, 0, 5, "t:0")  # once already: over the limit, skipped
    messages = [Message(topic="t", partition=0, offset=o, value=b"x") for o in range(5)]
    waits: list[float] = []

    def take_batch(timeout_s: float) -> Batch | int:
        waits.append(timeout_s)
        if len(waits) > 1:
            return 407
        time.sleep(0.2)  # the batch to skip comes late in the wait
        return Batch(T0, 1, 0, 5, messages, None)

    fetcher = SimpleNamespace(
        take_batch=take_batch, settle=lambda *_a, **_k: None,
        failures=SimpleNamespace(raise_once=lambda: None),
    )  # fmt: skip
    run = Running(
        cast(Any, None), cast(Any, fetcher), cast(Any, _meta()), cast(Any, None),
        cast(Any, None), redeliveries, NO_METRICS, cast(Any, None),
    )  # fmt: skip
    with pytest.raises(NoMessageError) as raised:
        run.next_batch(0.5)
    assert raised.value.code == 407
    assert 0.4 < waits[0] <= 0.5
    assert waits[1] <= 0.3  # a fresh 0.5 s before


def test_a_skip_stops_at_the_end_of_the_shortest_batch_rolled_back() -> None:
    """Rolled back as 0..1 and 0..5: past the limit, only 0..1 is skipped."""
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", max_redeliveries=1,
        redelivery_policy="skip",
    )  # fmt: skip
    redeliveries = Redeliveries(settings)
    redeliveries.rolled_back(T0, 0, 1, "1:t:0")
    assert redeliveries.skip_until(T0, 0) is None
    redeliveries.rolled_back(T0, 0, 5, "1:t:0")
    assert redeliveries.skip_until(T0, 0) == 1
    assert redeliveries.skip_until(T0, 1) is None
    redeliveries.rolled_back(T0, 3, 9, "1:t:0")  # another offset: counted from one again
    assert redeliveries.skip_until(T0, 3) is None


def test_rollbacks_counted_before_a_release_do_not_count_once_it_is_held_again(
    client: _Client,
) -> None:
    """Released and held again from the same offset: its first rollback is a first, not a second.

    The count outlived the release: after a topic re-created, a fence or a connect(), healthy
    data at an old offset was skipped after one rollback (the review of 2026-11-29).
    """
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", batch_max_messages=10,
        max_redeliveries=1, redelivery_policy="skip",
    )  # fmt: skip
    fetcher = Fetcher(settings)
    key = lambda tp: f"1:{tp.topic}:{tp.partition}"  # noqa: E731 - the fake's one method
    meta = SimpleNamespace(key=key, holding_key=key, hold_keys=list, drop_keys=list)
    run = Running(
        cast(Any, None), fetcher, cast(Any, meta), cast(Any, None), cast(Any, None),
        Redeliveries(settings), NO_METRICS, cast(Any, None),
    )  # fmt: skip
    try:
        _hold(fetcher)
        first = run.next_batch(5.0)
        run.confirm(first.confirm_context, T0, _token(first), consumed=False)  # one, at 0
        fetcher.release([T0], 0.0, commit=False)
        _hold(fetcher)  # held again from 0
        again = run.next_batch(5.0)
        run.confirm(again.confirm_context, T0, _token(again), consumed=False)  # its first
        assert run.next_batch(5.0).start_offset == 0  # delivered, not skipped
    finally:
        fetcher.close(0.0)


def _token(result: Any) -> int:
    return int(result.confirm_context.rsplit(":", 1)[1])


def test_a_sync_confirm_does_not_commit_a_partition_released_without_commit_meanwhile(
    client: _Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """commit="sync": a release(commit=False) before the confirm's commit leaves Kafka alone."""
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", batch_max_messages=10, commit="sync",
    )  # fmt: skip
    fetcher = Fetcher(settings)
    committed: list[list[int]] = []

    def commit(offsets: list[Any], asynchronous: bool) -> list[Any]:
        committed.append([tp.offset for tp in offsets])
        return offsets

    monkeypatch.setattr(client, "commit", commit)
    try:
        _hold(fetcher)
        batch = fetcher.take_batch(timeout_s=5.0)
        assert not isinstance(batch, int)
        _commits_after(fetcher, lambda: fetcher.release([T0], 0.0, commit=False))
        settled = fetcher.settle(batch.partition, batch.token, consumed=True)
        assert settled is not None
        assert not settled.committed
        assert committed == []
        assert fetcher.held() == set()
    finally:
        fetcher.close(0.0)


def test_commit_sync_also_recommits_an_unchanged_position_when_the_hour_is_up(
    client: _Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """commit="sync": the fetch thread's hourly pass commits a position committed already."""
    monkeypatch.setattr(_commits, "_RECOMMIT_EVERY_S", 0.0)  # the hour is up at every pass
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", batch_max_messages=10, commit="sync",
        commit_interval_s=0.01,
    )  # fmt: skip
    committed: list[list[int]] = []

    def commit(offsets: list[Any], asynchronous: bool) -> list[Any]:
        committed.append([tp.offset for tp in offsets])
        return offsets

    monkeypatch.setattr(client, "commit", commit)
    fetcher = Fetcher(settings)
    try:
        _hold(fetcher)
        batch = fetcher.take_batch(timeout_s=5.0)
        assert not isinstance(batch, int)
        settled = fetcher.settle(batch.partition, batch.token, consumed=True)
        assert settled is not None
        assert settled.committed
        made = len(committed)
        deadline = time.monotonic() + 10.0
        while len(committed) < made + 2:  # no confirm since: only the hourly pass commits
            assert time.monotonic() < deadline, "no re-commit of the unchanged position"
            time.sleep(0.01)
        assert committed[-1] == [10]
    finally:
        fetcher.close(0.0)


def test_commit_interval_confirm_says_committed_only_of_a_position_committed_already(
    client: _Client,
) -> None:
    """commit="interval": a confirm moving on says False, a rollback to a committed start True."""
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", batch_max_messages=10,
        commit="interval", commit_interval_s=3600.0,
    )  # fmt: skip
    fetcher = Fetcher(settings)
    try:
        _hold(fetcher)
        fetcher.flush()  # the start, 0, is committed
        seen = []
        for consumed in (False, True, False):
            batch = fetcher.take_batch(timeout_s=5.0)
            assert not isinstance(batch, int)
            settled = fetcher.settle(batch.partition, batch.token, consumed)
            assert settled is not None
            seen.append((settled.position, settled.committed))
        assert seen == [(0, True), (10, False), (10, False)]
        fetcher.flush()
        batch = fetcher.take_batch(timeout_s=5.0)
        assert not isinstance(batch, int)
        settled = fetcher.settle(batch.partition, batch.token, consumed=False)
        assert settled is not None
        assert (settled.position, settled.committed) == (10, True)
    finally:
        fetcher.close(0.0)


def test_the_fence_lets_go_without_waiting_for_a_commit_stuck_on_the_client(
    fetcher: Fetcher, client: _Client
) -> None:
    """lose_all() returns while a commit to an unreachable coordinator holds the client lock."""
    member = SimpleNamespace(settings=SimpleNamespace(refused_connect_wait_s=1.0), consumer_id="me")
    keeper = PartitionKeeper(
        cast(Any, member), fetcher, cast(Any, _meta()), PartitionHooks("me"),
        cast(Any, SimpleNamespace(pinned_keys=tuple)),
    )  # fmt: skip
    in_commit, answer = threading.Event(), threading.Event()

    def stuck_commit() -> None:
        in_commit.set()
        answer.wait(30)

    committing = threading.Thread(target=fetcher._gate.call, args=(stuck_commit,))
    committing.start()
    assert in_commit.wait(5)
    fenced = threading.Thread(target=keeper.lose_all)
    fenced.start()
    fenced.join(10)
    try:
        assert not fenced.is_alive()  # it waited for the commit's answer before the fix
        assert fetcher.held() == set()
    finally:
        answer.set()
        committing.join(5)
    wait_until = time.monotonic() + 5
    while 0 in client.assigned and time.monotonic() < wait_until:
        time.sleep(0.01)
    assert 0 not in client.assigned  # the client let go once the lock was free
