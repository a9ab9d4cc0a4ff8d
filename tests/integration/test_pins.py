"""Pins as a group fact: published in reports, honoured by every other member, in every mode.

The group tests run worker processes (tests/integration/usecase_worker.py); the conflict and
runtime tests run consumers in this process, on the session's real broker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from client_balance import (
    ClientBalanceConsumer,
    PartitionNotFoundError,
    PartitionOccupiedError,
    PinConflictError,
    TooFrequentError,
)
from client_balance._kafka import read_starts
from client_balance.admin import GroupView
from client_balance.consumer import _starts
from client_balance.strategies import get_strategy
from client_balance.strategies._nodes import node_share
from tests.integration.usecases import UseCaseGroup
from tests.integration.workers import all_records, highs, produce, wait_until

pytestmark = pytest.mark.integration

GroupMaker = Callable[..., UseCaseGroup]


def _in_share_of(node_id: int, topic: str, partitions: int, source_count: int) -> int:
    """A partition that the default strategy (modulo) gives to ``node_id``."""
    share = node_share(get_strategy("modulo"), {topic: partitions}, source_count, node_id)
    return min(tp.partition for tp in share)


def _exactly_once(group: UseCaseGroup, bootstrap: str, topic: str, partitions: int) -> None:
    expected = {(topic, p, o) for p, o in all_records(highs(bootstrap, topic, partitions))}
    group.wait_for(lambda: set(group.consumed()) >= expected, 60, "every message consumed")
    consumed = group.consumed()
    assert set(consumed) == expected
    assert [line for line, times in consumed.items() if times > 1] == []


def test_a_pin_is_honoured_by_the_other_nodes_in_node_mode(
    kafka_bootstrap: str, new_topic: Callable[..., str], usecase_groups: GroupMaker
) -> None:
    """Node 1 pins a partition of node 0's share: node 1 consumes all of it, node 0 none."""
    topic = new_topic(partitions=4)
    pinned = _in_share_of(0, topic, 4, 2)
    group = usecase_groups(kafka_bootstrap, [topic])
    node1 = group.spawn("node1", 2, 1, "--pin", f"{topic}:{pinned}")
    group.wait_for(lambda: len(node1.held()) == 3, 30, "node 1 holds its share and its pin")
    node0 = group.spawn("node0", 2, 0)
    group.wait_for(lambda: len(node0.held()) == 1, 30, "node 0 holds its share less the pin")
    produce(kafka_bootstrap, topic, 400, partitions=4)
    _exactly_once(group, kafka_bootstrap, topic, 4)
    assert f"{topic}:{pinned}" in node1.held()
    assert f"{topic}:{pinned}" not in node0.held()
    assert len([line for line in node1.lines() if line[1] == pinned]) == 100
    assert [line for line in node0.lines() if line[1] == pinned] == []
    group.stop([node0, node1])


def test_a_pin_is_honoured_by_the_other_members_in_elastic_mode(
    kafka_bootstrap: str, new_topic: Callable[..., str], usecase_groups: GroupMaker
) -> None:
    """An elastic member that pins a partition holds it; the sticky share of the other skips it."""
    topic = new_topic(partitions=4)
    produce(kafka_bootstrap, topic, 400, partitions=4)
    group = usecase_groups(kafka_bootstrap, [topic])
    first = group.spawn("first", -1, -1, "--mode", "elastic")
    group.wait_for(lambda: len(first.held()) == 4, 30, "the first member holds everything")
    second = group.spawn("second", -1, -1, "--mode", "elastic", "--pin", f"{topic}:0")
    group.wait_for(
        lambda: f"{topic}:0" in second.held() and f"{topic}:0" not in first.held(),
        30,
        "the pinned partition moved to the member that pinned it",
    )
    _exactly_once(group, kafka_bootstrap, topic, 4)
    group.wait_for(lambda: len(first.held() | second.held()) == 4, 30, "everything held")
    assert first.held() & second.held() == set()
    group.stop([first, second])


