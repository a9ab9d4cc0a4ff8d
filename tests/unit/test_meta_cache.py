"""The partition meta set: a set prefetched at start() serves the first round."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from client_balance.consumer._meta import MetaCache
from client_balance.keys import TopicPartition


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
