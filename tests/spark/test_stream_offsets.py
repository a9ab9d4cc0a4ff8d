"""A stream's offsets when a topic is deleted or re-created: the stream reader, Kafka faked."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

import client_balance.spark._source as source
from client_balance import DataLossError, KafkaClientError, PartitionOccupiedError
from client_balance.keys import TopicPartition
from client_balance.spark import SourceOptions, parse_options

pytestmark = pytest.mark.spark

A0, B0 = TopicPartition("a", 0), TopicPartition("b", 0)
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
Bounds = dict[TopicPartition, tuple[int, int, int | None]]


class FakeKafka:
    """Partitions' (low, high, committed) as the reader asks them, and the commits it makes."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self.commits: list[dict[TopicPartition, int]] = []

    def offsets(self, options: SourceOptions, *, skip_missing: bool = False) -> Bounds:
        """The partitions the options read: every one the fake has."""
        return dict(self.bounds)

    def existing(self, options: SourceOptions, partitions: Iterable[TopicPartition]) -> Bounds:
        """The partitions of ``partitions``' topics that the fake has."""
        topics = {tp.topic for tp in partitions}
        return {tp: found for tp, found in self.bounds.items() if tp.topic in topics}

    def commit(
        self, servers: str, group: str, offsets: Mapping[TopicPartition, int], **_: Any
    ) -> None:
        """Keep ``offsets``, or refuse them all as the broker does when one is unknown."""
        if any(tp not in self.bounds for tp in offsets):  # as the broker refuses a commit
            raise KafkaClientError(
                "committing offsets failed: UNKNOWN_TOPIC_OR_PART",
                kafka_code=3,
                kafka_name="UNKNOWN_TOPIC_OR_PART",
            )
        self.commits.append(dict(offsets))


@pytest.fixture
def kafka(monkeypatch: pytest.MonkeyPatch) -> FakeKafka:
    """The reader's Kafka, faked; the query's group membership left out."""
    fake = FakeKafka({})
    monkeypatch.setattr(source, "partition_offsets", fake.offsets)
    monkeypatch.setattr(source, "existing_offsets", fake.existing, raising=False)
    monkeypatch.setattr(source, "admin", SimpleNamespace(commit_offsets=fake.commit))
    monkeypatch.setattr(source._StreamReader, "_hold", lambda *_: None)
    return fake


def _reader(**more: str) -> Any:
    given = {
        "kafka.bootstrap.servers": "h:1", "subscribePattern": "[abt]", "group.id": "g",
        "startingOffsets": "earliest", "sourceCount": "2", **more,
    }  # fmt: skip
    return source._StreamReader(parse_options(given, streaming=True))


def _read(tasks: list[Any]) -> dict[TopicPartition, list[int]]:
    """Each partition's offsets the tasks read, in order, from every task's ranges."""
    read: dict[TopicPartition, list[int]] = {}
    for task in tasks:
        for topic, partition, start, end in task.ranges:
            assert start <= end, task.ranges
            read.setdefault(TopicPartition(topic, partition), []).extend(range(start, end))
    return {tp: sorted(offsets) for tp, offsets in read.items()}


def test_a_deleted_topic_is_data_loss_and_never_committed(kafka: FakeKafka) -> None:
    """Topic b deleted after a batch: the next raises naming b:0 and its offset; a:0 commits."""
    kafka.bounds = {A0: (0, 3, None)}  # b was deleted after the stream read it up to 3
    start = {"a": {"0": 3}, "b": {"0": 3}}
    reader = _reader()
    with pytest.raises(DataLossError, match=r"gone from Kafka .*: b:0 at offset 3") as raised:
        reader.latestOffset(start, ReadAllAvailable())
    assert (raised.value.partition, raised.value.lost_from) == ("b:0", 3)
    assert "failOnDataLoss=false" in str(raised.value)
    reader.commit(start)  # Spark's commit of the same batch's end: b:0 left out, no error
    assert kafka.commits == [{A0: 3}, {A0: 3}]


