"""A task's read path without Spark or a broker: Arrow columns as before, ranges cut exactly."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException, Message
from pyspark.sql.pandas.types import to_arrow_schema

import client_balance._kafka._ranges as ranges_module
import client_balance.spark._read as read_module
from client_balance._kafka import read_ranges
from client_balance._kafka._clients import LIBRDKAFKA_DEFAULTS
from client_balance.errors import DataLossError, KafkaClientError
from client_balance.keys import TopicPartition
from client_balance.spark import NodePartition
from client_balance.spark._partition import SCHEMA_WITHOUT_HEADERS
from client_balance.spark._read import _to_arrow, read_node
from client_balance.spark._source import SCHEMA

pytestmark = pytest.mark.spark

ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")
CREATE, LOG_APPEND, NONE = 1, 2, 0  # confluent-kafka's timestamp types


def _reference(messages: list[Any], node_id: int, schema: pa.Schema) -> pa.RecordBatch:
    """The conversion as it was before the rework (row by row), the oracle for the new one."""
    stamps = [message.timestamp() for message in messages]
    columns = [
        [message.key() for message in messages],
        [message.value() for message in messages],
        [message.topic() for message in messages],
        [message.partition() for message in messages],
        [message.offset() for message in messages],
        [stamp * 1000 if kind else None for kind, stamp in stamps],
        [kind - 1 if kind else -1 for kind, _ in stamps],
        [
            [{"key": k, "value": v} for k, v in headers] if (headers := message.headers()) else None
            for message in messages
        ],
        [node_id] * len(messages),
    ]
    arrays = [
        pa.array(column, type=field.type) for column, field in zip(columns, schema, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _message(
    topic: str = "t",
    partition: int = 0,
    offset: int = 0,
    *,
    key: bytes | None = None,
    value: bytes | None = b"v",
    timestamp: tuple[int, int] = (CREATE, 1_700_000_000_123),
    headers: list[tuple[str, str | bytes | None]] | None = None,
    error: KafkaError | None = None,
) -> Message:
    return Message(
        topic=topic, partition=partition, offset=offset, key=key, value=value,
        timestamp=timestamp, headers=headers, error=error,
    )  # fmt: skip


def _mixed() -> list[Message]:
    return [
        _message("a", 0, 7, key=b"k0", value=b"x" * 100),
        _message("a", 0, 8, key=None, value=None, timestamp=(LOG_APPEND, 5)),
        _message("b", 3, 0, key=b"", value=b"", timestamp=(NONE, 0)),
        _message("b", 3, 1, headers=[("type", b"paid"), ("empty", None), ("", b"")]),
        _message("a", 1, 2**40, headers=[], timestamp=(CREATE, -1)),
        _message("a", 1, 2**40 + 1, key=b"\x00\xff", headers=[("h", b"\x00")]),
    ]


@pytest.mark.parametrize(
    "messages",
    [
        _mixed(),
        [_message("only", 5, offset) for offset in range(100)],
        [_message("t", 0, 1, timestamp=(NONE, 0)), _message("t", 0, 2, timestamp=(NONE, 0))],
        [_message("t", p, 0, headers=[("k", b"v")] if p % 2 else None) for p in range(6)],
    ],
    ids=["mixed", "one-topic", "no-timestamps", "some-headers"],
)
def test_batches_equal_the_row_by_row_conversion(messages: list[Message]) -> None:
    """Every column, type, null, header list and timestamp is what the old conversion made."""
    made = _to_arrow(messages, 3, ARROW_SCHEMA)
    expected = _reference(messages, 3, ARROW_SCHEMA)
    assert made.schema.equals(ARROW_SCHEMA)  # what Spark checks before it takes a batch
    assert made.equals(expected)
    assert made.to_pylist() == expected.to_pylist()


def test_without_headers_the_batch_has_every_other_column() -> None:
    """includeHeaders=false: the same batch as with headers, minus the headers column."""
    schema = to_arrow_schema(SCHEMA_WITHOUT_HEADERS, timezone="UTC")
    made = _to_arrow(_mixed(), 3, schema)
    expected = _reference(_mixed(), 3, ARROW_SCHEMA)
    assert made.schema.equals(schema)
    assert made.equals(expected.drop_columns(["headers"]))


def test_a_message_without_headers_has_null_headers_as_in_sparks_source() -> None:
    """No headers (None or an empty list) is null, with headers around it or not."""
    for messages in ([_message()], [_message(headers=[("k", b"v")]), _message(headers=[])]):
        headers = _to_arrow(messages, 0, ARROW_SCHEMA).column("headers")
        assert headers.to_pylist()[-1] is None
        assert headers.null_count == 1


def test_timestamps_are_microseconds_and_kafka_types() -> None:
    """Create time is type 0, log-append 1, none -1 with a null timestamp; ms become µs."""
    batch = _to_arrow(
        [_message(timestamp=(CREATE, 1_000)), _message(timestamp=(LOG_APPEND, 2)),
         _message(timestamp=(NONE, 0))],
        0, ARROW_SCHEMA,
    )  # fmt: skip
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [1_000_000, 2_000, None]
    assert batch.column("timestampType").to_pylist() == [0, 1, -1]


def test_an_empty_list_is_an_empty_batch_of_the_schema() -> None:
    """No messages: a batch of no rows with the source's schema."""
    batch = _to_arrow([], 0, ARROW_SCHEMA)
    assert batch.num_rows == 0
    assert batch.schema.equals(ARROW_SCHEMA)


