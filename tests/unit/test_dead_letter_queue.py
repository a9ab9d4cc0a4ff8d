"""The dead-letter producer and librdkafka's queue limit (a fake producer)."""

from __future__ import annotations

from typing import Any

from client_balance import ClientBalanceSettings
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
