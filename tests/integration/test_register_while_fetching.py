"""Registering a partition while the member fetches others (consumer/_starts.py, read_starts)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from client_balance import ClientBalanceConsumer, NoMessageError
from tests.integration.workers import produce

pytestmark = pytest.mark.integration


def test_a_partition_registers_while_a_fetch_waits_at_the_same_broker(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """Where a new partition starts is asked on connections that no waiting fetch holds up.

    A broker answers one connection's requests in turn, and holds a fetch of partitions with
    nothing new for ``fetch.wait.max.ms``. Asked on the fetching client's own connection, the
    second partition's watermarks waited behind that fetch: here longer than the request
    timeout, so registering it failed.
    """
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 20, partitions=2, first=0)
    consumer = make_consumer(request_timeout_s=2.0, kafka={"fetch.wait.max.ms": 4_000})
    consumer.start([topic], source_count=0)  # manual: only what is connected is held
    consumer.connect(f"{topic}:0", 10)  # at its end: every fetch of it waits at the broker
    with pytest.raises(NoMessageError):
        consumer.get_message(timeout_s=1.0)  # fetching is under way meanwhile

    consumer.connect(f"{topic}:1")

    batch = consumer.get_message(timeout_s=10)
    assert (batch.partition, batch.start_offset) == (1, 0)
    assert [message.offset() for message in batch.messages] == list(range(10))
