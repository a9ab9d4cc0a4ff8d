"""admin.partition_offsets: a topic there but not describable yet is waited for, not skipped."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance._kafka import _offsets
from client_balance.keys import TopicPartition


class _Client:
    """A group client whose first metadata answer has the topic without a leader."""

    def __init__(self, unavailable_answers: int) -> None:
        self.unavailable_answers = unavailable_answers
        self.asked = 0

    def list_topics(self, timeout: float) -> Any:
        self.asked += 1
        if self.asked <= self.unavailable_answers:
            error = KafkaError(KafkaError.LEADER_NOT_AVAILABLE)
            return SimpleNamespace(topics={"orders": SimpleNamespace(error=error, partitions={})})
        partitions = {0: object(), 1: object()}
        return SimpleNamespace(
            topics={"orders": SimpleNamespace(error=None, partitions=partitions)}
        )

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        return [KafkaTopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]

    def get_watermark_offsets(self, partition: Any, timeout: float) -> tuple[int, int]:
        return 0, 10

    def close(self) -> None:
        return None


@pytest.mark.parametrize("matched", [False, True])
def test_a_topic_without_a_leader_yet_is_asked_again_not_skipped(
    monkeypatch: pytest.MonkeyPatch, matched: bool
) -> None:
    """Its first answer says LEADER_NOT_AVAILABLE: it is asked again, and its offsets come.

    Skipped as missing, a subscribePattern stream took such a topic for deleted: data loss,
    and with failOnDataLoss=true (the default) a failed query.
    """
    client = _Client(unavailable_answers=2)
    monkeypatch.setattr(_offsets, "group_client", lambda *args: client)
    found = _offsets.partition_offsets(
        "127.0.0.1:9", "g", [] if matched else ["orders"], timeout_s=5.0, skip_missing=True,
        matching=(lambda name: name == "orders") if matched else None,
    )  # fmt: skip
    assert found == {TopicPartition("orders", p): (0, 10, None) for p in (0, 1)}
    assert client.asked == 3
