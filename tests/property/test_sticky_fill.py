"""Sticky shortcuts give what the step-by-step rules give: block filling, fresh dealing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from client_balance.keys import TopicPartition
from client_balance.strategies._base import all_partitions
from client_balance.strategies._sticky_constrained import _dealt
from client_balance.strategies._sticky_fill import fill_least_loaded
from client_balance.strategies._sticky_group import member_id_key


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
