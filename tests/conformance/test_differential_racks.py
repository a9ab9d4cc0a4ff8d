"""Differential tests of rack-aware range (KIP-881) against Kafka's Java ``RangeAssignor``.

Random, seeded groups with member racks (some members without one) and replica racks placed
the way Kafka's own tests place them (``k`` brokers on racks, replication factor ``rf``, replica
``j`` of partition ``i`` on broker ``(i + j + offset) % k``) or drawn at random, with
co-partitioned topic groups, static members and unequal subscriptions. ~300 cases run by
default, thousands with ``-m slow``; a failure prints the seed and the case.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from client_balance.keys import TopicPartition
from client_balance.strategies import Member, get_strategy
from tests.conformance.oracle import JavaOracle
from tests.conformance.test_differential import java_answer

RACK_NAMES = ["rack-a", "rack-b", "rack-c", "rack-d"]


@pytest.fixture(scope="module")
def oracle() -> Iterator[JavaOracle]:
    """One JVM for the module."""
    with JavaOracle() as java:
        yield java


def _topics(rng: random.Random) -> dict[str, int]:
    """Topics whose counts repeat often, so that co-partitioned groups are common."""
    counts = [rng.randint(1, 16) for _ in range(rng.randint(1, 3))]
    names = [f"t{i}" for i in range(rng.randint(1, 7))]
    # A few topics of 0 partitions: subscribed but never assigned.
    return {name: (0 if rng.random() < 0.05 else rng.choice(counts)) for name in names}


def _subscriptions(rng: random.Random, topic_names: list[str], size: int) -> list[list[str]]:
    """Either everybody subscribes the same, or members pick from a few shared patterns."""
    patterns = [
        sorted(rng.sample(topic_names, rng.randint(1, len(topic_names))))
        for _ in range(1 if rng.random() < 0.4 else rng.randint(2, 3))
    ]
    if rng.random() < 0.2:  # a member with a subscription of its own
        patterns.append(sorted(rng.sample(topic_names, 1)))
    return [rng.choice(patterns) for _ in range(size)]


def _broker_racks(rng: random.Random, topics: dict[str, int], racks: list[str]) -> dict[str, Any]:
    """Replica racks as Kafka's tests build them (``AbstractPartitionAssignorTest``)."""
    brokers = rng.randint(2, 6)
    broker_racks = [racks[i % len(racks)] for i in range(brokers)]
    if rng.random() < 0.3:
        rng.shuffle(broker_racks)
    replication = rng.randint(1, brokers)
    placement: dict[str, Any] = {}
    offset = 0
    for topic, count in topics.items():  # topics in insertion order, as the Java tests walk them
        for i in range(count):
            replicas = {broker_racks[(i + j + offset) % brokers] for j in range(replication)}
            placement[f"{topic}:{i}"] = sorted(replicas)
        offset += count
    return placement


def _random_racks(rng: random.Random, topics: dict[str, int], racks: list[str]) -> dict[str, Any]:
    """Fully random replica racks; some partitions have none, some are left out of the map."""
    placement: dict[str, Any] = {}
    for topic, count in topics.items():
        for i in range(count):
            roll = rng.random()
            if roll < 0.05:
                continue
            chosen = [] if roll < 0.1 else rng.sample(racks, rng.randint(1, len(racks)))
            placement[f"{topic}:{i}"] = sorted(chosen)
    return placement


def _mixed_racks(rng: random.Random, topics: dict[str, int], racks: list[str]) -> dict[str, Any]:
    """Per topic: random racks, every partition on every rack, or no racks at all.

    Topics on every rack need no matching themselves, yet Kafka still matches them when
    co-partitioned and another topic turns the switch on.
    """
    placement: dict[str, Any] = {}
    for topic, count in topics.items():
        mode = rng.choice(["random", "everywhere", "everywhere", "none"])
        if mode == "random":
            placement |= _random_racks(rng, {topic: count}, racks)
        elif mode == "everywhere":
            placement |= {f"{topic}:{i}": list(racks) for i in range(count)}
    return placement


