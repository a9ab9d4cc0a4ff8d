"""Planning a read without Spark or a broker: ranges, timestamps, data loss, minPartitions."""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import pytest

import client_balance.spark._plan as plan
from client_balance import ConfigError, DataLossError
from client_balance.keys import TopicPartition
from client_balance.spark import SourceOptions, parse_options
from client_balance.spark._split import Range, split_shares

pytestmark = pytest.mark.spark

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
BASE = {"kafka.bootstrap.servers": "h:1", "topics": "t", "group.id": "g"}


def _options(**more: str) -> SourceOptions:
    return parse_options({**BASE, **more})


def test_a_start_below_the_log_start_fails_naming_partition_and_range() -> None:
    """An explicit start under the low watermark raises DataLossError with [start, low)."""
    options = _options(startingOffsets='{"t": {"0": 10}}')
    with pytest.raises(DataLossError) as raised:
        plan.batch_ranges(options, {T0: (40, 100, None), T1: (0, 5, None)})
    error = raised.value
    assert (error.partition, error.lost_from, error.lost_to) == ("t:0", 10, 40)
    assert "t:0" in str(error)
    assert "[10, 40)" in str(error)
    assert "failOnDataLoss=false" in str(error)


def test_a_committed_offset_below_the_log_start_is_data_loss_too() -> None:
    """The group's committed offset under the low watermark raises; no commit starts at low."""
    with pytest.raises(DataLossError, match=r"\[7, 20\)"):
        plan.batch_ranges(_options(), {T0: (20, 30, 7)})
    assert plan.batch_ranges(_options(), {T0: (20, 30, None)}) == {T0: (20, 30)}


def test_the_lost_range_ends_where_the_read_would_end() -> None:
    """An end below the low watermark: only [start, end) was to be read, so that is lost."""
    options = _options(startingOffsets='{"t": {"0": 2}}', endingOffsets='{"t": {"0": 8}}')
    with pytest.raises(DataLossError) as raised:
        plan.batch_ranges(options, {T0: (20, 30, None)})
    assert (raised.value.lost_from, raised.value.lost_to) == (2, 8)


def test_without_fail_on_data_loss_the_read_starts_at_the_log_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """failOnDataLoss=false: the range starts at low and a warning counts the lost messages."""
    options = _options(startingOffsets='{"t": {"0": 10}}', failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="client_balance.spark"):
        ranges = plan.batch_ranges(options, {T0: (40, 100, None), T1: (0, 5, None)})
    assert ranges == {T0: (40, 100), T1: (0, 5)}
    (record,) = [r for r in caplog.records if r.name == "client_balance.spark"]
    assert record.levelno == logging.WARNING
    assert (record.partition, record.lost_messages) == ("t:0", 30)  # type: ignore[attr-defined]


def test_offsets_above_the_end_and_gaps_are_no_loss() -> None:
    """Starts at or above low are clamped into the log as before, without any error."""
    options = _options(startingOffsets='{"t": {"0": 500, "1": 3}}')
    assert plan.batch_ranges(options, {T0: (40, 100, None), T1: (3, 9, None)}) == {
        T0: (100, 100), T1: (3, 9),
    }  # fmt: skip


def test_a_partition_left_out_of_offset_json_starts_earliest_and_ends_latest() -> None:
    """Offset JSON without t:1: t:1 reads from its low to its high watermark, as documented."""
    bounds = {T0: (0, 100, None), T1: (10, 100, None)}
    ending = _options(startingOffsets="earliest", endingOffsets='{"t": {"0": 5}}')
    assert plan.batch_ranges(ending, bounds) == {T0: (0, 5), T1: (10, 100)}
    both = _options(startingOffsets='{"t": {"1": 20}}', endingOffsets='{"t": {"1": 30}}')
    assert plan.batch_ranges(both, bounds) == {T0: (0, 100), T1: (20, 30)}


