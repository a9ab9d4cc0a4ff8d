"""admin.partition_offsets: a topic there but not describable yet is waited for, not skipped."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance import KafkaClientError
from client_balance._kafka import _watermarks
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
    monkeypatch.setattr(_watermarks, "group_client", lambda *args: client)
    found = _watermarks.partition_offsets(
        "127.0.0.1:9", "g", [] if matched else ["orders"], timeout_s=5.0, skip_missing=True,
        matching=(lambda name: name == "orders") if matched else None,
    )  # fmt: skip
    assert found == {TopicPartition("orders", p): (0, 10, None) for p in (0, 1)}
    assert client.asked == 3


class _DeadLeaderClient(_Client):
    """Its watermark query answers as a client still asking a SIGKILLed leader does."""

    def __init__(self, code: int) -> None:
        super().__init__(unavailable_answers=0)
        self.code = code

    def get_watermark_offsets(self, partition: Any, timeout: float) -> tuple[int, int]:
        raise KafkaException(KafkaError(self.code, "Failed to get watermark offsets"))


@pytest.mark.parametrize(
    "code",
    [KafkaError._TIMED_OUT, KafkaError._UNKNOWN_PARTITION, KafkaError._DESTROY_BROKER,
     KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION],
)  # fmt: skip
def test_a_leader_being_replaced_is_asked_again_with_a_fresh_client(
    monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """Two clients meet the dead leader; the third, made afresh, gets the offsets."""
    made: list[_Client] = []

    def fresh(*args: Any) -> _Client:
        made.append(_DeadLeaderClient(code) if len(made) < 2 else _Client(unavailable_answers=0))
        return made[-1]

    monkeypatch.setattr(_watermarks, "group_client", fresh)
    found = _watermarks.partition_offsets("127.0.0.1:9", "g", ["orders"], timeout_s=10.0)
    assert found == {TopicPartition("orders", p): (0, 10, None) for p in (0, 1)}
    assert len(made) == 3


def test_an_error_that_is_no_leader_move_is_raised_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """TOPIC_AUTHORIZATION_FAILED is no outage: one client, raised."""
    made: list[_Client] = []

    def fresh(*args: Any) -> _Client:
        made.append(_DeadLeaderClient(KafkaError.TOPIC_AUTHORIZATION_FAILED))
        return made[-1]

    monkeypatch.setattr(_watermarks, "group_client", fresh)
    with pytest.raises(KafkaClientError, match="TOPIC_AUTHORIZATION_FAILED"):
        _watermarks.partition_offsets("127.0.0.1:9", "g", ["orders"], timeout_s=10.0)
    assert len(made) == 1


class _CommittedErrorClient(_Client):
    """Its committed() answers one partition with an error, as a per-partition failure comes."""

    def __init__(self, code: int) -> None:
        super().__init__(unavailable_answers=0)
        self.code = code

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        return [
            SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=5,
                            error=KafkaError(self.code) if tp.partition == 1 else None)
            for tp in partitions
        ]  # fmt: skip


def test_a_partitions_committed_offset_that_failed_is_not_taken_for_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An error in one partition's answer is raised, not read as "nothing committed".

    Read so, a stream with startingOffsets=committed started at the log's start (the review of
    2026-11-29).
    """
    monkeypatch.setattr(
        _watermarks, "group_client",
        lambda *args: _CommittedErrorClient(KafkaError.GROUP_AUTHORIZATION_FAILED),
    )  # fmt: skip
    with pytest.raises(KafkaClientError) as caught:
        _watermarks.partition_offsets("127.0.0.1:9", "g", ["orders"], timeout_s=5.0)
    assert caught.value.kafka_name == "GROUP_AUTHORIZATION_FAILED"
