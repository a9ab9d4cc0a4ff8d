"""Differential tests: our strategies against Kafka's Java assignors on random, seeded groups.

A few hundred cases per strategy run in ``make test``; ``-m slow`` runs thousands. A failure
prints the seed and the case, so it can be replayed by hand.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from client_balance.keys import TopicPartition
from client_balance.strategies import Member, get_strategy
from tests.conformance.oracle import JavaOracle

# Strategies whose answer never depends on Java's hash-map order: identical results required.
EXACT = ["range", "roundrobin"]


@pytest.fixture(scope="module")
def oracle() -> Iterator[JavaOracle]:
    """One JVM for the module."""
    with JavaOracle() as java:
        yield java


def random_case(rng: random.Random, strategy: str, case_id: str) -> dict[str, Any]:
    """A group with uneven topics, unequal subscriptions and some static members."""
    topic_names = [f"t{i}" for i in range(rng.randint(1, 6))]
    topics = {name: rng.randint(0, 30) for name in topic_names}
    member_ids = rng.sample(
        [f"consumer{i}" for i in range(40)] + [f"m-{i}" for i in range(10)], rng.randint(1, 12)
    )
    equal = rng.random() < 0.5
    shared = rng.sample(topic_names, rng.randint(1, len(topic_names)))
    members = []
    for member_id in member_ids:
        subscribed = shared if equal else rng.sample(topic_names, rng.randint(1, len(topic_names)))
        static = rng.random() < 0.25
        members.append({
            "id": member_id, "topics": sorted(subscribed),
            "instance_id": f"inst-{rng.randint(0, 99):02d}-{member_id}" if static else None,
        })  # fmt: skip
    return {"id": case_id, "strategy": strategy, "topics": topics, "members": members}


def ours(case: dict[str, Any]) -> dict[str, list[list[Any]]]:
    """Our answer in the oracle's output shape."""
    members = [
        Member(m["id"], m["topics"], instance_id=m.get("instance_id")) for m in case["members"]
    ]
    result = get_strategy(case["strategy"]).assign(case["topics"], members)
    return {member: [[tp.topic, tp.partition] for tp in parts] for member, parts in result.items()}


def java_answer(answer: dict[str, Any]) -> dict[str, list[list[Any]]]:
    """An oracle answer (which must not be an error) with each member's list sorted."""
    assert "error" not in answer, answer
    return {
        member: sorted([[t, p] for t, p in parts], key=lambda tp: TopicPartition(tp[0], tp[1]))
        for member, parts in answer["assignment"].items()
    }


def _compare(oracle: JavaOracle, strategy: str, seed: int, count: int) -> None:
    rng = random.Random(seed)
    cases = [random_case(rng, strategy, f"{strategy}-{seed}-{i}") for i in range(count)]
    for case, answer in zip(cases, oracle.assign(cases), strict=True):
        assert ours(case) == java_answer(answer), f"seed {seed}, case {case}"


@pytest.mark.parametrize("strategy", EXACT)
def test_identical_to_java(oracle: JavaOracle, strategy: str) -> None:
    """300 random groups per strategy give exactly Java's assignment."""
    _compare(oracle, strategy, seed=20261121, count=300)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", EXACT)
@pytest.mark.parametrize("seed", range(10))
def test_identical_to_java_many(oracle: JavaOracle, strategy: str, seed: int) -> None:
    """Thousands of random groups per strategy give exactly Java's assignment."""
    _compare(oracle, strategy, seed=seed, count=1000)
