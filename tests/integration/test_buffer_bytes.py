"""``max_buffered_bytes`` against the real broker: 1 MB messages, a small bound, exactly once."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from client_balance import ClientBalanceConsumer

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
MESSAGE_BYTES = 1_000_000
PER_PARTITION = 15


def test_buffered_bytes_stay_within_the_bound_and_every_message_comes_once(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """1 MB messages, a 3 MiB bound, a slow application: buffers stay in it, nothing repeats."""
    topic = new_topic(partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "message.max.bytes": 2 * MIB})
    for index in range(2 * PER_PARTITION):
        value = index.to_bytes(4, "big") * (MESSAGE_BYTES // 4)
        producer.produce(topic, value, partition=index % 2)
        producer.poll(0)
    assert producer.flush(60) == 0
    # Without the bound, each partition could buffer 50,000 messages: all of them here.
    consumer = make_consumer(batch_max_messages=2, max_buffered_bytes=3 * MIB)
    consumer.start([topic], source_count=1, node_id=0)
    seen: Counter[tuple[int | None, int | None]] = Counter()
    while len(seen) < 2 * PER_PARTITION:
        batch = consumer.get_message(timeout_s=30)
        seen.update((m.partition(), m.offset()) for m in batch.messages)
        time.sleep(0.2)  # slow work: the background thread fetches into the buffers meanwhile
        consumer.confirm(batch.confirm_context)
    assert set(seen.values()) == {1}
    assert seen.keys() == {(p, o) for p in (0, 1) for o in range(PER_PARTITION)}
    run = consumer._run
    assert run is not None
    budget = run.fetcher.shelf.budget
    assert 0 < budget.peak <= 3 * MIB  # the buffers were used, and never past the bound
