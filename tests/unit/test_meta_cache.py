"""The partition meta set: prefetched at start(); the fetching client warmed only on change."""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, cast

from client_balance._kafka import AdminClient, TopicIdsAnswer
from client_balance.consumer._meta import MetaCache
from client_balance.keys import TopicPartition
from client_balance.settings import ClientBalanceSettings


def _metadata(partitions: int) -> Any:
    found = SimpleNamespace(
        error=None, partitions={n: SimpleNamespace(error=None, leader=1) for n in range(partitions)}
    )
    return SimpleNamespace(topics={"orders": found})


def test_the_first_refresh_after_a_prefetch_takes_the_prefetched_set() -> None:
    """start() fills the set while joining; the first round asks nothing again, the next does."""
    asked: list[str] = []

    def query() -> Any:
        asked.append("asked")
        return _metadata(len(asked) + 1)

    meta = MetaCache({"orders": None}, query, _Ids([0.0]), lambda partitions: {})
    meta.prefetch()
    meta.refresh(max_age_s=0.0)
    assert asked == ["asked"]
    assert set(meta.snapshot()) == {TopicPartition("orders", 0), TopicPartition("orders", 1)}
    meta.refresh(max_age_s=0.0)
    assert asked == ["asked", "asked"]
    assert len(meta.snapshot()) == 3


class _Admin:
    """An admin client that answers metadata for one topic: ``leaders`` per partition."""

    def __init__(self, leaders: list[int]) -> None:
        self.leaders = leaders

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        found = SimpleNamespace(
            error=None,
            partitions={
                n: SimpleNamespace(error=None, leader=leader)
                for n, leader in enumerate(self.leaders)
            },
        )
        return SimpleNamespace(topics={"orders": found})


def test_the_fetching_client_is_asked_only_when_partitions_or_leaders_change() -> None:
    """Rounds ask the admin client; the fetching client (behind its long poll) only on change."""
    fetching: list[Sequence[str]] = []
    admin = _Admin([1, 1])
    settings = ClientBalanceSettings(bootstrap_servers="127.0.0.1:9", group_id="orders-app")
    meta = MetaCache.of(settings, {"orders": None}, fetching.append, cast(AdminClient, admin))
    meta.prefetch()
    for _ in range(3):
        meta.refresh(max_age_s=0.0)
    assert fetching == []
    admin.leaders = [1, 1, 2]  # a partition added: the fetching client must learn of it
    meta.refresh(max_age_s=0.0)
    assert fetching == [["orders"]]
    assert len(meta.snapshot()) == 3
    admin.leaders = [2, 1, 2]  # a leader moved
    meta.refresh(max_age_s=0.0)
    meta.refresh(max_age_s=0.0)
    assert fetching == [["orders"], ["orders"]]


class _Cluster:
    """An admin client on a cluster of ``orders``, ``payments`` and topics of others."""

    def __init__(self) -> None:
        self.asked: list[str | None] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.asked.append(topic)
        names = ["orders", "payments", "others-1", "others-2"] if topic is None else [topic]
        found = SimpleNamespace(error=None, partitions={0: SimpleNamespace(error=None, leader=1)})
        return SimpleNamespace(topics=dict.fromkeys(names, found))


def test_a_member_of_several_topics_asks_for_them_alone() -> None:
    """Each topic is asked on its own: never every topic of a shared cluster, every round."""
    admin = _Cluster()
    settings = ClientBalanceSettings(bootstrap_servers="127.0.0.1:9", group_id="orders-app")
    topics = {"payments": None, "orders": None}
    meta = MetaCache.of(settings, topics, lambda names: None, cast(AdminClient, admin))
    meta.refresh(max_age_s=0.0)
    assert admin.asked == ["orders", "payments"]
    assert sorted(meta.snapshot()) == [TopicPartition("orders", 0), TopicPartition("payments", 0)]


class _Ids:
    """Topic ids described through real futures, answered when the test says, on a fake clock.

    Called the old way (no clock), it answers at once, after advancing the clock by ``took_s``:
    a round that waits for the description spends that time.
    """

    def __init__(self, clock: list[float], took_s: float = 0.0) -> None:
        self.clock, self.took_s, self.asked = clock, took_s, 0
        self.futures: list[Future[Any]] = []

    def __call__(self, topics: object, clock: Callable[[], float] | None = None) -> Any:
        self.asked += 1
        if clock is None:  # the check before it was asynchronous
            self.clock[0] += self.took_s
            return {"orders": "id-1"}
        future: Future[Any] = Future()
        self.futures.append(future)
        return TopicIdsAnswer({"orders": future}, clock)

    def answer(self, topic_id: str, after_s: float = 0.0) -> None:
        self.clock[0] += after_s
        self.futures[-1].set_result(SimpleNamespace(topic_id=topic_id))


def _meta_with(ids: _Ids, now: list[float]) -> MetaCache:
    return MetaCache(
        {"orders": None}, lambda: None, ids, lambda partitions: {}, clock=lambda: now[0],
        ids_timeout_s=10.0,
    )  # fmt: skip


