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
SMALL_PER_PARTITION = 1000


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


def test_a_batch_held_out_stalls_no_other_partition_once_the_buffers_are_full(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """A batch held out leaves the other partition's messages flowing; its confirm goes on."""
    # Partition 0's batch held out unconfirmed, 1000-byte messages past a 64 KiB bound:
    # partition 1 still comes in full and in order; the confirm continues partition 0 from
    # exactly its end, no gap, no duplicate.
    topic = new_topic(partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 5})
    for partition in (0, 1):
        for index in range(SMALL_PER_PARTITION):
            producer.produce(topic, index.to_bytes(4, "big") * 250, partition=partition)
            producer.poll(0)
    assert producer.flush(60) == 0
    consumer = make_consumer(batch_max_messages=10, max_buffered_bytes=64 * 1024)
    consumer.start([topic], source_count=1, node_id=0)
    offsets: dict[int | None, list[int | None]] = {0: [], 1: []}
    slow = None
    while len(offsets[1]) < SMALL_PER_PARTITION:
        # Before the fix: NoMessageError 407 once partition 0's backlog filled the bound.
        batch = consumer.get_message(timeout_s=10)
        offsets[batch.partition] += [m.offset() for m in batch.messages]
        if batch.partition == 0 and slow is None:
            slow = batch  # slow work: held out, unconfirmed, while partition 1 goes on
            continue
        consumer.confirm(batch.confirm_context)
    assert slow is not None, "partition 0 never came"
    assert offsets == {0: list(range(len(slow.messages))), 1: list(range(SMALL_PER_PARTITION))}
    consumer.confirm(slow.confirm_context)
    while len(offsets[0]) < SMALL_PER_PARTITION:
        batch = consumer.get_message(timeout_s=10)
        offsets[batch.partition] += [m.offset() for m in batch.messages]
        consumer.confirm(batch.confirm_context)
    assert offsets[0] == list(range(SMALL_PER_PARTITION))
    run = consumer._run
    assert run is not None
    assert run.fetcher.shelf.budget.peak <= 64 * 1024
