"""Offset ranges read by a Spark task: what the error events among the messages mean (fakes)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Message

from client_balance._kafka._ranges import _within
from client_balance.errors import KafkaClientError
from client_balance.keys import TopicPartition


class _Consumer:
    """Takes unassignments of the ranges read to their end."""

    def incremental_unassign(self, partitions: object) -> None:
        """Nothing to stop."""


def _messages(error: KafkaError) -> list[Message]:
    return [
        Message(topic="t", partition=0, offset=0, value=b"a"),
        Message(topic="t", partition=0, error=error),
        Message(topic="t", partition=0, offset=7, value=b"h"),
    ]


def test_a_batch_skipped_for_a_bad_crc_raises_instead_of_leaving_a_gap() -> None:
    """An error event librdkafka sends for a batch it skipped (bad CRC) fails the read.

    Error events were dropped with the rest: the read went on from offset 7 and the messages
    between were lost without a word (the review of 2026-11-29, later).
    """
    left = {TopicPartition("t", 0): (0, 10)}
    with pytest.raises(KafkaClientError, match="_BAD_MSG"):
        _within(_messages(KafkaError(KafkaError._BAD_MSG)), left, _Consumer(), [])  # type: ignore[arg-type]


def test_a_passing_transport_error_among_the_messages_reads_on() -> None:
    """A broker connection that dropped (librdkafka reconnects) is no reason to fail a read."""
    left = {TopicPartition("t", 0): (0, 10)}
    kept = _within(_messages(KafkaError(KafkaError._TRANSPORT)), left, _Consumer(), [])  # type: ignore[arg-type]
    assert [message.offset() for message in kept] == [0, 7]