@pytest.mark.parametrize(
    ("more", "message"),
    [
        ({"startingOffsets": '{"tpyo": {"0": 5}}'},
         "startingOffsets names topic 'tpyo', which the read does not have (it reads t:0-1)"),
        ({"endingOffsets": '{"t": {"0": 5, "7": 9}}'},
         "endingOffsets names partition t:7, which the read does not have (it reads t:0-1)"),
        ({"startingOffsetsByTimestamp": '{"t": {"2": 5}, "u": {}}'},
         "startingOffsetsByTimestamp names topic 'u' and partition t:2, which the read"),
        ({"endingOffsetsByTimestamp": '{"tpyo": {"0": 5}}'},
         "endingOffsetsByTimestamp names topic 'tpyo'"),
    ],
)  # fmt: skip
def test_offset_json_naming_what_the_read_lacks_is_refused_by_name(
    more: dict[str, str], message: str
) -> None:
    """A typo'd topic or an unknown partition in offset JSON names itself and what is read."""
    bounds = {T0: (0, 100, None), T1: (0, 100, None)}
    options = _options(**{"startingOffsets": "earliest", **more})
    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        plan.batch_ranges(options, bounds)
    assert "leave a partition out" in str(raised.value)  # the documented relaxation stays


def test_a_streams_offset_json_is_checked_when_the_query_starts() -> None:
    """stream_starts refuses a partition the read lacks then, as Spark's own source asserts."""
    bounds = {T0: (0, 100, None)}
    with pytest.raises(ConfigError, match=r"startingOffsets names partition t:1"):
        plan.stream_starts(_options(startingOffsets='{"t": {"0": 3, "1": 4}}'), bounds)
    assert plan.stream_starts(_options(startingOffsets='{"t": {"0": 3}}'), bounds) == {T0: 3}


def test_an_end_before_its_start_is_refused_naming_the_partition() -> None:
    """An end below the start (offsets or the group's) is a ConfigError with both offsets."""
    bounds = {T0: (0, 100, 40), T1: (0, 100, None)}
    reversed_json = _options(startingOffsets='{"t": {"0": 10}}', endingOffsets='{"t": {"0": 5}}')
    with pytest.raises(ConfigError, match=r"t:0 would end at offset 5, before its start 10"):
        plan.batch_ranges(reversed_json, bounds)
    behind_the_group = _options(endingOffsets='{"t": {"0": 30}}')  # the group is at 40
    with pytest.raises(ConfigError, match=r"t:0 would end at offset 30, before its start 40"):
        plan.batch_ranges(behind_the_group, bounds)
    # Offsets above the high watermark mean it (a read goes up to it): no error, nothing read.
    above = _options(startingOffsets='{"t": {"0": 500}}', endingOffsets='{"t": {"0": 200}}')
    assert plan.batch_ranges(above, bounds)[T0] == (100, 100)
    same = _options(startingOffsets='{"t": {"0": 10}}', endingOffsets='{"t": {"0": 10}}')
    assert plan.batch_ranges(same, bounds)[T0] == (10, 10)


def test_stream_starts_and_batches_check_for_loss() -> None:
    """A stream's first start and each micro-batch's start below the log start raise."""
    bounds = {T0: (40, 100, 5)}
    with pytest.raises(DataLossError, match="starting the streaming query"):
        plan.stream_starts(_options(), bounds)
    with pytest.raises(DataLossError, match="planning the next micro-batch"):
        plan.stream_bases(_options(), {T0: 30}, bounds)
    lenient = _options(failOnDataLoss="false")
    assert plan.stream_starts(lenient, bounds) == {T0: 40}
    # The task that reads it warns; the planner counts the backlog from the log start.
    assert plan.stream_bases(lenient, {T0: 30}, {**bounds, T1: (0, 5, None)}) == {T0: 40, T1: 0}


def test_timestamps_resolve_through_kafka_and_fall_back_to_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stamp resolves to Kafka's offset, none later resolves to the end; left out: earliest."""
    asked: list[dict[TopicPartition, int]] = []

    def lookup(
        servers: str, group: str, stamps: Mapping[TopicPartition, int], **_: Any
    ) -> dict[TopicPartition, int | None]:
        asked.append(dict(stamps))
        return {tp: 50 if stamp == 1_000 else None for tp, stamp in stamps.items()}

    monkeypatch.setattr(plan, "offsets_for_timestamps", lookup)
    bounds = {T0: (10, 100, None), T1: (0, 60, None), TopicPartition("t", 2): (5, 9, None)}
    options = _options(
        startingOffsetsByTimestamp='{"t": {"0": 1000, "1": 2000}}',
        endingOffsetsByTimestamp='{"t": {"1": 3000}}',
    )
    assert plan.batch_ranges(options, bounds) == {
        T0: (50, 100), T1: (60, 60), TopicPartition("t", 2): (5, 9),
    }  # fmt: skip
    assert asked == [{T0: 1000, T1: 2000}, {T1: 3000}]
    every = plan.batch_ranges(_options(startingTimestamp="1000"), bounds)
    assert every == {T0: (50, 100), T1: (50, 60), TopicPartition("t", 2): (9, 9)}


