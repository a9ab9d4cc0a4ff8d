"""One-off reads of offset ranges (a Spark task's), real broker: a topic deleted mid-read."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient

from client_balance import DataLossError
from client_balance._kafka import read_ranges
from client_balance.keys import TopicPartition
from tests.integration.workers import produce

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("handled", [True, False], ids=["failOnDataLoss=false", "true"])
def test_a_topic_deleted_under_a_read_is_its_loss_within_seconds(
    kafka_bootstrap: str, new_topic: Callable[..., str], handled: bool
) -> None:
    """Nothing comes of it from librdkafka: asked after a quiet spell, the read ends in seconds.

    It sat out the whole idle timeout (60 s for a Spark task) and failed as if the cluster had
    not answered, so failOnDataLoss=false could not get a stream past it.
    """
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 5, partitions=1)
    lost: list[DataLossError] = []
    config = {"bootstrap.servers": kafka_bootstrap, "group.id": f"{topic}-reader"}
    handler = lost.append if handled else None
    reads = iter(
        read_ranges(config, {TopicPartition(topic, 0): (0, 10)}, batch_max_messages=100,
                    idle_timeout_s=60, on_data_loss=handler)
    )  # fmt: skip
    assert len(next(reads)) == 5  # the planned end is 10: five more were to come
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})  # kept: its futures need it
    admin.delete_topics([topic])[topic].result(30)
    began = time.monotonic()
    if handled:
        assert list(reads) == []
        assert [(e.lost_from, e.lost_to) for e in lost] == [(5, 10)]
    else:
        with pytest.raises(DataLossError, match="its topic was deleted"):
            list(reads)
    assert time.monotonic() - began < 30  # seconds, not the idle timeout
