"""A Spark read and live workers of its group: held partitions are named, not read twice."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, PartitionOccupiedError
from client_balance.keys import TopicPartition
from client_balance.spark._ownership import held_by_live_members, refuse_held
from tests.integration.workers import produce, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_the_driver_sees_which_partitions_live_members_hold(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """held_by_live_members names the member holding each partition; refuse_held raises 410."""
    topic = new_topic(partitions=3)
    produce(kafka_bootstrap, topic, 30, partitions=3)
    group = f"spark-owned-{os.getpid()}-{topic}"
    settings = ClientBalanceSettings(
        bootstrap_servers=kafka_bootstrap, group_id=group, reconcile_interval_s=1.0
    )
    wanted = [TopicPartition(topic, p) for p in range(3)]
    ask: dict[str, Any] = {
        "bootstrap_servers": kafka_bootstrap,
        "group_id": group,
        "kafka": {},
        "status_topic": settings.status_topic,
        "timeout_s": 10.0,
    }
    assert held_by_live_members(wanted, **ask) == {}
    with ClientBalanceConsumer(settings) as worker:
        worker.start([topic], -1, 0, pinned=[f"{topic}:1"])
        wait_until(lambda: bool(worker.registered_partitions()), 30, "the worker holds its pin")
        held = held_by_live_members(wanted, **ask)
        assert held == {TopicPartition(topic, 1): worker.consumer_id}
        with pytest.raises(PartitionOccupiedError) as refused:
            refuse_held(held, group)
        assert worker.consumer_id in str(refused.value)
        assert "readHeldPartitions" in str(refused.value)
        assert refused.value.holder == worker.consumer_id
    assert held_by_live_members(wanted, **ask) == {}  # a clean shutdown withdraws its claims