def test_the_error_strategy_refuses_a_timestamp_no_message_reaches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """startingOffsetsByTimestampStrategy=error: a start with no later message names it."""
    monkeypatch.setattr(plan, "offsets_for_timestamps", lambda *_, **__: {T0: None})
    options = _options(startingTimestamp="1000", startingOffsetsByTimestampStrategy="error")
    with pytest.raises(ConfigError, match=r"t:0 has no message at or after 1000 ms"):
        plan.stream_starts(options, {T0: (0, 10, None)})


def _fake_admin(monkeypatch: pytest.MonkeyPatch, topics: Mapping[str, int]) -> list[dict[str, Any]]:
    """The planner's admin.partition_offsets over ``topics`` (name -> count); calls kept."""
    calls: list[dict[str, Any]] = []

    def partition_offsets(
        servers: str,
        group: str,
        wanted: list[str],
        *,
        skip_missing: bool = False,
        matching: Callable[[str], bool] | None = None,
        **_: Any,
    ) -> dict[TopicPartition, tuple[int, int, int | None]]:
        calls.append({"wanted": wanted, "matching": matching, "skip_missing": skip_missing})
        names = [*wanted, *sorted(filter(matching, topics))] if matching else wanted
        return {
            TopicPartition(name, n): (0, 10, None)
            for name in names if name in topics for n in range(topics[name])
        }  # fmt: skip

    monkeypatch.setattr(plan, "admin", SimpleNamespace(partition_offsets=partition_offsets))
    return calls


def test_assign_reads_exactly_its_partitions_and_names_missing_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The option assign keeps its partitions only; ones the cluster lacks are a ConfigError."""
    _fake_admin(monkeypatch, {"orders": 3, "stock": 1})
    options = parse_options({**_no_topics(), "assign": '{"orders": [2, 0]}'})
    assert sorted(plan.partition_offsets(options)) == [
        TopicPartition("orders", 0), TopicPartition("orders", 2)
    ]  # fmt: skip
    missing = parse_options({**_no_topics(), "assign": '{"orders": [5], "ghost": [0]}'})
    with pytest.raises(ConfigError, match=r"assign names partitions .*: ghost:0, orders:5"):
        plan.partition_offsets(missing)


def _no_topics() -> dict[str, str]:
    return {key: value for key, value in BASE.items() if key != "topics"}


def test_a_pattern_matches_whole_names_and_never_internal_topics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """subscribePattern: fullmatch against the cluster's topics, '__' topics left out."""
    calls = _fake_admin(
        monkeypatch, {"orders-eu": 1, "orders-us": 2, "x-orders-eu": 1, "__orders": 1}
    )
    options = parse_options({**_no_topics(), "subscribePattern": "_*orders-.."})
    assert sorted({tp.topic for tp in plan.partition_offsets(options)}) == [
        "orders-eu", "orders-us"
    ]  # fmt: skip
    assert calls[0]["skip_missing"] is True


def _all_offsets(tasks: list[tuple[int, list[Range]]]) -> list[tuple[str, int, int]]:
    return sorted((t, p, o) for _, ranges in tasks for t, p, a, b in ranges for o in range(a, b))


def test_min_partitions_splits_large_ranges_into_more_tasks() -> None:
    """Two nodes, minPartitions 5: five tasks, node ids kept, every offset exactly once."""
    shares: list[list[Range]] = [[("t", 0, 0, 800)], [("t", 1, 100, 300), ("t", 3, 0, 0)]]
    tasks = split_shares(shares, 5)
    assert len(tasks) == 5
    assert [node for node, _ in tasks] == [0, 0, 0, 0, 1]  # slots follow the sizes: 800 vs 200
    assert _all_offsets(tasks) == _all_offsets(list(enumerate(shares)))
    sizes = [sum(b - a for _, _, a, b in ranges) for _, ranges in tasks]
    assert sizes == [200, 200, 200, 200, 200]


