"""Partition ids, broker ids and offsets past what Kafka's int32/int64 hold, and error pickling."""

import pickle

import pytest

from client_balance import (
    ClientBalanceSettings,
    ConfigError,
    InvalidOffsetError,
    InvalidPartitionKeyError,
    PartitionKey,
    TopicPartition,
)
from client_balance.keys import check_bootstrap_offset, to_topic_partition

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(
    "make",
    [
        lambda: PartitionKey("orders", INT32_MAX + 1),
        lambda: PartitionKey.parse("orders:2147483648"),
        lambda: PartitionKey.parse("1:orders:99999999999999999999"),
        lambda: PartitionKey.parse(TopicPartition("orders", INT32_MAX + 1)),
        lambda: to_topic_partition(TopicPartition("orders", INT32_MAX + 1)),
    ],
)
def test_a_partition_id_past_int32_is_refused_naming_the_range(make: object) -> None:
    """A partition id above 2**31-1 is an InvalidPartitionKeyError saying 0 to 2147483647."""
    with pytest.raises(
        InvalidPartitionKeyError, match="partition ids are integers 0 to 2147483647"
    ):
        make()  # type: ignore[operator]


@pytest.mark.parametrize("text", ["2147483648:orders:3", "99999999999999999999:orders:3"])
def test_a_broker_id_past_int32_is_refused_naming_the_key_and_range(text: str) -> None:
    """A broker id above 2**31-1 is refused with the key as given and the range allowed."""
    with pytest.raises(InvalidPartitionKeyError, match="broker ids are integers 0 to 2147483647"):
        PartitionKey.parse(text)
    with pytest.raises(InvalidPartitionKeyError) as refused:
        PartitionKey.parse(text)
    assert refused.value.key == text
    assert text in str(refused.value)


def test_the_largest_ids_and_offset_are_accepted() -> None:
    """2**31-1 as partition and broker id, and 2**63-1 as offset, are allowed."""
    key = PartitionKey.parse(f"{INT32_MAX}:orders:{INT32_MAX}")
    assert (key.broker_id, key.partition) == (INT32_MAX, INT32_MAX)
    assert check_bootstrap_offset(INT64_MAX) == INT64_MAX


def test_an_offset_past_int64_is_refused_naming_the_range() -> None:
    """A bootstrap offset above 2**63-1 is an InvalidOffsetError saying what is allowed."""
    with pytest.raises(InvalidOffsetError, match=f"absolute offset 0 to {INT64_MAX}"):
        check_bootstrap_offset(INT64_MAX + 1)


def test_pinned_entries_past_kafkas_ranges_are_refused_when_the_settings_are_made() -> None:
    """A pinned partition id past int32 or offset past int64 is a ConfigError naming it."""
    base = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "billing"}
    with pytest.raises(ConfigError, match="2147483648"):
        ClientBalanceSettings(**base, pinned={"orders:2147483648": 0})
    with pytest.raises(ConfigError, match=str(2**64)):
        ClientBalanceSettings(**base, pinned={"orders:0": 2**64})


@pytest.mark.parametrize(
    ("make", "key"),
    [
        (lambda: PartitionKey("orders", lambda: 3), ("orders",)),  # type: ignore[arg-type]
        (lambda: PartitionKey("orders", 3, broker_id=lambda: 1), (3, "orders")),  # type: ignore[arg-type]
        (lambda: PartitionKey.parse(TopicPartition("orders", lambda: 3)), ("orders",)),  # type: ignore[arg-type]
    ],
)
def test_a_key_error_of_an_unpicklable_id_pickles_and_names_the_key(
    make: object, key: tuple[object, ...]
) -> None:
    """A PartitionKey refused for a callable id pickles, and .key is the key, not the id."""
    with pytest.raises(InvalidPartitionKeyError) as refused:
        make()  # type: ignore[operator]
    copy = pickle.loads(pickle.dumps(refused.value))
    assert str(copy) == str(refused.value)
    assert isinstance(copy.key, str)
    assert all(str(part) in copy.key for part in key)
