"""ClientBalanceConsumer without a broker: what it checks before it ever calls the network.

``start()`` validates its arguments and the consumer's state before it asks the cluster about
the group, so every test here either fails there or never calls ``start()``. The settings name
an address nothing listens on, with a short timeout, so a test that reached the network by
mistake would fail quickly instead of hanging.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from client_balance import (
    ClientBalanceConsumer,
    ClientBalanceSettings,
    ConfigError,
    InvalidConfirmContextError,
    NotStartedError,
    TopicPartition,
)
from client_balance.consumer._parse import (
    MAX_FILTER_LENGTH,
    MAX_FILTERS_PER_TOPIC,
)
from client_balance.consumer._parse import parse_context as _parse_context
from client_balance.consumer._setup import CLIENT_VERSION


@pytest.fixture
def consumer() -> ClientBalanceConsumer:
    """A consumer that was never started, on a cluster address nobody answers."""
    settings = ClientBalanceSettings(
        bootstrap_servers="127.0.0.1:9", group_id="unit-group", request_timeout_s=0.5
    )
    return ClientBalanceConsumer(settings)


# Every call that needs a running consumer, with arguments that would be valid then.
NEEDS_RUNNING: dict[str, Callable[[ClientBalanceConsumer], object]] = {
    "get_message": lambda c: c.get_message(0.01),
    "confirm": lambda c: c.confirm("1:orders:0:1"),
    "connect": lambda c: c.connect("orders:0"),
    "connect_offset": lambda c: c.connect("1:orders:0", 5),
    "disconnect": lambda c: c.disconnect("orders:0"),
    "registered_partitions": lambda c: c.registered_partitions(),
    "get_partition_meta": lambda c: c.get_partition_meta(),
    "is_partitions_ready": lambda c: c.is_partitions_ready(0.01),
    "offset_infos": lambda c: c.offset_infos(),
    "commit": lambda c: c.commit(),
    "reconcile_now": lambda c: c.reconcile_now(0.01),
}


# ------------------------------------------------------------------------ construction
@pytest.mark.parametrize("settings", [None, {"bootstrap_servers": "x:1", "group_id": "g"}, "g"])
def test_constructor_takes_only_settings(settings: object) -> None:
    """Anything but a ClientBalanceSettings is refused with ConfigError naming its type."""
    with pytest.raises(ConfigError, match=type(settings).__name__):
        ClientBalanceConsumer(settings)  # type: ignore[arg-type]


def test_properties_before_start(consumer: ClientBalanceConsumer) -> None:
    """Before start: source_count and node_id are -2, shut down, no filters, ids as TubeMQ's."""
    assert (consumer.source_count, consumer.node_id) == (-2, -2)
    assert consumer.is_shutdown()
    assert not consumer.is_filter_consume("orders")
    assert consumer.client_version == CLIENT_VERSION
    assert consumer.settings.group_id == "unit-group"
    assert re.fullmatch(
        rf"unit-group_.+-\d+-[0-9a-f]{{12}}-Balance-{re.escape(CLIENT_VERSION)}",
        consumer.consumer_id,
    )


def test_consumer_ids_differ_per_object(consumer: ClientBalanceConsumer) -> None:
    """Two consumers of one process and group still have different consumer ids."""
    other = ClientBalanceConsumer(consumer.settings)
    assert other.consumer_id != consumer.consumer_id


# ------------------------------------------------------------------------ start() checks
@pytest.mark.parametrize(
    "topics",
    [
        "orders",  # a string is not a list of names
        b"orders",
        None,
        5,
        {"orders"},  # a set has no order and is not a mapping
        [],
        {},
        [""],
        ["bad topic"],
        ["orders:1"],
        [".."],
        ["x" * 250],
        [3],
        ["orders", None],
    ],
)
def test_start_refuses_bad_topics(consumer: ClientBalanceConsumer, topics: Any) -> None:
    """start() raises ConfigError for topics that are not a non-empty list or mapping of names."""
    with pytest.raises(ConfigError) as caught:
        consumer.start(topics, source_count=2, node_id=0)
    assert caught.value.code == 400
    assert consumer.is_shutdown()


@pytest.mark.parametrize(
    ("source_count", "node_id"),
    [(4, 4), (4, 7), (4, -1), (4, -2), (1, 1), (2, 100)],
)
def test_start_refuses_node_id_out_of_range(
    consumer: ClientBalanceConsumer, source_count: int, node_id: int
) -> None:
    """With source_count > 0, a node_id outside [0, source_count - 1] raises ConfigError."""
    with pytest.raises(ConfigError, match=rf"node_id={node_id} .*\[0, {source_count - 1}\]"):
        consumer.start(["orders"], source_count=source_count, node_id=node_id)
    assert (consumer.source_count, consumer.node_id) == (-2, -2)


@pytest.mark.parametrize(
    ("source_count", "node_id"),
    [(4.0, 1), (4, 1.0), ("4", 1), (True, 0), (4, False), (None, 0)],
)
def test_start_refuses_placement_that_is_not_int(
    consumer: ClientBalanceConsumer, source_count: Any, node_id: Any
) -> None:
    """source_count and node_id must be ints (not floats, strings or bools)."""
    with pytest.raises(ConfigError, match="must be ints"):
        consumer.start(["orders"], source_count=source_count, node_id=node_id)


@pytest.mark.parametrize("filters", ["created", "created,updated", ""])
def test_start_refuses_string_filters(consumer: ClientBalanceConsumer, filters: str) -> None:
    """A filter set given as one string (not a set of values) raises ConfigError."""
    with pytest.raises(ConfigError, match="must be a set of strings"):
        consumer.start({"orders": filters}, source_count=2, node_id=0)  # type: ignore[dict-item]