def test_min_partitions_at_most_the_nodes_changes_nothing() -> None:
    """Without minPartitions, or not above the node count: one task per node, as before."""
    shares: list[list[Range]] = [[("t", 0, 0, 10)], []]
    assert split_shares(shares, None) == list(enumerate(shares))
    assert split_shares(shares, 2) == list(enumerate(shares))


def test_min_partitions_keeps_empty_nodes_and_stops_at_one_offset_per_task() -> None:
    """A node without offsets keeps its one empty task; 3 offsets cannot make 10 tasks."""
    tasks = split_shares([[("t", 0, 5, 8)], []], 10)
    assert tasks == [(0, [("t", 0, 5, 6)]), (0, [("t", 0, 6, 7)]), (0, [("t", 0, 7, 8)]), (1, [])]


def test_min_partitions_reads_every_offset_once_for_any_shares() -> None:
    """Random shares and minPartitions: offsets kept exactly, at least minPartitions tasks."""
    generator = random.Random(7)
    for _ in range(300):
        nodes = generator.randint(1, 4)
        shares: list[list[Range]] = [
            [
                ("t", node * 10 + n, start, start + generator.choice([0, 1, 3, 50, 1000]))
                for n in range(generator.randint(0, 3))
                for start in [generator.randint(0, 100)]
            ]
            for node in range(nodes)
        ]
        wanted = generator.randint(1, 30)
        tasks = split_shares(shares, wanted)
        assert _all_offsets(tasks) == _all_offsets(list(enumerate(shares)))
        for node, ranges in tasks:
            assert all(partition // 10 == node for _, partition, _, _ in ranges)
        offsets = len(_all_offsets(tasks))
        busy = [ranges for _, ranges in tasks if any(a < b for _, _, a, b in ranges)]
        if wanted > nodes:
            assert len(busy) >= min(wanted, offsets)


def test_node_partitions_split_with_min_partitions() -> None:
    """Through node_partitions: more Spark tasks than nodes, each with its node's id."""
    options = _options(sourceCount="2", minPartitions="6")
    ranges = {T0: (0, 600), T1: (0, 600)}
    tasks = plan.node_partitions(ranges, options)
    assert len(tasks) == 6
    assert sorted({task.node_id for task in tasks}) == [0, 1]
    read = sorted((p, o) for task in tasks for _, p, a, b in task.ranges for o in range(a, b))
    assert read == [(p, o) for p in (0, 1) for o in range(600)]


def test_max_offsets_per_trigger_never_starves_a_small_backlog() -> None:
    """1,000 behind on t:0 and 1 on t:1 under a cap of 100: t:1's message is in this batch."""
    assert plan.cut({T0: 0, T1: 0}, {T0: 1_000, T1: 1}, 100) == {T0: 99, T1: 1}
    many = {TopicPartition("t", n): 1 for n in range(2, 12)}  # more small ones than the cap
    ends = plan.cut({}, {T0: 1_000, **many}, 5)
    assert all(ends[tp] == 1 for tp in many)  # each rounded up to one, as Spark does


def test_every_backlog_gets_its_share_as_sparks_rate_limit_gives() -> None:
    """Random backlogs: each gets max(1, its floored share); over the cap only by the rounded up."""
    generator = random.Random(11)
    for _ in range(500):
        parts = [TopicPartition("t", n) for n in range(generator.randint(1, 12))]
        first = {tp: generator.randint(0, 50) for tp in parts}
        highs = {tp: first[tp] + generator.choice([0, 1, 2, 5, 100, 10_000]) for tp in parts}
        most = generator.randint(1, 300)
        ends = plan.cut(first, highs, most)
        backlog = {tp: highs[tp] - first[tp] for tp in parts}
        taken = {tp: ends[tp] - first[tp] for tp in parts}
        total = sum(backlog.values())
        assert all(0 <= taken[tp] <= backlog[tp] for tp in parts)
        if total <= most:
            assert ends == highs
            continue
        for tp in parts:
            if backlog[tp]:
                assert taken[tp] >= max(1, most * backlog[tp] // total)
        rounded_up = [tp for tp in parts if 0 < most * backlog[tp] < total]
        assert most <= sum(taken.values()) <= most + len(rounded_up)