def random_rack_case(rng: random.Random, case_id: str) -> dict[str, Any]:
    """A range group with member racks and partition replica racks."""
    topics = _topics(rng)
    racks = RACK_NAMES[: rng.choice([1, 2, 2, 3, 3, 4])]
    member_ids = rng.sample(
        [f"consumer{i}" for i in range(40)] + [f"m-{i}" for i in range(10)], rng.randint(1, 10)
    )
    member_rack_choices = [*racks, None, ""]  # Kafka, like Member, takes "" for no rack
    if rng.random() < 0.1:  # members on a rack no replica is on: the switch stays off
        member_rack_choices.append("rack-elsewhere")
    # Per subscription pattern, the share of members without a rack: some topics then have
    # only rackless subscribers while others have racked ones.
    no_rack_share: dict[tuple[str, ...], float] = {}
    members = []
    for member_id, subscribed in zip(
        member_ids, _subscriptions(rng, list(topics), len(member_ids)), strict=True
    ):
        static = rng.random() < 0.25
        share = no_rack_share.setdefault(tuple(subscribed), rng.choice([0.0, 0.0, 0.2, 0.5, 1.0]))
        rack = None if rng.random() < share else rng.choice(member_rack_choices)
        members.append({
            "id": member_id, "topics": subscribed, "rack": rack,
            "instance_id": f"inst-{rng.randint(0, 99):02d}-{member_id}" if static else None,
        })  # fmt: skip
    case: dict[str, Any] = {
        "id": case_id, "strategy": "range", "topics": topics, "members": members,
    }  # fmt: skip
    placement = rng.random()
    if placement < 0.45:
        case["partition_racks"] = _broker_racks(rng, topics, racks)
    elif placement < 0.7:
        case["partition_racks"] = _random_racks(rng, topics, racks)
    elif placement < 0.95:
        case["partition_racks"] = _mixed_racks(rng, topics, racks)
    # else: members have racks, partitions none (no partition_racks at all)
    return case


def _member(spec: dict[str, Any]) -> Member:
    return Member(spec["id"], spec["topics"], rack=spec["rack"], instance_id=spec["instance_id"])


def ours(case: dict[str, Any], *, with_racks: bool = True) -> dict[str, list[list[Any]]]:
    """Our answer in the oracle's output shape."""
    members = [_member(spec) for spec in case["members"]]
    placement = case.get("partition_racks")
    partition_racks = None
    if with_racks and placement is not None:
        partition_racks = {}
        for key, racks in placement.items():
            topic, _, number = key.rpartition(":")
            partition_racks[TopicPartition(topic, int(number))] = frozenset(racks)
    result = get_strategy("range").assign(case["topics"], members, partition_racks=partition_racks)
    return {member: [[tp.topic, tp.partition] for tp in parts] for member, parts in result.items()}


def _cases(seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [random_rack_case(rng, f"racks-{seed}-{i}") for i in range(count)]


def _compare(oracle: JavaOracle, seed: int, count: int) -> None:
    cases = _cases(seed, count)
    for case, answer in zip(cases, oracle.assign(cases), strict=True):
        assert ours(case) == java_answer(answer), f"seed {seed}, case {case}"


def test_rack_aware_range_identical_to_java(oracle: JavaOracle) -> None:
    """300 random rack-aware groups give exactly Java's RangeAssignor assignment."""
    _compare(oracle, seed=20261122, count=300)


def test_cases_exercise_rack_matching() -> None:
    """Many generated cases move partitions for racks, so the comparison covers the rack path."""
    cases = _cases(20261122, 300)
    moved = sum(ours(case) != ours(case, with_racks=False) for case in cases)
    assert moved >= 60, f"only {moved} of 300 cases differ from the rackless answer"


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_rack_aware_range_identical_to_java_many(oracle: JavaOracle, seed: int) -> None:
    """Thousands of random rack-aware groups give exactly Java's RangeAssignor assignment."""
    _compare(oracle, seed=seed, count=1000)