def test_a_pinned_partition_is_reassigned_after_its_member_dies(
    kafka_bootstrap: str, new_topic: Callable[..., str], usecase_groups: GroupMaker
) -> None:
    """SIGKILL the pinning node: after its lease the strategy's owner takes the partition back."""
    topic = new_topic(partitions=4)
    produce(kafka_bootstrap, topic, 200, partitions=4)
    pinned = _in_share_of(0, topic, 4, 2)
    group = usecase_groups(kafka_bootstrap, [topic])
    node0 = group.spawn("node0", 2, 0)
    node1 = group.spawn("node1", 2, 1, "--pin", f"{topic}:{pinned}")
    group.wait_for(lambda: f"{topic}:{pinned}" in node1.held(), 30, "node 1 holds its pin")
    group.kill(node1)
    group.wait_for(lambda: f"{topic}:{pinned}" in node0.held(), 30, "node 0 takes it back")
    produce(kafka_bootstrap, topic, 200, partitions=4, first=200)
    high = highs(kafka_bootstrap, topic, 4)[pinned]
    group.wait_for(
        lambda: {o for t, p, o in node0.lines() if p == pinned} >= set(range(200 // 4, high)),
        30,
        "node 0 consumes what arrives on the partition after the pin's member died",
    )
    group.stop([node0])


def test_pinning_a_partition_another_live_member_pinned_raises_at_once(
    new_topic: Callable[..., str], make_member: Callable[..., ClientBalanceConsumer]
) -> None:
    """start(pinned=), pin() and connect() of another member's pin raise naming that member."""
    topic = new_topic(partitions=2)
    first, second, third = make_member(), make_member(), make_member()
    first.start([topic], -1, 0, pinned=[f"{topic}:0"])
    with pytest.raises(PinConflictError) as at_start:
        second.start([topic], -1, 1, pinned={f"{topic}:0": 5})
    assert at_start.value.holder == first.consumer_id
    assert first.consumer_id in str(at_start.value)
    assert at_start.value.code == 410
    third.start([topic], -1, 2)
    first.pin(f"{topic}:1")
    wait_until(
        lambda: (
            f"1:{topic}:1" in first.registered_partitions()
            and _pins_of(first) == (f"{topic}:0", f"{topic}:1")
        ),
        15,
        "the first member holds and publishes its second pin",
    )
    wait_until(lambda: _refused_as_pinned(third, f"{topic}:1"), 15, "the pin reached the third")
    with pytest.raises(PinConflictError) as at_runtime:
        third.pin([f"{topic}:1"])
    assert at_runtime.value.holder == first.consumer_id


def _pins_of(consumer: ClientBalanceConsumer) -> tuple[str, ...]:
    """The pins the operator's view shows for ``consumer``."""
    view = GroupView.load(consumer.settings)
    return {member.consumer_id: member.pinned for member in view.members}[consumer.consumer_id]


def _refused_as_pinned(consumer: ClientBalanceConsumer, key: str) -> bool:
    """Whether ``connect(key)`` is refused for a pin (not yet seen: refused as held, 410/421)."""
    try:
        consumer.connect(key)
    except PinConflictError:
        return True
    except (PartitionOccupiedError, TooFrequentError):
        return False
    pytest.fail(f"{key} was registered although another member holds it")


def test_pin_at_runtime_moves_one_partition_and_unpin_gives_it_back(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """pin() takes a partition of another node's share at an offset; unpin() returns it."""
    topic = new_topic(partitions=4)
    produce(kafka_bootstrap, topic, 80, partitions=4)
    pinned = _in_share_of(0, topic, 4, 2)
    node0, node1 = make_member(commit="sync"), make_member(commit="sync")
    node0.start([topic], 2, 0)
    node1.start([topic], 2, 1)
    wait_until(
        lambda: len(node0.registered_partitions()) == len(node1.registered_partitions()) == 2,
        30,
        "each node holds its share",
    )
    share1 = {key.split(":", 1)[1] for key in node1.registered_partitions()}
    node1.pin(f"{topic}:{pinned}", offset=12)
    wait_until(
        lambda: f"{topic}:{pinned}" in {k.split(":", 1)[1] for k in node1.registered_partitions()},
        30,
        "node 1 holds the pinned partition",
    )
    assert f"{topic}:{pinned}" not in {k.split(":", 1)[1] for k in node0.registered_partitions()}
    assert len(node0.registered_partitions()) == 1  # one partition moved, nothing else
    starts: dict[int, int] = {}
    while pinned not in starts:
        batch = node1.get_message(timeout_s=30)
        starts.setdefault(batch.partition, batch.start_offset)
        node1.confirm(batch.confirm_context)
    assert starts[pinned] == 12
    node1.unpin(f"{topic}:{pinned}")
    wait_until(lambda: len(node0.registered_partitions()) == 2, 30, "node 0 has it back")
    assert {k.split(":", 1)[1] for k in node1.registered_partitions()} == share1


def test_a_pinned_offset_survives_a_first_round_that_could_not_read_the_start(
    make_consumer: Callable[..., ClientBalanceConsumer],
    new_topic: Callable[..., str],
    kafka_bootstrap: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pinned at 0, the start unreadable once (a leader move): the next round starts at 0."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 10, partitions=1)
    unreadable_once = [True]

    def leader_moved_once(*args: Any, **kwargs: Any) -> Any:
        ranges, committed = read_starts(*args, **kwargs)
        if kwargs.get("skip_unreadable") and unreadable_once:
            unreadable_once.clear()
            return {}, committed  # as read_starts leaves out a partition answering NOT_LEADER
        return ranges, committed

    monkeypatch.setattr(_starts, "read_starts", leader_moved_once)
    consumer = make_consumer(start_position="latest")
    consumer.start([topic], -1, -1, pinned={f"{topic}:0": 0})
    result = consumer.get_message(timeout_s=30)
    assert not unreadable_once  # the first round did leave the partition out
    assert (result.key, result.start_offset) == (f"1:{topic}:0", 0)
    consumer.confirm(result.confirm_context, True)


def test_start_with_a_pin_outside_the_topic_raises_404_and_leaves_the_group(
    make_consumer: Callable[..., ClientBalanceConsumer], new_topic: Callable[..., str]
) -> None:
    """start(pinned=topic:7) on a 2-partition topic: 404 naming it, no member left behind."""
    topic = new_topic(partitions=2)
    consumer = make_consumer()
    with pytest.raises(PartitionNotFoundError, match=f"cannot pin {topic}:7") as raised:
        consumer.start([topic], -1, -1, pinned={f"{topic}:7": 0})
    assert (raised.value.code, raised.value.key) == (404, f"{topic}:7")
    group = consumer.settings.group_id
    assert GroupView.load(consumer.settings, group).live_members == ()
