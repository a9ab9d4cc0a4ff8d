"""A strategy of the user's own, by name, in consumers against the real broker.

The rules are in ``tests/custom_rules.py``: registered in this process with
``register_strategy``, or named ``tests.custom_rules:<rule>`` so that worker processes import
them. The Spark source's use of them is in ``tests/spark/test_source.py``.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from client_balance import ClientBalanceConsumer, NoMessageError
from client_balance.strategies import Member, get_strategy, register_strategy, unregister_strategy
from tests.custom_rules import by_topic
from tests.integration.conftest import GroupFactory
from tests.integration.consumer_worker import read_held
from tests.integration.workers import all_records, highs, produce, wait_until

pytestmark = pytest.mark.integration

Read = tuple[str, int, int]
"""(topic, partition, offset) of a consumed message."""


@pytest.fixture
def by_topic_name() -> Iterator[str]:
    """``by_topic`` registered as ``"by-topic"`` in this process for the test."""
    register_strategy("by-topic", by_topic)
    yield "by-topic"
    unregister_strategy("by-topic")


def consume(
    consumers: list[ClientBalanceConsumer], total: int, timeout_s: float
) -> list[set[Read]]:
    """What each consumer reads (confirming every batch) until together they read ``total``."""
    read: list[set[Read]] = [set() for _ in consumers]
    deadline = time.monotonic() + timeout_s
    while sum(map(len, read)) < total:
        assert time.monotonic() < deadline, f"read {sum(map(len, read))} of {total} messages"
        for consumer, seen in zip(consumers, read, strict=True):
            try:
                batch = consumer.get_message(timeout_s=0.2)
            except NoMessageError:
                continue
            seen.update((m.topic() or "", m.partition() or 0, m.offset() or 0)
                        for m in batch.messages)  # fmt: skip
            consumer.confirm(batch.confirm_context)
    return read


@pytest.mark.timeout(120)
def test_two_nodes_read_what_a_registered_rule_gives_them(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
    by_topic_name: str,
) -> None:
    """Node mode with a registered rule: node 0 reads all of the first topic, node 1 the second."""
    counts = {new_topic(partitions=3): 3, new_topic(partitions=2): 2}
    first, second = sorted(counts)  # by_topic goes by name: "t-...-10-..." before "t-...-9-..."
    for topic, partitions in counts.items():
        produce(kafka_bootstrap, topic, 100 * partitions, partitions=partitions)
    group = f"custom-{uuid.uuid4().hex[:8]}"
    nodes = [make_consumer(group_id=group, strategy=by_topic_name) for _ in range(2)]
    for node_id, node in enumerate(nodes):
        node.start([first, second], source_count=2, node_id=node_id)

    read = consume(nodes, 500, timeout_s=60)

    assert {topic for topic, _, _ in read[0]} == {first}
    assert {topic for topic, _, _ in read[1]} == {second}
    for node_id, (topic, seen) in enumerate(zip((first, second), read, strict=True)):
        expected = all_records(highs(kafka_bootstrap, topic, counts[topic]))
        assert {(p, o) for _, p, o in seen} == expected
        held = {f"1:{topic}:{p}" for p in range(counts[topic])}
        assert nodes[node_id].registered_partitions() == held


@pytest.mark.timeout(120)
def test_an_elastic_group_places_its_members_by_a_registered_rule(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
    by_topic_name: str,
) -> None:
    """Two elastic members with a registered rule settle on one whole topic each."""
    counts = {new_topic(partitions=2): 2, new_topic(partitions=3): 3}
    group = f"custom-elastic-{uuid.uuid4().hex[:8]}"
    members = [make_member(group_id=group, strategy=by_topic_name) for _ in range(2)]
    for member in members:
        member.start(sorted(counts), mode="elastic")
    # What the rule gives these two members (their ids are random: it decides who gets which).
    answer = get_strategy(by_topic_name).assign(
        counts, [Member(m.consumer_id, counts) for m in members]
    )
    expected = [{f"1:{tp.topic}:{tp.partition}" for tp in answer[m.consumer_id]} for m in members]
    assert sorted(map(len, expected)) == [2, 3]

    wait_until(
        lambda: [m.registered_partitions() for m in members] == expected,
        timeout_s=60,
        what=f"the members hold what by-topic gives them: {expected}",
        poll_s=0.2,
    )


@pytest.mark.timeout(120)
def test_worker_processes_find_a_rule_by_its_reference(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    groups: GroupFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Worker processes given strategy=module:attr import the rule and read exactly its shares."""
    # The workers build their settings from keyword arguments and the environment.
    monkeypatch.setenv("CLIENT_BALANCE_STRATEGY", "tests.custom_rules:reversed_range")
    topic = new_topic(partitions=4)
    produce(kafka_bootstrap, topic, 4_000, partitions=4)
    group = groups(kafka_bootstrap, topic, 2)
    nodes = group.spawn_all("--stop-after-idle-s", "2")
    group.wait_for_lines(nodes, 4_000, timeout_s=60)
    group.wait_exit(nodes)

    # reversed_range: the last node takes the first run of partitions, unlike every built-in.
    assert [read_held(node.out)[1] for node in nodes] == [{2, 3}, {0, 1}]
    counts = Counter(record for node in nodes for record in node.records())
    assert set(counts) == all_records(highs(kafka_bootstrap, topic, 4))
    assert max(counts.values()) == 1
