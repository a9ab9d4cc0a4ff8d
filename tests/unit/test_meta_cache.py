"""The partition meta set: prefetched at start(); the fetching client warmed only on change."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, cast

from client_balance._kafka import AdminClient
from client_balance.consumer._meta import MetaCache
from client_balance.errors import KafkaClientError
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

    meta = MetaCache({"orders": None}, query, lambda topics: {}, lambda partitions: {})
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


class _SlowIds:
    """Topic ids that take ``took_s`` of a fake clock to describe, or fail with a timeout."""

    def __init__(self, clock: list[float], took_s: float) -> None:
        self.clock, self.took_s, self.asked, self.fail = clock, took_s, 0, False

    def __call__(self, topics: object) -> dict[str, str]:
        self.asked += 1
        self.clock[0] += self.took_s
        if self.fail:
            raise KafkaClientError(
                "describing topics timed out",
                kafka_code=-185,
                kafka_name="_TIMED_OUT",
                retriable=True,
            )
        return {"orders": "id-1"}


def test_the_topic_id_check_takes_at_most_a_tenth_of_the_time() -> None:
    """A check that took 2 s is not made again for 18 s (100,000 partitions take seconds)."""
    now = [0.0]
    ids = _SlowIds(now, took_s=2.0)
    meta = MetaCache(
        {"orders": None}, lambda: None, ids, lambda partitions: {}, clock=lambda: now[0]
    )
    assert meta.recreated_topics() == set()
    assert ids.asked == 1
    now[0] += 17.0
    assert meta.recreated_topics() == set()
    assert ids.asked == 1
    now[0] += 1.0
    meta.recreated_topics()
    assert ids.asked == 2


def test_a_topic_id_check_that_times_out_does_not_fail_the_round() -> None:
    """Seen at 100,000 partitions: every round failed on describe_topics' timeout."""
    now = [0.0]
    ids = _SlowIds(now, took_s=10.0)
    ids.fail = True
    meta = MetaCache(
        {"orders": None}, lambda: None, ids, lambda partitions: {}, clock=lambda: now[0]
    )
    assert meta.recreated_topics() == set()
    now[0] += 90.0
    ids.fail = False
    assert meta.recreated_topics() == set()
    assert ids.asked == 2
