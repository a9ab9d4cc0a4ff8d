"""Sticky shortcuts give what the step-by-step rules give: blocks, fresh deals, left-overs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from client_balance.keys import TopicPartition
from client_balance.strategies import Member
from client_balance.strategies._base import all_partitions
from client_balance.strategies._sticky_constrained import assign_constrained
from client_balance.strategies._sticky_fill import fill_least_loaded
from client_balance.strategies._sticky_fresh import _dealt, assign_fresh
from client_balance.strategies._sticky_general import _unassigned
from client_balance.strategies._sticky_group import StickyGroup, member_id_key


def one_at_a_time(
    run: list[TopicPartition], subscribers: list[str], loads: dict[str, int]
) -> dict[str, list[TopicPartition]]:
    """Kafka's rule as written: each partition to the first subscriber by (load, id)."""
    given_to: dict[str, list[TopicPartition]] = {member: [] for member in subscribers}
    load = dict(loads)
    for partition in run:
        member = min(subscribers, key=lambda m: (load[m], member_id_key(m)))
        given_to[member].append(partition)
        load[member] += 1
    return given_to


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.text("ABab9é", min_size=1, max_size=3), st.integers(0, 12), min_size=1, max_size=12
    ),
    st.integers(0, 80),
    st.integers(0, 3),
)
def test_blocks_equal_one_partition_at_a_time(
    loads: dict[str, int], length: int, rotate: int
) -> None:
    """Whatever the loads, the run's length and the order the subscribers come in."""
    subscribers = list(loads)
    cut = rotate % len(subscribers)
    subscribers = subscribers[cut:] + subscribers[:cut]
    run = [TopicPartition("t", number) for number in range(length)]
    current = {
        member: dict.fromkeys(TopicPartition("held", i) for i in range(load))
        for member, load in loads.items()
    }
    owner: dict[TopicPartition, str] = {}
    fill_least_loaded(run, subscribers, current, owner, member_id_key)
    expected = one_at_a_time(run, subscribers, loads)
    for member in subscribers:
        got = [tp for tp in current[member] if tp[0] == "t"]
        assert got == expected[member]
        assert all(owner[tp] == member for tp in got)
    assert len(owner) == length


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([0, 1, 3, 4, 8, 12, 16, 24]), min_size=1, max_size=10),
    st.integers(1, 8),
)
def test_a_fresh_group_is_dealt_as_the_strided_partitions(counts: list[int], width: int) -> None:
    """Member by member, each gets ``all_partitions[rank::width]``, or the caller strides."""
    by_topic = {f"t{index:02d}": count for index, count in enumerate(counts)}
    every = all_partitions(by_topic.items())
    dealt = _dealt(by_topic, width)
    if dealt is not None:
        assert dealt == [every[rank::width] for rank in range(width)]


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 30), min_size=1),
    st.lists(st.text("ABab9é\U0001f600", min_size=1, max_size=3), max_size=12, unique=True),
    st.sets(st.integers(0, 11)),
)
def test_a_fresh_group_gets_what_the_constrained_path_gives(
    counts: dict[str, int], ids: list[str], static: set[int]
) -> None:
    """Same lists, same member order; static members (instance ids) change nothing for sticky."""
    members = [
        Member(member_id, counts, instance_id=f"i{len(ids) - index}" if index in static else None)
        for index, member_id in enumerate(ids)
    ]
    subscribed = {topic: count for topic, count in sorted(counts.items()) if count}
    fresh = assign_fresh(subscribed, members, None)
    group = StickyGroup.settle(subscribed, members, None, subscriptions_equal=True)
    constrained, transferring = assign_constrained(group) if ids else ({}, {})
    assert fresh is not None
    assert list(fresh.items()) == list(constrained.items())
    assert not transferring


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 12), min_size=1),
    st.data(),
)
def test_left_over_partitions_are_every_partition_less_the_held_ones(
    counts: dict[str, int], data: st.DataObject
) -> None:
    """Listed topic by topic in the order given, whatever is held and by whom."""
    order = data.draw(st.permutations(sorted(counts)))
    every = all_partitions((topic, counts[topic]) for topic in order)
    held = data.draw(st.lists(st.sampled_from(every), unique=True))
    owner = {partition: f"m{index % 3}" for index, partition in enumerate(held)}
    assert _unassigned(owner, counts, order) == [tp for tp in every if tp not in owner]
