"""Kafka's rack-aware switch (KIP-881) and rack-aware range on hand-made groups.

The range expectations below were checked against Kafka's Java ``RangeAssignor`` (the oracle
of ``tests/conformance``).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from client_balance.keys import TopicPartition
from client_balance.strategies import Member, get_strategy
from client_balance.strategies._racks import (
    NO_RACKS,
    declared_racks,
    rack_matches,
    racks_can_help,
    replica_racks,
    use_rack_aware,
)

T0 = [TopicPartition("t0", p) for p in range(4)]


def _racks(placement: Mapping[str, str]) -> dict[TopicPartition, frozenset[str]]:
    """``{"t0:1": "ab"}`` -> partition t0:1 on racks a and b."""
    result = {}
    for key, racks in placement.items():
        topic, _, number = key.partition(":")
        result[TopicPartition(topic, int(number))] = frozenset(racks)
    return result


def _range(
    topics: dict[str, int], members: list[Member], placement: Mapping[str, str]
) -> dict[str, list[str]]:
    """Range's answer with partitions written as ``"t0:1"``."""
    result = get_strategy("range").assign(topics, members, partition_racks=_racks(placement))
    return {member: [str(tp) for tp in parts] for member, parts in result.items()}


SPLIT = {"t0:0": "a", "t0:1": "a", "t0:2": "b", "t0:3": "b"}


def test_switch_is_off_without_member_racks() -> None:
    """No member rack (None and "" both mean none) means no rack matching."""
    assert not use_rack_aware([None, ""], _racks(SPLIT), T0)
    assert not use_rack_aware([], _racks(SPLIT), T0)


def test_switch_is_off_without_partition_racks() -> None:
    """No rack information for partitions (None or an empty mapping) means no rack matching."""
    assert not use_rack_aware(["a"], None, T0)
    assert not use_rack_aware(["a"], {}, T0)


def test_switch_is_off_when_member_and_partition_racks_are_disjoint() -> None:
    """Members on racks no replica is on cannot be matched, so matching stays off."""
    assert not use_rack_aware(["c", None], _racks(SPLIT), T0)


def test_switch_is_off_when_every_partition_is_on_every_rack() -> None:
    """If every partition has a replica on every rack, matching cannot help."""
    everywhere = {f"t0:{p}": "ab" for p in range(4)}
    assert not use_rack_aware(["a", "b"], _racks(everywhere), T0)


def test_switch_is_on_when_some_partition_is_on_a_subset_of_racks() -> None:
    """One partition missing a rack that others are on turns matching on."""
    assert use_rack_aware(["a"], _racks(SPLIT), T0)
    one_short = {"t0:0": "ab", "t0:1": "ab", "t0:2": "ab", "t0:3": "a"}
    assert use_rack_aware(["b", None], _racks(one_short), T0)


def test_switch_counts_a_partition_without_racks_as_a_subset() -> None:
    """A partition left out of the mapping has no racks, which differs from the others' racks."""
    assert use_rack_aware(["a"], _racks({"t0:0": "a", "t0:1": "a", "t0:2": "a"}), T0)


def test_switch_is_off_without_partitions() -> None:
    """Nothing to assign means nothing to match."""
    assert not use_rack_aware(["a"], _racks(SPLIT), [])
    assert not racks_can_help(frozenset("a"), [])


def test_rack_helpers() -> None:
    """Member racks drop None and ""; a missing partition has no racks; rackless members match."""
    assert declared_racks(["b", None, "", "a", "b"]) == frozenset({"a", "b"})
    assert replica_racks(None, T0[0]) == NO_RACKS
    assert replica_racks(_racks(SPLIT), TopicPartition("t9", 0)) == NO_RACKS
    assert replica_racks(_racks(SPLIT), T0[2]) == frozenset("b")
    assert rack_matches(None, NO_RACKS)
    assert rack_matches("", frozenset("a"))
    assert rack_matches("a", frozenset("ab"))
    assert not rack_matches("c", frozenset("ab"))


def test_range_gives_each_member_the_partitions_on_its_rack() -> None:
    """One topic split over two racks goes to the member on each rack, not in plain ranges."""
    members = [Member("C0", ["t0"], rack="b"), Member("C1", ["t0"], rack="a")]
    assert _range({"t0": 4}, members, SPLIT) == {
        "C0": ["t0:2", "t0:3"],
        "C1": ["t0:0", "t0:1"],
    }


