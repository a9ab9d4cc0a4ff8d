"""Committed offsets when the consumer is slow to find its group coordinator (read_committed)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance import KafkaClientError
from client_balance._kafka import read_committed
from client_balance._kafka._offsets import COMMITTED_PATIENCE_S
from client_balance.keys import TopicPartition

PARTITIONS = [TopicPartition("orders", 0), TopicPartition("orders", 1)]


class _Reader:
    """A consumer whose ``committed()`` answers ``offsets``, or fails with ``error``."""

    def __init__(self, offsets: dict[int, int], error: int | None = None) -> None:
        self.offsets = offsets
        self.error = error
        self.timeouts: list[float] = []
        self.closed = False

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        self.timeouts.append(timeout)
        if self.error is not None:
            raise KafkaException(KafkaError(self.error))
        return [
            KafkaTopicPartition(tp.topic, tp.partition, self.offsets.get(tp.partition, -1001))
            for tp in partitions
        ]

    def close(self) -> None:
        self.closed = True


def _maker(made: list[_Reader]) -> Callable[[], Any]:
    """A second-reader factory that records each reader it makes."""

    def make() -> Any:
        made.append(_Reader({}))
        return made[-1]

    return make


def test_a_consumer_that_has_not_found_its_coordinator_gives_way_to_a_new_reader() -> None:
    """After COMMITTED_PATIENCE_S the second reader answers, and is closed after it."""
    slow: Any = _Reader({}, error=KafkaError._TIMED_OUT)
    second: Any = _Reader({0: 7})
    answer = read_committed(slow, PARTITIONS, 10.0, second_reader=lambda: second)
    assert answer == {PARTITIONS[0]: 7, PARTITIONS[1]: None}
    assert slow.timeouts == [COMMITTED_PATIENCE_S]
    assert second.timeouts == [pytest.approx(10.0 - COMMITTED_PATIENCE_S)]
    assert second.closed


def test_a_consumer_that_answers_in_time_is_the_only_one_asked() -> None:
    """No second reader is made when the consumer answers within the patience."""
    made: list[_Reader] = []
    consumer: Any = _Reader({1: 3})
    answer = read_committed(consumer, PARTITIONS, 10.0, second_reader=_maker(made))
    assert answer == {PARTITIONS[0]: None, PARTITIONS[1]: 3}
    assert made == []


def test_an_error_other_than_a_timeout_is_raised_without_a_second_reader() -> None:
    """A refused group (authorization) is the answer: another client would be refused too."""
    made: list[_Reader] = []
    denied: Any = _Reader({}, error=KafkaError.GROUP_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaClientError):
        read_committed(denied, PARTITIONS, 10.0, second_reader=_maker(made))
    assert made == []


def test_without_a_second_reader_the_consumer_gets_the_whole_timeout() -> None:
    """The plain call waits the full timeout, as before."""
    reader: Any = _Reader({0: 1})
    read_committed(reader, PARTITIONS, 4.0)
    assert reader.timeouts == [4.0]


class _PartlyFailing(_Reader):
    """A consumer whose answer carries an error for partition 1, as OffsetFetch may."""

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        answers = super().committed(partitions, timeout)
        failed = SimpleNamespace(topic="orders", partition=1, offset=-1001,
                                 error=KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT))  # fmt: skip
        return [answers[0], failed]


def test_a_partition_answered_with_an_error_is_an_error_not_nothing_committed() -> None:
    """An error for one partition raises naming it: 'nothing committed' could skip messages."""
    consumer: Any = _PartlyFailing({0: 5})
    with pytest.raises(KafkaClientError, match="committed offset of orders:1") as raised:
        read_committed(consumer, PARTITIONS, 1.0)
    assert raised.value.kafka_name == "UNSTABLE_OFFSET_COMMIT"
