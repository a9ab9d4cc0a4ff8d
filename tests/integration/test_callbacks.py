"""Assignment callbacks: the examples in worker processes, the context, and their failures."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import cast

import pytest

from client_balance import (
    Assigner,
    AssignmentContext,
    CallbackError,
    ClientBalanceConsumer,
    ClientBalanceSettings,
    NoMessageError,
    PartitionKey,
)
from client_balance import admin as cluster
from tests.integration.usecases import UseCaseGroup
from tests.integration.workers import all_records, highs, produce, wait_until

pytestmark = pytest.mark.integration

GroupMaker = Callable[..., UseCaseGroup]


def _expected(bootstrap: str, topics: dict[str, int]) -> set[tuple[str, int, int]]:
    return {
        (topic, p, o)
        for topic, count in topics.items()
        for p, o in all_records(highs(bootstrap, topic, count))
    }


def test_route_by_topic_gives_each_node_its_topic_exactly_once(
    kafka_bootstrap: str, usecase_groups: GroupMaker
) -> None:
    """examples/assigners.py route_by_topic: node 0 reads orders, node 1 stock, each once."""
    suffix = uuid.uuid4().hex[:8]
    orders, stock = f"orders-{suffix}", f"stock-{suffix}"
    cluster.create_topics(kafka_bootstrap, {orders: 3, stock: 2})
    produce(kafka_bootstrap, orders, 300, partitions=3)
    produce(kafka_bootstrap, stock, 200, partitions=2)
    group = usecase_groups(kafka_bootstrap, [orders, stock])
    node0 = group.spawn("node0", 2, 0, "--assigner", "route_by_topic")
    node1 = group.spawn("node1", 2, 1, "--assigner", "route_by_topic")
    expected = _expected(kafka_bootstrap, {orders: 3, stock: 2})
    group.wait_for(lambda: set(group.consumed()) >= expected, 60, "every message consumed")
    assert max(group.consumed().values()) == 1
    assert {topic for topic, _, _ in node0.lines()} == {orders}
    assert {topic for topic, _, _ in node1.lines()} == {stock}
    group.stop([node0, node1])


def test_weight_by_lag_consumes_a_skewed_topic_exactly_once(
    kafka_bootstrap: str, new_topic: Callable[..., str], usecase_groups: GroupMaker
) -> None:
    """examples/assigners.py weight_by_lag: two members share a skewed backlog, each once."""
    topic = new_topic(partitions=4)
    group = usecase_groups(kafka_bootstrap, [topic])
    first = group.spawn("first", -1, 0, "--assigner", "weight_by_lag")
    second = group.spawn("second", -1, 1, "--assigner", "weight_by_lag")
    # The backlog comes once both members run: a member that starts a moment before the other
    # would read all of it before the other's process has even started.
    group.wait_for(
        lambda: all("] started" in w.log_tail() for w in (first, second)), 60, "both started"
    )
    produce(kafka_bootstrap, topic, 300, partitions=4)
    produce(kafka_bootstrap, topic, 900, partitions=1, first=300)  # partition 0 carries most
    expected = _expected(kafka_bootstrap, {topic: 4})
    group.wait_for(lambda: set(group.consumed()) >= expected, 60, "every message consumed")
    assert set(group.consumed()) == expected
    assert max(group.consumed().values()) == 1
    assert first.lines()
    assert second.lines()
    group.stop([first, second])


def test_the_context_shows_partitions_members_pins_and_the_previous_target(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """The context carries watermarks as the broker has them, live members with pins, history."""
    topic = new_topic(partitions=3)
    produce(kafka_bootstrap, topic, 30, partitions=3)
    contexts: list[AssignmentContext] = []

    def remember(context: AssignmentContext) -> list[str]:
        contexts.append(context)
        return [f"{topic}:1"]

    other = make_member()
    other.start([topic], -1, 1, pinned=[f"{topic}:2"])
    consumer = ClientBalanceConsumer(other.settings, assigner=remember)
    with consumer:
        consumer.start([topic], -1, 0)
        wait_until(lambda: len(contexts) >= 2 and len(contexts[-1].members) == 2, 30, "2 rounds")
        context = contexts[-1]
    marks = highs(kafka_bootstrap, topic, 3)
    assert {m.partition: (m.low, m.high) for m in context.partitions.values()} == {
        p: (0, high) for p, high in marks.items()
    }
    views = {member.consumer_id: member for member in context.members}
    assert views[other.consumer_id].pinned == {f"1:{topic}:2"}
    assert set(views[other.consumer_id].held) == {f"1:{topic}:2"}
    assert context.me is not None
    assert context.me.consumer_id == consumer.consumer_id
    assert context.previous_target == {f"1:{topic}:1"}
    assert context.round_number > contexts[0].round_number
    assert context.mode == "manual"


def test_a_raising_callback_keeps_the_group_consuming_and_surfaces_on_the_next_call(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """An assigner that raises keeps its previous target; the error comes from the next call."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 40, partitions=2)
    calls = {"n": 0}

    def flaky(context: AssignmentContext) -> list[str]:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("lookup service down")
        return sorted(context.partitions)

    with ClientBalanceConsumer(kafka_settings(commit="sync"), assigner=flaky) as consumer:
        consumer.start([topic], -1, 0)
        wait_until(lambda: calls["n"] >= 3, 30, "the third call, which raises")
        with pytest.raises(CallbackError) as failed:
            wait_until(lambda: _consumes(consumer), 30, "the error surfaces")
        assert failed.value.callback == "assigner"
        assert "lookup service down" in str(failed.value)
        assert consumer.consumer_id in str(failed.value)
        assert len(consumer.registered_partitions()) == 2  # the previous target stood
        seen: set[tuple[int, int | None]] = set()
        while len(seen) < 40:
            batch = consumer.get_message(timeout_s=30)
            seen.update((batch.partition, m.offset()) for m in batch.messages)
            consumer.confirm(batch.confirm_context)
        wait_until(lambda: calls["n"] > 3, 30, "the thread going on calling it")


def _consumes(consumer: ClientBalanceConsumer) -> bool:
    try:
        batch = consumer.get_message(timeout_s=0.2)
    except NoMessageError:
        return False
    consumer.confirm(batch.confirm_context, consumed=False)
    return False


@pytest.mark.parametrize(
    ("answer", "named"),
    [("nosuchtopic:0", "nosuchtopic:0"), (42, "42"), ("just-a-string", "just-a-string")],
)
def test_an_invalid_answer_keeps_the_previous_target_and_says_what_was_wrong(
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
    answer: object,
    named: str,
) -> None:
    """An unknown partition or a wrong type from the assigner is a CallbackError naming it."""
    topic = new_topic(partitions=2)
    calls = {"n": 0}

    def wrong_later(context: AssignmentContext) -> object:
        calls["n"] += 1
        if calls["n"] == 1:
            return [f"{topic}:0"]
        return [answer] if not isinstance(answer, str) or ":" in answer else answer

    assigner = cast("Assigner", wrong_later)  # answers what no type allows, on purpose
    with ClientBalanceConsumer(kafka_settings(), assigner=assigner) as consumer:
        consumer.start([topic], -1, 0)
        wait_until(lambda: calls["n"] >= 2, 30, "the second, wrong answer")
        with pytest.raises(CallbackError) as failed:
            wait_until(lambda: not consumer.registered_partitions(), 5, "a call that raises")
        assert named in str(failed.value)
        keys = consumer.registered_partitions()
        assert {str(PartitionKey.parse(key).topic_partition) for key in keys} == {f"{topic}:0"}
