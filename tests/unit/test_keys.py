import pickle
import threading

import pytest

from client_balance import (
    InvalidOffsetError,
    InvalidPartitionKeyError,
    PartitionKey,
    TopicPartition,
)
from client_balance.errors import ConfigError
from client_balance.keys import check_bootstrap_offset, check_topic_name, to_topic_partition


@pytest.mark.parametrize(
    ("text", "topic", "partition", "broker"),
    [
        ("1:orders:3", "orders", 3, 1),
        ("orders:3", "orders", 3, None),
        ("-1:orders:0", "orders", 0, -1),
        ("12:a.b_c-D:10", "a.b_c-D", 10, 12),
    ],
)
def test_parse_accepts_both_key_forms(text: str, topic: str, partition: int, broker: int) -> None:
    """Three-part and two-part keys parse into topic, partition and optional leader."""
    key = PartitionKey.parse(text)
    assert (key.topic, key.partition, key.broker_id) == (topic, partition, broker)
    assert str(key) == text


def test_identity_ignores_the_leader() -> None:
    """A key with a stale leader id names the same partition."""
    assert PartitionKey.parse("1:orders:3") == PartitionKey.parse("2:orders:3")
    assert PartitionKey.parse("1:orders:3") == PartitionKey.parse("orders:3")
    assert len({PartitionKey.parse("1:orders:3"), PartitionKey.parse("7:orders:3")}) == 1
    assert PartitionKey.parse("1:orders:3").topic_partition == TopicPartition("orders", 3)


def test_with_broker_and_accepted_forms() -> None:
    """Every API-facing form converts to the same TopicPartition."""
    tp = TopicPartition("orders", 3)
    assert to_topic_partition("orders:3") == tp
    assert to_topic_partition("5:orders:3") == tp
    assert to_topic_partition(tp) == tp
    assert to_topic_partition(PartitionKey("orders", 3)) == tp
    assert str(PartitionKey("orders", 3).with_broker(4)) == "4:orders:3"
    assert PartitionKey.parse(tp) == PartitionKey("orders", 3)
    assert str(tp) == "orders:3"


def test_topic_partitions_sort_by_topic_then_number() -> None:
    """Partition 10 sorts after partition 2, and topics sort by name."""
    unsorted = [TopicPartition("b", 0), TopicPartition("a", 10), TopicPartition("a", 2)]
    assert sorted(unsorted) == [
        TopicPartition("a", 2),
        TopicPartition("a", 10),
        TopicPartition("b", 0),
    ]


@pytest.mark.parametrize(
    "bad",
    [
        "", "orders", "orders:", ":3", "orders:-3", "orders:+3", "orders: 3", "orders:3.0",
        "x:orders:3", "1:orders:3:4", "1:or ders:3", "-2:orders:3", "orders:٣", "1::3",
    ],
)  # fmt: skip
def test_malformed_keys_are_rejected_with_the_value(bad: str) -> None:
    """A key that does not parse raises InvalidPartitionKeyError naming it."""
    with pytest.raises(InvalidPartitionKeyError) as caught:
        PartitionKey.parse(bad)
    assert repr(bad) in str(caught.value)
    assert caught.value.code == 400
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("bad", [None, 3, b"orders:3", ("orders", 3)])
def test_non_string_keys_are_rejected(bad: object) -> None:
    """Only str, TopicPartition and PartitionKey are keys."""
    with pytest.raises(InvalidPartitionKeyError, match="partition key must be"):
        PartitionKey.parse(bad)


def test_bad_partition_numbers_in_constructed_keys() -> None:
    """Negative, bool and float partition ids are refused."""
    for bad in (-1, True, 1.0):
        with pytest.raises(InvalidPartitionKeyError, match="partition id"):
            PartitionKey("orders", bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidPartitionKeyError, match="partition id"):
        to_topic_partition(TopicPartition("orders", -1))


@pytest.mark.parametrize("bad", ["", ".", "..", "a" * 250, "or:ders", "ord ers", "ö"])
def test_illegal_topic_names(bad: str) -> None:
    """Topic names follow Kafka's rules, and the error says what they are."""
    with pytest.raises(ConfigError, match="topic name"):
        check_topic_name(bad)


def test_legal_topic_names() -> None:
    """Kafka's full alphabet and the 249-character limit are accepted."""
    assert check_topic_name("a" * 249) == "a" * 249
    assert check_topic_name("__consumer_offsets") == "__consumer_offsets"


@pytest.mark.parametrize("good", [-1, 0, 5, 2**62])
def test_bootstrap_offsets_allowed(good: int) -> None:
    """-1 (resume) and any absolute offset >= 0 are allowed."""
    assert check_bootstrap_offset(good) == good


@pytest.mark.parametrize("bad", [-2, -1001, 1.5, "3", True, None])
def test_bootstrap_offsets_refused(bad: object) -> None:
    """Other offsets raise InvalidOffsetError naming the value and the allowed ones."""
    with pytest.raises(InvalidOffsetError, match="use -1 to resume") as caught:
        check_bootstrap_offset(bad)
    assert repr(bad) in str(caught.value)
    assert caught.value.offset == bad


def test_a_key_or_offset_error_pickles_whatever_it_was_given() -> None:
    """A generator as a key, a lock as an offset: the errors pickle, naming what they got.

    They kept the argument itself, and a pickled error (a Spark task's, a process pool's)
    raised TypeError instead (the review of 2026-11-29, later).
    """
    with pytest.raises(InvalidPartitionKeyError) as bad_key:
        PartitionKey.parse(part for part in ("orders", "3"))
    with pytest.raises(InvalidOffsetError) as bad_offset:
        check_bootstrap_offset(threading.Lock())
    for error in (bad_key.value, bad_offset.value):
        again = pickle.loads(pickle.dumps(error))
        assert str(again) == str(error)
    assert "generator" in str(pickle.loads(pickle.dumps(bad_key.value)).key)