class _FakeConsumer:
    """Plays a consumer's ``consume()`` answers and records what the reader asks of it."""

    def __init__(
        self,
        answers: list[list[Message]],
        positions: dict[tuple[str, int], int],
        watermarks: dict[tuple[str, int], tuple[int, int]],
    ):
        self.answers = answers
        self.positions = positions
        self.watermarks = watermarks
        self.assigned: list[tuple[str, int, int]] = []
        self.reassigned: list[tuple[str, int, int]] = []
        self.unassigned: list[tuple[str, int]] = []
        self.asked: list[int] = []
        self.closed = False
        self.deleted: set[str] = set()
        self.partition_counts: dict[str, int] = {}
        self.metadata_error: int | None = None

    def assign(self, partitions: list[Any]) -> None:
        self.assigned = [(p.topic, p.partition, p.offset) for p in partitions]

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        self.asked.append(num_messages)
        return self.answers.pop(0) if self.answers else []

    def incremental_unassign(self, partitions: list[Any]) -> None:
        self.unassigned += [(p.topic, p.partition) for p in partitions]

    def incremental_assign(self, partitions: list[Any]) -> None:
        self.reassigned += [(p.topic, p.partition, p.offset) for p in partitions]

    def get_watermark_offsets(self, partition: Any, timeout: float) -> tuple[int, int]:
        return self.watermarks[(partition.topic, partition.partition)]

    def position(self, partitions: list[Any]) -> list[Any]:
        for p in partitions:
            p.offset = self.positions.get((p.topic, p.partition), -1001)
        return partitions

    def list_topics(self, topic: str, timeout: float) -> Any:
        if self.metadata_error is not None:
            raise KafkaException(KafkaError(self.metadata_error))
        error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART) if topic in self.deleted else None
        partitions = dict.fromkeys(range(self.partition_counts.get(topic, 8)))
        return SimpleNamespace(topics={topic: SimpleNamespace(error=error, partitions=partitions)})

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``read_ranges`` builds a ``_FakeConsumer``; the dict gets its answers and the client."""
    box: dict[str, Any] = {"answers": [], "positions": {}, "watermarks": {}}

    def client(config: dict[str, Any]) -> _FakeConsumer:
        box["config"] = config
        consumer = _FakeConsumer(box["answers"], box["positions"], box["watermarks"])
        box["consumer"] = consumer
        return consumer

    monkeypatch.setattr(ranges_module, "reader_client", client)
    return box


def _offsets(batches: list[list[Message]]) -> list[tuple[str | None, int | None, int | None]]:
    return [(m.topic(), m.partition(), m.offset()) for batch in batches for m in batch]


def test_ranges_keep_exactly_their_messages(fake: dict[str, Any]) -> None:
    """Past-the-end, unknown-partition and error messages are dropped; the rest kept in order."""
    error = _message(error=KafkaError(KafkaError._TRANSPORT))
    fake["answers"] += [
        [_message("a", 0, 0), _message("a", 0, 1), _message("b", 0, 5), error,
         _message("a", 0, 2), _message("a", 0, 3), _message("z", 9, 0), _message("b", 0, 6)],
        [_message("b", 0, 7), _message("b", 0, 8), _message("a", 0, 4)],
    ]  # fmt: skip
    wanted = {TopicPartition("a", 0): (0, 3), TopicPartition("b", 0): (5, 8)}
    got = list(read_ranges({"x": 1}, wanted, batch_max_messages=10, idle_timeout_s=5))
    assert _offsets(got) == [
        ("a", 0, 0), ("a", 0, 1), ("b", 0, 5), ("a", 0, 2), ("b", 0, 6), ("b", 0, 7)
    ]  # fmt: skip
    consumer = fake["consumer"]
    assert consumer.assigned == [("a", 0, 0), ("b", 0, 5)]
    assert consumer.unassigned == [("a", 0), ("b", 0)]
    assert consumer.closed


def test_a_batch_inside_its_ranges_is_passed_on_as_it_is(fake: dict[str, Any]) -> None:
    """Nothing to drop: the consume() list itself is yielded, not a copy."""
    batch = [_message("a", p, o) for p in (0, 1) for o in range(3)]
    fake["answers"].append(batch)
    wanted = {TopicPartition("a", 0): (0, 3), TopicPartition("a", 1): (0, 3)}
    got = list(read_ranges({}, wanted, batch_max_messages=10, idle_timeout_s=5))
    assert got == [batch]
    assert got[0] is batch


def test_a_range_whose_end_is_skipped_ends_at_the_first_message_past_it(
    fake: dict[str, Any],
) -> None:
    """A gap at the end (a transaction marker, a compacted record) still finishes the range."""
    fake["answers"] += [[_message("a", 0, 0), _message("a", 0, 2), _message("a", 0, 3)]]
    wanted = {TopicPartition("a", 0): (0, 2)}
    got = list(read_ranges({}, wanted, batch_max_messages=10, idle_timeout_s=5))
    assert _offsets(got) == [("a", 0, 0)]
    assert fake["consumer"].unassigned == [("a", 0)]


def test_a_range_ending_on_a_marker_ends_by_its_position(fake: dict[str, Any]) -> None:
    """No message at end - 1 and none after it: the position past the end finishes it."""
    fake["answers"] += [[_message("a", 0, 0)], []]
    fake["positions"][("a", 0)] = 2
    wanted = {TopicPartition("a", 0): (0, 2)}
    got = list(read_ranges({}, wanted, batch_max_messages=10, idle_timeout_s=5))
    assert _offsets(got) == [("a", 0, 0)]


def test_same_partition_numbers_of_two_topics_stay_apart(fake: dict[str, Any]) -> None:
    """Runs are told apart by topic too: a:0 and b:0 back to back are two ranges."""
    fake["answers"].append(
        [_message("a", 0, 0), _message("a", 0, 1), _message("b", 0, 0), _message("b", 0, 1)]
    )
    wanted = {TopicPartition("a", 0): (0, 1), TopicPartition("b", 0): (0, 2)}
    got = list(read_ranges({}, wanted, batch_max_messages=10, idle_timeout_s=5))
    assert _offsets(got) == [("a", 0, 0), ("b", 0, 0), ("b", 0, 1)]


def test_the_reader_asks_for_no_more_than_its_ranges_hold(fake: dict[str, Any]) -> None:
    """consume() is asked for what is left at most, so the read's end waits for no timeout."""
    fake["answers"] += [[_message("a", 0, o) for o in range(4)], [_message("a", 0, 4)]]
    got = list(read_ranges({}, {TopicPartition("a", 0): (0, 5)}, batch_max_messages=4,
                           idle_timeout_s=5))  # fmt: skip
    assert len(got) == 2
    assert fake["consumer"].asked == [4, 1]


