"""Where partitions start: one whose watermarks cannot be read now, strict and lenient."""

from __future__ import annotations

import concurrent.futures
import time
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance import KafkaClientError
from client_balance._kafka import read_starts
from client_balance.keys import TopicPartition

T = "orders"
PARTITIONS = [TopicPartition(T, number) for number in range(4)]
MOVING = TopicPartition(T, 2)


class _Consumer:
    """Watermarks 0..100 for every partition but those in ``moving``, whose leader is moving.

    The bulk query leaves those out (as librdkafka does a partition that answered an error),
    and asking them one by one fails with NOT_LEADER_FOR_PARTITION after ``delay_s``.
    """

    def __init__(self, moving: set[TopicPartition], delay_s: float = 0.0) -> None:
        self.moving = moving
        self.delay_s = delay_s
        self.asked_alone: list[tuple[TopicPartition, float]] = []

    def offsets_for_times(self, partitions: list[Any], timeout: float) -> list[Any]:
        """Log start (-2) or end (-1) of each partition that is not moving."""
        return [
            KafkaTopicPartition(tp.topic, tp.partition, 0 if tp.offset == -2 else 100)
            for tp in partitions
            if TopicPartition(tp.topic, tp.partition) not in self.moving
        ]

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        """Nothing committed."""
        return [KafkaTopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        """Fails for a moving partition; noted with its timeout."""
        partition = TopicPartition(tp.topic, tp.partition)
        self.asked_alone.append((partition, timeout))
        time.sleep(self.delay_s)
        if partition in self.moving:
            raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
        return 0, 100


def test_a_caller_that_needs_every_partition_gets_the_error() -> None:
    """Without skip_unreadable one unreadable partition fails the read, naming what failed."""
    consumer = _Consumer({MOVING})
    with pytest.raises(KafkaClientError, match="reading offsets to start from"):
        read_starts(consumer, PARTITIONS, 5.0)  # type: ignore[arg-type]  # a fake consumer


def test_an_unreadable_partition_is_left_out_and_the_others_are_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A leader moving under one partition does not keep the other three from starting."""
    consumer = _Consumer({MOVING})
    ranges, committed = read_starts(
        consumer,  # type: ignore[arg-type]  # a fake consumer
        PARTITIONS, 5.0, skip_unreadable=True,
    )  # fmt: skip
    assert ranges == {tp: (0, 100) for tp in PARTITIONS if tp != MOVING}
    assert committed == dict.fromkeys(PARTITIONS)
    assert [partition for partition, _ in consumer.asked_alone] == [MOVING]
    (warning,) = [r for r in caplog.records if "could not be read" in r.getMessage()]
    assert warning.__dict__["partitions"] == [str(MOVING)]
    assert "NOT_LEADER" in warning.__dict__["error"]


def test_partitions_asked_one_by_one_share_one_timeout() -> None:
    """Many unreadable partitions cost one timeout in all, not one each."""
    moving = set(PARTITIONS)
    consumer = _Consumer(moving, delay_s=0.05)
    ranges, _ = read_starts(
        consumer,  # type: ignore[arg-type]  # a fake consumer
        PARTITIONS, 0.08, skip_unreadable=True,
    )  # fmt: skip
    assert ranges == {}
    assert 1 <= len(consumer.asked_alone) < len(PARTITIONS)
    assert all(timeout <= 0.08 for _, timeout in consumer.asked_alone)


class _Admin:
    """An admin client whose ListOffsets answers every partition on its own: 0..100."""

    def __init__(self) -> None:
        self.asked: list[list[TopicPartition]] = []

    def list_offsets(self, specs: dict[Any, Any], **_: Any) -> dict[Any, Any]:
        """One future per partition, each answered."""
        self.asked.append([TopicPartition(tp.topic, tp.partition) for tp in specs])
        offset = 0 if len(self.asked) % 2 else 100
        answers = {}
        for tp in specs:
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            future.set_result(SimpleNamespace(offset=offset))
            answers[tp] = future
        return answers


def test_what_the_consumer_could_not_answer_is_asked_again_in_bulk() -> None:
    """The consumer failing all or nothing: its gaps go to the admin client in one request."""
    consumer = _Consumer(set(PARTITIONS[:2]))
    admin = _Admin()
    ranges, _ = read_starts(
        consumer,  # type: ignore[arg-type]  # a fake consumer
        PARTITIONS, 5.0, skip_unreadable=True,
        fallback=admin,  # type: ignore[arg-type]  # a fake admin client
    )  # fmt: skip
    assert ranges == dict.fromkeys(PARTITIONS, (0, 100))
    assert admin.asked == [PARTITIONS[:2], PARTITIONS[:2]]  # log start, log end
    assert consumer.asked_alone == []