def test_range_docstring_rack_example() -> None:
    """The rack table of RangeStrategy's docstring: co-partitioned topics follow the racks."""
    members = [Member("C0", ["t0", "t1"], rack="b"), Member("C1", ["t0", "t1"], rack="a")]
    placement = {f"{t}:{p}": "a" if p == 0 else "b" for t in ("t0", "t1") for p in range(3)}
    assert _range({"t0": 3, "t1": 3}, members, placement) == {
        "C0": ["t0:1", "t0:2", "t1:1", "t1:2"],
        "C1": ["t0:0", "t1:0"],
    }


def test_range_keeps_co_partitioning_over_rack_alignment() -> None:
    """When no member's rack holds partition p of both topics, both still go to one member."""
    members = [Member("C0", ["t0", "t1"], rack="a"), Member("C1", ["t0", "t1"], rack="b")]
    crossed = {"t0:0": "a", "t0:1": "b", "t1:0": "b", "t1:1": "a"}
    assert _range({"t0": 2, "t1": 2}, members, crossed) == {
        "C0": ["t0:0", "t1:0"],
        "C1": ["t0:1", "t1:1"],
    }


def test_range_matches_co_partitioned_topics_once_any_topic_turns_the_switch_on() -> None:
    """Co-partitioned topics on every rack are still rack-matched when another topic needs it."""
    members = [
        Member("C0", ["t0", "t1", "t2"], rack="c"),
        Member("C1", ["t0", "t1", "t2"], rack="a"),
    ]
    placement = {f"{t}:{p}": "ab" for t in ("t0", "t1") for p in range(4)}
    placement |= {"t2:0": "a", "t2:1": "b"}
    assert _range({"t0": 4, "t1": 4, "t2": 2}, members, placement) == {
        "C0": ["t0:2", "t0:3", "t1:2", "t1:3", "t2:1"],
        "C1": ["t0:0", "t0:1", "t1:0", "t1:1", "t2:0"],
    }


def test_range_member_without_rack_takes_the_lowest_free_partitions_first() -> None:
    """A rackless member earlier in order takes its range first, even partitions on other racks."""
    members = [Member("C0", ["t0"]), Member("C1", ["t0"], rack="a")]
    assert _range({"t0": 4}, members, SPLIT) == {
        "C0": ["t0:0", "t0:1"],
        "C1": ["t0:2", "t0:3"],
    }


@pytest.mark.parametrize(
    ("member_racks", "placement"),
    [
        (("a", "b"), {f"t0:{p}": "ab" for p in range(4)}),  # every partition on every rack
        (("c", "d"), SPLIT),  # members on racks no replica is on
        ((None, None), SPLIT),  # members without racks
    ],
)
def test_range_is_plain_when_the_switch_is_off(
    member_racks: tuple[str | None, str | None], placement: dict[str, str]
) -> None:
    """With the switch off, racks change nothing: the plain contiguous ranges."""
    members = [
        Member("C0", ["t0"], rack=member_racks[0]),
        Member("C1", ["t0"], rack=member_racks[1]),
    ]
    assert _range({"t0": 4}, members, placement) == {
        "C0": ["t0:0", "t0:1"],
        "C1": ["t0:2", "t0:3"],
    }


def test_range_keeps_per_topic_balance_with_racks() -> None:
    """All partitions on one rack still split n / n+1: rack alignment never breaks balance."""
    members = [Member(f"C{i}", ["t0"], rack="a" if i == 2 else "b") for i in range(3)]
    placement = {f"t0:{p}": "a" for p in range(5)} | {"t0:5": "b"}
    assert _range({"t0": 6}, members, placement) == {
        "C0": ["t0:2", "t0:5"],
        "C1": ["t0:3", "t0:4"],
        "C2": ["t0:0", "t0:1"],
    }


def test_range_switch_looks_only_at_each_topic_subscribers() -> None:
    """A topic whose subscribers have no rack never turns rack matching on for other topics."""
    members = [
        Member("C0", ["t0", "t1"], rack="c"),
        Member("C1", ["t0", "t1"], rack="a"),
        Member("C2", ["t2"]),
    ]
    placement = {f"{t}:{p}": "ab" for t in ("t0", "t1") for p in range(4)}
    placement |= {"t2:0": "a", "t2:1": "b"}
    assert _range({"t0": 4, "t1": 4, "t2": 2}, members, placement) == {
        "C0": ["t0:0", "t0:1", "t1:0", "t1:1"],
        "C1": ["t0:2", "t0:3", "t1:2", "t1:3"],
        "C2": ["t2:0", "t2:1"],
    }