def test_the_reader_fetches_with_the_sdk_settings_unless_told_otherwise(
    fake: dict[str, Any],
) -> None:
    """The fetch defaults apply, kafka. options override them; out of range is always an error."""
    fake["answers"].append([_message("a", 0, 0)])
    given = {"fetch.queue.backoff.ms": 500, "bootstrap.servers": "h:1"}
    list(
        read_ranges(
            {**given, "auto.offset.reset": "earliest"}, {TopicPartition("a", 0): (0, 1)},
            batch_max_messages=5, idle_timeout_s=5,
        )
    )  # fmt: skip
    assert fake["config"] == {**LIBRDKAFKA_DEFAULTS, **given, "auto.offset.reset": "error"}


def _out_of_range(topic: str, partition: int, offset: int) -> Message:
    """The event of librdkafka for a fetch at an offset the log does not have (reset=error)."""
    return _message(topic, partition, offset, error=KafkaError(KafkaError._AUTO_OFFSET_RESET))


def test_a_start_below_the_log_start_is_data_loss(fake: dict[str, Any]) -> None:
    """Without a handler, a start the log lost raises DataLossError naming partition and range."""
    fake["answers"].append([_out_of_range("a", 0, 10)])
    fake["watermarks"][("a", 0)] = (40, 100)
    with pytest.raises(DataLossError) as raised:
        list(read_ranges({}, {TopicPartition("a", 0): (10, 60)}, batch_max_messages=10,
                         idle_timeout_s=5))  # fmt: skip
    error = raised.value
    assert (error.partition, error.lost_from, error.lost_to) == ("a:0", 10, 40)
    assert "a:0" in str(error)
    assert "[10, 40)" in str(error)
    assert fake["consumer"].closed


