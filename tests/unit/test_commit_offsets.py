"""Committing a group's offsets without joining it (``_kafka.commit_offsets``; no broker)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance._kafka import _offsets
from client_balance.errors import KafkaClientError
from client_balance.keys import TopicPartition


class _Answer:
    """A coordinator's answer for one partition, as confluent-kafka's commit() gives it."""

    def __init__(self, offset: KafkaTopicPartition, error: KafkaError | None) -> None:
        self.topic, self.partition, self.error = offset.topic, offset.partition, error


class _RefusingTopicB:
    """A group client whose coordinator commits every partition but topic ``b``'s."""

    def __init__(self) -> None:
        self.committed: dict[tuple[str, int], int] = {}

    def commit(self, *, offsets: list[KafkaTopicPartition], asynchronous: bool) -> list[_Answer]:
        answers = []
        for offset in offsets:
            refused = offset.topic == "b"
            if not refused:
                self.committed[offset.topic, offset.partition] = offset.offset
            error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED) if refused else None
            answers.append(_Answer(offset, error))
        return answers

    def close(self) -> None:
        """Nothing to free."""


def test_a_commit_refused_in_part_names_what_was_committed_and_what_was_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Topic a committed, topic b refused: the error says both, as a reset must tell the operator.

    It said only the refusal, and the operator of a half-reset group did not know which half.
    """
    client = _RefusingTopicB()
    monkeypatch.setattr(_offsets, "group_client", lambda *_args: client)
    offsets = {TopicPartition("a", 0): 7, TopicPartition("a", 1): 7, TopicPartition("b", 0): 3}
    with pytest.raises(KafkaClientError) as raised:
        _offsets.commit_offsets("127.0.0.1:1", "billing", offsets, timeout_s=1.0)
    assert raised.value.kafka_name == "TOPIC_AUTHORIZATION_FAILED"
    assert "committed before it failed: a:0, a:1; not committed: b:0" in str(raised.value)
    assert client.committed == {("a", 0): 7, ("a", 1): 7}
