"""TubeMQ's example shape: three threads fetch and confirm while a fourth watches the group."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, NoMessageError

pytestmark = pytest.mark.integration

PARTITIONS = 6
MESSAGES = 30_000


def test_three_fetch_threads_share_the_partitions_without_overlap(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Every message comes exactly once, and batches of one partition never overlap in time."""
    topic = new_topic(PARTITIONS)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 20})
    for number in range(MESSAGES):
        producer.produce(topic, str(number).encode(), partition=number % PARTITIONS)
    producer.flush()
    settings = ClientBalanceSettings(
        bootstrap_servers=kafka_bootstrap,
        group_id=f"{topic}-group",
        start_position="earliest",
        batch_max_messages=200,
    )
    seen: Counter[bytes | None] = Counter()
    out_now: set[int] = set()
    overlaps: list[int] = []
    lock = threading.Lock()
    done = threading.Event()

    def fetch() -> None:
        while not done.is_set():
            try:
                result = consumer.get_message(0.5)
            except NoMessageError:
                continue
            with lock:
                if result.partition in out_now:
                    overlaps.append(result.partition)
                out_now.add(result.partition)
            values = [message.value() for message in result.messages]  # the "work", unlocked
            with lock:
                seen.update(values)
                # Leave before confirming: once confirmed, another thread may rightly take it.
                out_now.discard(result.partition)
                if sum(seen.values()) >= MESSAGES:
                    done.set()
            consumer.confirm(result.confirm_context)

    def watch() -> None:
        while not done.is_set():
            consumer.registered_partitions()
            consumer.offset_infos()
            done.wait(0.05)

    with ClientBalanceConsumer(settings) as consumer:
        consumer.start([topic], source_count=1, node_id=0)
        threads = [threading.Thread(target=fetch) for _ in range(3)]
        threads.append(threading.Thread(target=watch))
        for thread in threads:
            thread.start()
        finished = done.wait(120)
        done.set()
        for thread in threads:
            thread.join()
        assert finished, f"only {sum(seen.values())} of {MESSAGES} messages arrived"
        assert len(consumer.registered_partitions()) == PARTITIONS
    assert overlaps == []
    assert len(seen) == MESSAGES
    assert max(seen.values()) == 1
