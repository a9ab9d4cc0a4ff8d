"""Small batches against the real broker: fetched several at a time, handed out one at a time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from client_balance import ClientBalanceConsumer

pytestmark = pytest.mark.integration

PER_PARTITION = 400
BATCH = 7


def test_small_batches_stay_small_in_order_and_every_message_comes_once(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """Batches of 7 from a backlog: none bigger, each starts where the last ended, none lost."""
    topic = new_topic(partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 20})
    for index in range(2 * PER_PARTITION):
        producer.produce(topic, str(index).encode(), partition=index % 2)
    assert producer.flush(30) == 0
    consumer = make_consumer(batch_max_messages=BATCH)
    consumer.start([topic], source_count=1, node_id=0)
    seen: Counter[tuple[int | None, int | None]] = Counter()
    next_start = {0: 0, 1: 0}
    sizes = []
    while len(seen) < 2 * PER_PARTITION:
        batch = consumer.get_message(timeout_s=30)
        offsets = [m.offset() for m in batch.messages]
        assert batch.start_offset == next_start[batch.partition]
        assert offsets == list(range(batch.start_offset, batch.end_offset))
        next_start[batch.partition] = batch.end_offset
        sizes.append(len(batch.messages))
        seen.update((m.partition(), m.offset()) for m in batch.messages)
        consumer.confirm(batch.confirm_context)
    assert set(seen.values()) == {1}
    assert max(sizes) == BATCH
    run = consumer._run
    assert run is not None
    assert run.fetcher.shelf.fetch_count() > BATCH  # it did ask for several batches at a time