def test_without_fail_on_data_loss_a_stream_goes_on_without_a_deleted_topic(
    kafka: FakeKafka, caplog: pytest.LogCaptureFixture
) -> None:
    """failOnDataLoss=false: one warning, b:0 left behind, a:0 read and committed as before."""
    kafka.bounds = {A0: (0, 5, None)}
    start = {"a": {"0": 3}, "b": {"0": 3}}
    reader = _reader(failOnDataLoss="false")
    with caplog.at_level(logging.INFO, logger="client_balance.spark"):
        end = reader.latestOffset(start, ReadAllAvailable())
        reader.commit(start)
        reader.commit(start)
    assert end == {"a": {"0": 5}}
    assert _read(reader.partitions(start, end)) == {A0: [3, 4]}
    assert kafka.commits == [{A0: 3}] * 3
    messages = [r.getMessage() for r in caplog.records if r.name == "client_balance.spark"]
    assert sum("gone from Kafka, going on" in m for m in messages) == 1
    assert sum("not committing" in m for m in messages) == 1  # said once, not every commit


def test_a_log_that_went_back_fails_the_micro_batch_naming_both_offsets(kafka: FakeKafka) -> None:
    """t:0's high 3 under the checkpoint's 100: DataLossError naming t, 0, 100 and 3."""
    kafka.bounds = {T0: (0, 3, None), T1: (0, 50, None)}  # t was deleted and re-created
    checkpoint = {"t": {"0": 100, "1": 10}}
    reader = _reader(minPartitions="4")
    with pytest.raises(DataLossError) as raised:
        reader.latestOffset(checkpoint, ReadAllAvailable())
    error = raised.value
    assert (error.partition, error.lost_from, error.lost_to) == ("t:0", 3, 100)
    assert "topic 't', partition 0" in str(error)
    assert "ends at offset 3, below offset 100" in str(error)
    assert kafka.commits == [{T1: 10}]  # never an offset past the new log's end
    with pytest.raises(DataLossError, match="ends at offset 3, below offset 100"):
        reader.partitions(checkpoint, {"t": {"0": 3, "1": 50}})  # a batch planned without it


@pytest.mark.parametrize("limit", [ReadAllAvailable(), ReadMaxRows(20)])
def test_without_fail_on_data_loss_a_log_that_went_back_is_read_again(
    kafka: FakeKafka, caplog: pytest.LogCaptureFixture, limit: Any
) -> None:
    """failOnDataLoss=false: a warning, then t:0 is read from 0; no range ends before it starts."""
    kafka.bounds = {T0: (0, 3, None), T1: (0, 50, None)}
    checkpoint = {"t": {"0": 100, "1": 10}}
    reader = _reader(failOnDataLoss="false", minPartitions="4")
    with caplog.at_level(logging.WARNING, logger="client_balance.spark"):
        end = reader.latestOffset(checkpoint, limit)
    read = _read(reader.partitions(checkpoint, end))
    # The new log's three messages, or under the limit t:0's share of it counted from offset 0:
    # 1 of the 20 for 3 of the 43 messages behind.
    limited = isinstance(limit, ReadMaxRows)
    assert read == {T0: [0] if limited else [0, 1, 2], T1: list(range(10, end["t"]["1"]))}
    assert sum(map(len, read.values())) == (20 if limited else 43)
    (record,) = [r for r in caplog.records if "offset was changed" in r.getMessage()]
    assert (record.partition, record.changed_from, record.changed_to) == ("t:0", 100, 3)  # type: ignore[attr-defined]


def test_the_first_micro_batch_reads_from_where_it_was_planned(kafka: FakeKafka) -> None:
    """startingOffsets=latest on a live topic: Spark's second initialOffset() skips nothing."""
    kafka.bounds = {T0: (0, 10, None), T1: (0, 10, None)}
    reader = _reader(startingOffsets="latest")
    start = reader.initialOffset()  # Spark asks once to plan the batch's end ...
    kafka.bounds = {T0: (0, 15, None), T1: (0, 12, None)}
    end = reader.latestOffset(start, ReadAllAvailable())
    kafka.bounds = {T0: (0, 30, None), T1: (0, 30, None)}
    again = reader.initialOffset()  # ... and once more to run it: the topic moved on meanwhile
    assert _read(reader.partitions(again, end)) == {T0: list(range(10, 15)), T1: [10, 11]}