def test_a_round_never_waits_for_the_topic_id_answer() -> None:
    """Seen at 100,000 partitions: the round waited 10 s for it; now a later round reads it."""
    now = [0.0]
    ids = _Ids(now, took_s=12.0)
    meta = _meta_with(ids, now)
    assert meta.recreated_topics() == set()
    assert (ids.asked, now[0]) == (1, 0.0)  # asked, and no time spent waiting
    assert meta.recreated_topics() == set()  # not answered yet: nothing to compare
    ids.answer("id-1", after_s=1.0)
    assert meta.recreated_topics() == set()  # the first answer only records the ids
    now[0] += 9.0
    assert meta.recreated_topics() == set()
    assert ids.asked == 2
    ids.answer("id-2", after_s=0.5)  # deleted and created again meanwhile
    assert meta.recreated_topics() == {"orders"}


def test_the_topic_id_check_takes_at_most_a_tenth_of_the_time() -> None:
    """A check answered in 2 s is not made again for 18 s (100,000 partitions take seconds)."""
    now = [0.0]
    ids = _Ids(now)
    meta = _meta_with(ids, now)
    meta.recreated_topics()
    ids.answer("id-1", after_s=2.0)
    now[0] += 17.0
    assert meta.recreated_topics() == set()
    assert ids.asked == 1
    now[0] += 1.0
    meta.recreated_topics()
    assert ids.asked == 2


def test_a_topic_id_check_that_gets_no_answer_is_asked_again_later() -> None:
    """No answer within the timeout: logged, and asked again after nine times that."""
    now = [0.0]
    ids = _Ids(now)
    meta = _meta_with(ids, now)
    meta.recreated_topics()
    now[0] += 10.0
    assert meta.recreated_topics() == set()  # given up
    now[0] += 89.0
    meta.recreated_topics()
    assert ids.asked == 1
    now[0] += 1.0
    meta.recreated_topics()
    assert ids.asked == 2


def test_a_refresh_that_finds_nothing_moved_keeps_the_set_as_it_is() -> None:
    """Same partitions and leaders: the very same entries, not a set built again."""
    admin = _Admin([1, 2])
    settings = ClientBalanceSettings(bootstrap_servers="127.0.0.1:9", group_id="orders-app")
    meta = MetaCache.of(settings, {"orders": None}, lambda topics: None, cast(AdminClient, admin))
    meta.refresh(max_age_s=0.0)
    before = meta.snapshot()
    meta.refresh(max_age_s=0.0)
    after = meta.snapshot()
    assert after == before
    assert all(after[tp] is before[tp] for tp in before)
    admin.leaders = [2, 2]
    meta.refresh(max_age_s=0.0)
    assert meta.snapshot()[TopicPartition("orders", 0)].leader == 2


def test_a_large_refresh_pauses_the_collector_and_resumes_it() -> None:
    """From 1,000 partitions the query runs with no cyclic collection; it runs again after."""
    running: list[bool] = []

    def query() -> Any:
        running.append(gc.isenabled())
        return _metadata(1_000)

    meta = MetaCache({"orders": None}, query, _Ids([0.0]), lambda partitions: {})
    assert gc.isenabled()
    meta.refresh(max_age_s=0.0)  # the set was empty: nothing to pause for yet
    meta.refresh(max_age_s=0.0)
    assert running == [True, False]
    assert gc.isenabled()


def test_a_collector_the_application_turned_off_stays_off() -> None:
    """The pause resumes only a collector that was running."""
    meta = MetaCache({"orders": None}, lambda: _metadata(1_000), _Ids([0.0]), lambda p: {})
    meta.refresh(max_age_s=0.0)
    gc.disable()
    try:
        meta.refresh(max_age_s=0.0)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_one_answer_without_a_topic_keeps_its_partitions_until_the_next_says_so_too() -> None:
    """A metadata answer that lacks a known topic (a broker lagging) is not taken at its word.

    One such answer emptied the topic's set: the round released every partition of it
    (on_revoked, commits, claims withdrawn) to take them back a round later (the review of
    2026-11-29, later). Two answers in a row are believed: the topic is gone.
    """
    missing = SimpleNamespace(topics={"orders": SimpleNamespace(error="UNKNOWN", partitions={})})
    answers = [_metadata(2), missing, _metadata(2), missing, missing]
    meta = MetaCache({"orders": None}, lambda: answers.pop(0), _Ids([0.0]), lambda ps: {})
    both = {TopicPartition("orders", 0), TopicPartition("orders", 1)}
    meta.refresh(max_age_s=0.0)
    assert set(meta.snapshot()) == both
    meta.refresh(max_age_s=0.0)
    assert set(meta.snapshot()) == both  # one answer: asked again next round
    meta.refresh(max_age_s=0.0)
    assert set(meta.snapshot()) == both
    meta.refresh(max_age_s=0.0)
    meta.refresh(max_age_s=0.0)
    assert meta.snapshot() == {}  # said twice in a row: gone