def test_start_refuses_more_than_500_filters(consumer: ClientBalanceConsumer) -> None:
    """501 filter values for one topic raise ConfigError; 500 pass the filter check."""
    too_many = {f"v{i}" for i in range(MAX_FILTERS_PER_TOPIC + 1)}
    with pytest.raises(ConfigError, match="has 501 filter values; at most 500"):
        consumer.start({"orders": too_many}, source_count=2, node_id=0)
    # 500 values get past the filter check: the next check (node_id) is the one that fails.
    enough = {f"v{i}" for i in range(MAX_FILTERS_PER_TOPIC)}
    with pytest.raises(ConfigError, match="node_id=5"):
        consumer.start({"orders": enough, "stock": None}, source_count=2, node_id=5)


@pytest.mark.parametrize("value", ["", "   ", "x" * (MAX_FILTER_LENGTH + 1)])
def test_start_refuses_bad_filter_values(consumer: ClientBalanceConsumer, value: str) -> None:
    """A filter value that is blank or longer than 256 characters raises ConfigError."""
    with pytest.raises(ConfigError, match=r"filter value .* is not allowed"):
        consumer.start({"orders": {"created", value}}, source_count=2, node_id=0)


@pytest.mark.parametrize(
    "topics",
    [
        {"orders": {"x" * MAX_FILTER_LENGTH}},
        {"orders": set()},  # an empty set means no filter
        {"orders": None, "stock": frozenset({"a", "b"})},
        ("orders", "stock"),
        [" orders "],  # names are stripped
    ],
)
def test_start_accepts_good_topics(consumer: ClientBalanceConsumer, topics: Any) -> None:
    """Valid topics and filters get past the topic check (the node_id check fails after it)."""
    with pytest.raises(ConfigError, match="node_id=3"):
        consumer.start(topics, source_count=2, node_id=3)


# ------------------------------------------------------------------------ 420 and shutdown
@pytest.mark.parametrize("call", NEEDS_RUNNING.values(), ids=NEEDS_RUNNING.keys())
def test_calls_before_start_raise_not_started(
    consumer: ClientBalanceConsumer, call: Callable[[ClientBalanceConsumer], object]
) -> None:
    """Before start() every call that needs a running consumer raises NotStartedError (420)."""
    with pytest.raises(NotStartedError) as caught:
        call(consumer)
    assert caught.value.code == 420


@pytest.mark.parametrize("call", NEEDS_RUNNING.values(), ids=NEEDS_RUNNING.keys())
def test_calls_after_shutdown_raise_not_started(
    consumer: ClientBalanceConsumer, call: Callable[[ClientBalanceConsumer], object]
) -> None:
    """After shutdown() every call that needs a running consumer raises NotStartedError (420)."""
    consumer.shutdown()
    with pytest.raises(NotStartedError) as caught:
        call(consumer)
    assert caught.value.code == 420


def test_start_after_shutdown_raises_not_started(consumer: ClientBalanceConsumer) -> None:
    """A shut-down consumer is not started again: start() raises 420 before any network call."""
    consumer.shutdown()
    with pytest.raises(NotStartedError, match="create a new one") as caught:
        consumer.start(["orders"], source_count=2, node_id=1)
    assert caught.value.code == 420
    assert (consumer.source_count, consumer.node_id) == (-2, -2)


def test_shutdown_is_idempotent(consumer: ClientBalanceConsumer) -> None:
    """shutdown() may be called any number of times, also by leaving a with block."""
    with consumer as entered:
        assert entered is consumer
        consumer.shutdown()
        consumer.shutdown()
    consumer.shutdown()
    assert consumer.is_shutdown()


def test_batches_outside_running_yield_nothing(consumer: ClientBalanceConsumer) -> None:
    """batches() ends at once before start() and after shutdown()."""
    assert list(consumer.batches(timeout_s=0.01)) == []
    consumer.shutdown()
    assert list(consumer.batches(timeout_s=0.01)) == []


# ------------------------------------------------------------------------ confirm contexts
@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ("1:orders:3:17", (TopicPartition("orders", 3), 17)),
        ("-1:orders:0:1", (TopicPartition("orders", 0), 1)),
        ("12:a.b_c-d:100:0", (TopicPartition("a.b_c-d", 100), 0)),
    ],
)
def test_confirm_context_parses(context: str, expected: tuple[TopicPartition, int]) -> None:
    """A context "<leader>:<topic>:<partition>:<token>" names its partition and token."""
    assert _parse_context(context) == expected


@pytest.mark.parametrize(
    "context",
    [
        "",
        "garbage",
        "orders:3:17",  # no leader
        "1:orders:3",  # no token
        "1:orders:3:17:5",
        "1::3:17",
        "1:orders::17",
        "1:orders:3:",
        ":orders:3:17",
        "x:orders:3:17",
        "1:orders:-3:17",
        "1:orders:3:-17",
        "1:orders:3:+17",
        "1:orders: 3:17",
        "1:orders:3.0:17",
        "1:orders:²:17",  # str.isdigit() says yes, int() says no
        "1:orders:3:٣",  # int() takes other scripts' digits; a context has ASCII ones
        "--1:orders:3:17",
        "-2:orders:3:17",
        None,
        17,
        b"1:orders:3:17",
    ],
)
def test_malformed_confirm_context_raises(context: object) -> None:
    """A context that does not parse raises InvalidConfirmContextError (400) naming it."""
    with pytest.raises(InvalidConfirmContextError, match="malformed") as caught:
        _parse_context(context)
    assert caught.value.code == 400
    assert caught.value.context == context
    assert isinstance(caught.value, ValueError)
