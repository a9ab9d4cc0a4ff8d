"""The partition meta set: prefetched at start(); the fetching client warmed only on change."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, cast

from client_balance._kafka import AdminClient
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