def test_a_handled_loss_reads_on_from_the_log_start(fake: dict[str, Any]) -> None:
    """A handler that returns: the range goes on at the low watermark, other ranges unharmed."""
    fake["answers"] += [
        [_message("b", 0, 0), _out_of_range("a", 0, 10)],
        [_message("a", 0, 40), _message("a", 0, 41), _message("b", 0, 1)],
    ]
    fake["watermarks"][("a", 0)] = (40, 100)
    lost: list[DataLossError] = []
    wanted = {TopicPartition("a", 0): (10, 42), TopicPartition("b", 0): (0, 2)}
    got = list(read_ranges({}, wanted, batch_max_messages=10, idle_timeout_s=5,
                           on_data_loss=lost.append))  # fmt: skip
    assert _offsets(got) == [("b", 0, 0), ("a", 0, 40), ("a", 0, 41), ("b", 0, 1)]
    assert [(e.partition, e.lost_from, e.lost_to) for e in lost] == [("a:0", 10, 40)]
    assert fake["consumer"].reassigned == [("a", 0, 40)]


@pytest.mark.parametrize(
    ("watermarks", "lost_to"), [((50, 60), 30), ((0, 5), 30)], ids=["deleted", "truncated"]
)
def test_a_range_wholly_gone_ends_with_its_loss(
    fake: dict[str, Any], watermarks: tuple[int, int], lost_to: int
) -> None:
    """Deleted past its end, or the log cut below its start: the whole rest is lost, read ends."""
    fake["answers"].append([_out_of_range("a", 0, 10)])
    fake["watermarks"][("a", 0)] = watermarks
    lost: list[DataLossError] = []
    got = list(read_ranges({}, {TopicPartition("a", 0): (10, 30)}, batch_max_messages=10,
                           idle_timeout_s=5, on_data_loss=lost.append))  # fmt: skip
    assert got == []
    assert [(e.lost_from, e.lost_to) for e in lost] == [(10, lost_to)]
    assert fake["consumer"].reassigned == []


