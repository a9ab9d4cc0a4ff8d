"""The dead-letter write through an outage of its topic: one copy in the end, then the commit."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance import ClientBalanceConsumer, KafkaClientError, NoMessageError, admin
from tests.integration.test_consumer import committed_offset, produce
from tests.integration.workers import wait_until

pytestmark = pytest.mark.integration


def _read_all(bootstrap: str, topic: str, at_least: int) -> list[Any]:
    """Every record of ``topic``:0, reading on for a while after ``at_least`` arrived."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"dlq-{uuid.uuid4().hex}"})
    got: list[Any] = []
    try:
        reader.assign([KafkaTopicPartition(topic, 0, 0)])

        def enough() -> bool:
            got.extend(m for m in reader.consume(10, 0.5) if not m.error())
            return len(got) >= at_least

        wait_until(enough, 30, "the dead letters")
        for _ in range(6):  # copies left queued by the failed attempts would come meanwhile
            got.extend(m for m in reader.consume(10, 0.5) if not m.error())
    finally:
        reader.close()
    return got


def test_a_dead_letter_topic_missing_for_two_attempts_gets_one_copy_of_each_message(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """Two writes time out, the topic is made: one copy of each message, committed only after."""
    topic, dead_letters = new_topic(partitions=1), f"dlq-{uuid.uuid4().hex[:12]}"
    produce(kafka_bootstrap, topic, [f"m{i}".encode() for i in range(3)])
    group = f"dlq-{uuid.uuid4().hex[:12]}"
    consumer = make_consumer(
        group_id=group, max_redeliveries=1, redelivery_policy="dead-letter",
        dead_letter_topic=dead_letters, request_timeout_s=3.0,
    )  # fmt: skip
    consumer.start([topic], -1, -1, pinned=[f"{topic}:0"])
    for _ in range(2):
        batch = consumer.get_message(timeout_s=30)
        consumer.confirm(batch.confirm_context, consumed=False)
    for _ in range(2):
        with pytest.raises(KafkaClientError, match="no answer within 3 s"):
            consumer.get_message(timeout_s=15)
        assert committed_offset(kafka_bootstrap, group, topic) == 0  # the start: not skipped
    admin.create_topics(kafka_bootstrap, {dead_letters: 1})

    def skipped() -> bool:
        try:
            consumer.get_message(timeout_s=1)
        except KafkaClientError:
            return False  # the new topic's metadata is not there yet: the next look writes
        except NoMessageError:  # nothing left to deliver
            pass
        return committed_offset(kafka_bootstrap, group, topic) == 3

    wait_until(skipped, 30, "the skip's commit")
    moved = _read_all(kafka_bootstrap, dead_letters, 3)
    assert sorted(dict(m.headers() or [])["client_balance.offset"] for m in moved) == [
        b"0",
        b"1",
        b"2",
    ]
