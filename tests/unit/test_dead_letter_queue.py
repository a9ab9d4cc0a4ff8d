"""The dead-letter producer and librdkafka's queue limit (a fake producer)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from client_balance import ClientBalanceSettings, KafkaClientError
from client_balance.consumer._redelivery import Redeliveries
from client_balance.keys import TopicPartition


class _Message:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset

    def headers(self) -> None:
        return None

    def value(self) -> bytes:
        return str(self._offset).encode()

    def key(self) -> None:
        return None


class _SmallQueueProducer:
    """A producer whose queue holds 3 messages, as librdkafka's holds 100,000 by default."""

    def __init__(self) -> None:
        self.queued: list[Any] = []
        self.written: list[bytes] = []

    def produce(self, topic: str, value: bytes, key: Any, **kwargs: Any) -> None:
        if len(self.queued) >= 3:
            raise BufferError("Local: Queue full")
        self.queued.append((value, kwargs["on_delivery"]))

    def flush(self, timeout: float) -> int:
        for value, delivered in self.queued:
            self.written.append(value)
            delivered(None, None)
        self.queued.clear()
        return 0

    def close(self) -> None:
        return None


def test_a_batch_larger_than_the_producers_queue_is_dead_lettered_whole() -> None:
    """Seven messages through a queue of three: all written, in order, no error."""
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", max_redeliveries=0,
        redelivery_policy="dead-letter", dead_letter_topic="dead",
    )  # fmt: skip
    redeliveries = Redeliveries(settings)
    producer = _SmallQueueProducer()
    redeliveries._producer = producer  # the fake (the attribute is typed Any)
    messages = [_Message(offset) for offset in range(7)]
    redeliveries.set_aside(TopicPartition("t", 0), "1:t:0", 0, 7, messages)
    assert producer.written == [str(offset).encode() for offset in range(7)]


class _RefusedProducer(_SmallQueueProducer):
    """Each delivery fails as a write refused by the topic's ACL does."""

    def flush(self, timeout: float) -> int:
        for _value, delivered in self.queued:
            delivered(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), None)
        self.queued.clear()
        return 0

    def purge(self) -> None:
        self.queued.clear()


def test_a_refused_dead_letter_write_names_the_acl_and_the_topic() -> None:
    """As every other refused write does: the operation and topic, for the operator's ACL."""
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", max_redeliveries=0,
        redelivery_policy="dead-letter", dead_letter_topic="dead",
    )  # fmt: skip
    redeliveries = Redeliveries(settings)
    redeliveries._producer = _RefusedProducer()
    with pytest.raises(KafkaClientError) as caught:
        redeliveries.set_aside(TopicPartition("t", 0), "1:t:0", 0, 1, [_Message(0)])
    assert caught.value.kafka_name == "TOPIC_AUTHORIZATION_FAILED"
    assert "Write" in str(caught.value)
    assert "'dead'" in str(caught.value)


def test_the_dead_letter_producer_is_idempotent(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dead-letter producer is idempotent: a retry after a leader moved doubles nothing.

    It had acks=all alone: librdkafka's retries may then double or reorder a dead-lettered
    batch (the review of 2026-11-29, later).
    """
    made: list[dict[str, Any]] = []

    def producer_client(bootstrap: str, kafka: Any, overrides: dict[str, Any]) -> Any:
        made.append(overrides)
        return _SmallQueueProducer()

    monkeypatch.setattr("client_balance.consumer._redelivery.producer_client", producer_client)
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="g", max_redeliveries=0,
        redelivery_policy="dead-letter", dead_letter_topic="dead",
    )  # fmt: skip
    Redeliveries(settings).set_aside(TopicPartition("t", 0), "1:t:0", 0, 1, [_Message(0)])
    assert made == [{"acks": "all", "enable.idempotence": True}]