@pytest.mark.parametrize("handled", [True, False])
def test_a_topic_deleted_under_a_read_is_its_loss_not_a_timeout(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch, handled: bool
) -> None:
    """Asked after a quiet spell (librdkafka says nothing of it): the rest is lost, at once.

    The read sat out its idle timeout and failed as if the cluster had not answered, so
    failOnDataLoss=false could not get a stream past a deleted topic (the review of 2026-11-29).
    """
    monkeypatch.setattr(ranges_module, "_GONE_CHECK_S", 0.2)
    fake["answers"].append([_message("a", 0, 10), _message("b", 0, 0)])
    lost: list[DataLossError] = []
    wanted = {TopicPartition("a", 0): (10, 30), TopicPartition("b", 0): (0, 1)}
    reads = iter(read_ranges({}, wanted, batch_max_messages=10, idle_timeout_s=30,
                             on_data_loss=lost.append if handled else None))  # fmt: skip
    assert _offsets([next(reads)]) == [("a", 0, 10), ("b", 0, 0)]
    fake["consumer"].deleted.add("a")
    began = time.monotonic()
    if handled:
        assert list(reads) == []
        assert [(e.partition, e.lost_from, e.lost_to) for e in lost] == [("a:0", 11, 30)]
        assert "deleted" in str(lost[0])
    else:
        with pytest.raises(DataLossError, match=r"its topic was deleted"):
            list(reads)
    assert time.monotonic() - began < 5.0  # not the idle timeout's 30 s
    assert ("a", 0) in fake["consumer"].unassigned
    assert fake["consumer"].closed


def test_a_topic_made_anew_with_fewer_partitions_loses_the_ones_past_its_count(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partition 1 of a topic now of one partition is as gone as a deleted topic's."""
    monkeypatch.setattr(ranges_module, "_GONE_CHECK_S", 0.2)
    fake["answers"].append([_message("a", 0, 0)])
    lost: list[DataLossError] = []
    wanted = {TopicPartition("a", 0): (0, 1), TopicPartition("a", 1): (0, 20)}
    reads = iter(read_ranges({}, wanted, batch_max_messages=10, idle_timeout_s=30,
                             on_data_loss=lost.append))  # fmt: skip
    next(reads)
    fake["consumer"].partition_counts["a"] = 1
    assert list(reads) == []
    assert [(e.partition, e.lost_from, e.lost_to) for e in lost] == [("a:1", 0, 20)]


def test_metadata_that_does_not_answer_leaves_the_read_to_its_idle_timeout(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No answer to whether a topic exists is no answer: neither a loss nor an early failure."""
    monkeypatch.setattr(ranges_module, "_GONE_CHECK_S", 0.1)
    fake["answers"].append([_message("a", 0, 0)])
    reads = iter(read_ranges({}, {TopicPartition("a", 0): (0, 20)}, batch_max_messages=10,
                             idle_timeout_s=1))  # fmt: skip
    next(reads)
    fake["consumer"].metadata_error = KafkaError._TRANSPORT
    with pytest.raises(KafkaClientError, match="no message arrived"):
        list(reads)


def test_gaps_inside_the_log_are_no_loss(fake: dict[str, Any]) -> None:
    """Compacted records and transaction markers leave gaps: read past, nothing reported."""
    fake["answers"].append([_message("a", 0, 3), _message("a", 0, 7), _message("a", 0, 12)])
    lost: list[DataLossError] = []
    got = list(read_ranges({}, {TopicPartition("a", 0): (0, 10)}, batch_max_messages=10,
                           idle_timeout_s=5, on_data_loss=lost.append))  # fmt: skip
    assert _offsets(got) == [("a", 0, 3), ("a", 0, 7)]
    assert lost == []


def test_the_collector_is_paused_for_the_read_and_resumed_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GC is off while batches are made and back on once the read ends or is abandoned."""
    seen: list[bool] = []

    def batches(*_: Any, **__: Any) -> Iterator[list[Message]]:
        for offset in range(3):
            seen.append(gc.isenabled())
            yield [_message("t", 0, offset)]

    monkeypatch.setattr(read_module, "read_ranges", batches)
    partition = NodePartition(
        node_id=1, ranges=(("t", 0, 0, 3),), kafka={"bootstrap.servers": "h:1"},
        batch_max_messages=10,
    )  # fmt: skip
    assert gc.isenabled()
    assert sum(batch.num_rows for batch in read_node(partition)) == 3
    assert seen == [False, False, False]
    assert gc.isenabled()
    abandoned = read_node(partition)
    next(abandoned)
    assert not gc.isenabled()
    abandoned.close()
    assert gc.isenabled()
    gc.disable()
    try:
        list(read_node(partition))
        assert not gc.isenabled()  # it was off before: left off
    finally:
        gc.enable()