def test_a_query_restarted_inside_its_first_micro_batch_reads_it_whole(kafka: FakeKafka) -> None:
    """The first batch failed and the query restarts with latest: that batch again, no loss."""
    kafka.bounds = {T0: (0, 10, None), T1: (0, 10, None)}
    first_run = _reader(startingOffsets="latest")
    start = first_run.initialOffset()
    kafka.bounds = {T0: (0, 15, None), T1: (0, 12, None)}
    end = first_run.latestOffset(start, ReadAllAvailable())  # Spark's checkpoint keeps `end`
    kafka.bounds = {T0: (0, 40, None), T1: (0, 40, None)}  # the sink failed; time passes
    restarted = _reader(startingOffsets="latest")
    replanned = restarted.initialOffset()  # Spark has no start of batch 0 in its checkpoint
    assert _read(restarted.partitions(replanned, end)) == {T0: list(range(10, 15)), T1: [10, 11]}
    restarted.commit(end)
    assert kafka.commits[-1] == {T0: 15, T1: 12}
    following = restarted.latestOffset(end, ReadAllAvailable())
    assert _read(restarted.partitions(end, following)) == {
        T0: list(range(15, 40)),
        T1: list(range(12, 40)),
    }


def test_a_micro_batch_with_nothing_new_keeps_the_offset_spark_has(kafka: FakeKafka) -> None:
    """No new message: latestOffset answers its start unchanged, so Spark runs no empty batch."""
    kafka.bounds = {T0: (0, 10, None)}
    reader = _reader(startingOffsets="latest")
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert reader.latestOffset(end, ReadAllAvailable()) == end


def test_a_restarted_query_refused_for_a_live_members_partitions_commits_nothing(
    kafka: FakeKafka, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark's first call after a restart is latestOffset(checkpoint): hold, then commit.

    It committed the checkpoint's offsets over the live member's position first, and only then
    refused (the review of 2026-11-29).
    """
    kafka.bounds = {T0: (0, 200, None)}

    def held_by_a_worker(*_: object) -> None:
        raise PartitionOccupiedError("t:0 is held by the live member w1", key="t:0", holder="w1")

    monkeypatch.setattr(source._StreamReader, "_hold", held_by_a_worker)
    reader = _reader()
    with pytest.raises(PartitionOccupiedError):
        reader.latestOffset({"t": {"0": 120}}, ReadAllAvailable())
    assert kafka.commits == []


def test_available_now_from_latest_past_its_target_reads_nothing_and_raises_nothing(
    kafka: FakeKafka,
) -> None:
    """Spark takes the target before the initial offsets; ``latest`` may be past it by then.

    The first batch ended at the target, below its start: read as a re-created topic, it raised
    DataLossError on every restart, or with failOnDataLoss=false read the partition from 0
    (the review of 2026-11-29).
    """
    for fail_on_data_loss in ("true", "false"):
        kafka.bounds = {T0: (0, 100, None)}
        reader = _reader(startingOffsets="latest", failOnDataLoss=fail_on_data_loss)
        reader.prepareForTriggerAvailableNow()
        kafka.bounds = {T0: (0, 105, None)}  # five messages arrive before the initial offsets
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        assert reader.partitions(start, end) == []
        assert reader.latestOffset(end, ReadAllAvailable()) == end


def test_available_now_reads_what_was_there_in_batches_of_the_limit(kafka: FakeKafka) -> None:
    """prepareForTriggerAvailableNow: batches of maxOffsetsPerTrigger up to the highs then."""
    kafka.bounds = {T0: (0, 50, None), T1: (0, 50, None)}
    reader = _reader(maxOffsetsPerTrigger="20")
    reader.prepareForTriggerAvailableNow()
    kafka.bounds = {T0: (0, 80, None), T1: (0, 80, None), TopicPartition("t", 2): (0, 9, None)}
    limit = reader.getDefaultReadLimit()
    start: dict[str, Any] = reader.initialOffset()
    sizes = []
    while (end := reader.latestOffset(start, limit)) != start:
        sizes.append(sum(map(len, _read(reader.partitions(start, end)).values())))
        start = end
    assert sizes == [20] * 5  # not the 160 + 9 there by now, nor one batch of 100
    # The last batch's end, committed when Spark asks after it; t:2 (new since) held at its start.
    assert kafka.commits[-1] == {T0: 50, T1: 50, TopicPartition("t", 2): 0}
