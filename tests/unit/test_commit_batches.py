"""Commits split so that no request makes the group coordinator write more than it accepts."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance._kafka import COMMIT_REQUEST_BYTES, commit_batches
from client_balance.consumer._buffers import HeldPartition
from client_balance.consumer._commits import Committer
from client_balance.errors import KafkaClientError
from client_balance.keys import TopicPartition

LONGEST_GROUP = "g" * 255
LONGEST_TOPIC = "t" * 249


def _offsets(topic: str, count: int) -> list[KafkaTopicPartition]:
    return [KafkaTopicPartition(topic, number, 1_000 + number) for number in range(count)]


def _record_bytes(group: str, topic: str) -> int:
    return 100 + len(group.encode()) + len(topic.encode())


def test_a_usual_commit_is_one_request() -> None:
    """A few hundred partitions of ordinary names go out together, in their order."""
    offsets = _offsets("orders", 400)
    assert list(commit_batches("billing", offsets)) == [offsets]


def test_a_commit_of_long_names_is_split_under_the_bound_in_order() -> None:
    """2,000 partitions of the longest names (1.2 MB of records) go out in bounded runs."""
    offsets = _offsets(LONGEST_TOPIC, 2_000)
    batches = list(commit_batches(LONGEST_GROUP, offsets))
    assert len(batches) > 1
    assert [tp for batch in batches for tp in batch] == offsets
    each = _record_bytes(LONGEST_GROUP, LONGEST_TOPIC)
    assert all(len(batch) * each <= COMMIT_REQUEST_BYTES for batch in batches)
    assert len(batches[0]) == COMMIT_REQUEST_BYTES // each  # runs are filled, not halved


def test_multibyte_topic_names_count_in_bytes() -> None:
    """A name's UTF-8 bytes count, not its characters: runs of 4-byte characters are shorter."""
    wide = "\U0001f4e6" * 200
    batches = list(commit_batches("g", _offsets(wide, 2_000)))
    assert all(len(batch) * _record_bytes("g", wide) <= COMMIT_REQUEST_BYTES for batch in batches)
    assert len(batches) > 1


class _Consumer:
    """Stands in for confluent-kafka's consumer: records each commit; one may be refused."""

    def __init__(self, refuse_call: int | None = None) -> None:
        self.calls: list[int] = []
        self._refuse_call = refuse_call

    def commit(self, *, offsets: list[KafkaTopicPartition], asynchronous: bool) -> list[Any]:
        self.calls.append(len(offsets))
        if len(self.calls) == self._refuse_call:
            raise KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT))
        return []

    def poll(self, timeout: float) -> None:
        """Nothing to serve."""

    def close(self) -> None:
        """Nothing to free."""


def _states(count: int) -> list[HeldPartition]:
    return [
        HeldPartition(TopicPartition(LONGEST_TOPIC, n), None, confirmed=10 + n, committed=None)
        for n in range(count)
    ]


def test_a_large_commit_goes_out_in_several_requests_and_marks_each() -> None:
    """The consumer's commit of 2,000 long-named partitions is several requests, all marked."""
    consumer = _Consumer()
    commits = Committer(lambda: consumer, LONGEST_GROUP, 5.0, threading.Condition())
    states = _states(2_000)
    commits.commit(states)
    assert len(consumer.calls) > 1
    assert sum(consumer.calls) == 2_000
    assert all(state.committed == state.confirmed for state in states)


def test_a_batch_refused_midway_leaves_the_earlier_ones_marked() -> None:
    """What landed before a refused request counts as committed; the rest is left for later."""
    consumer = _Consumer(refuse_call=2)
    commits = Committer(lambda: consumer, LONGEST_GROUP, 5.0, threading.Condition())
    states = _states(2_000)
    with pytest.raises(KafkaClientError):
        commits.commit(states)
    first = consumer.calls[0]
    assert all(state.committed == state.confirmed for state in states[:first])
    assert all(state.committed is None for state in states[first:])
