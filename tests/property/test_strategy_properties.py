"""Properties every registered strategy keeps, on generated groups."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from client_balance.keys import TopicPartition
from client_balance.strategies import Member, get_strategy, strategy_names

TOPICS = ["a", "b", "c", "d"]

topic_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 40), min_size=1)
member_ids = st.lists(
    st.text("abcxyz019", min_size=1, max_size=4), min_size=1, max_size=8, unique=True
)


@st.composite
def groups(draw: st.DrawFn, *, equal: bool) -> tuple[dict[str, int], list[Member]]:
    """Topic partition counts and members (equal or independent subscriptions)."""
    counts = draw(topic_counts)
    ids = draw(member_ids)
    shared = draw(st.sets(st.sampled_from(TOPICS), min_size=1))
    members = [
        Member(
            member_id,
            shared if equal else draw(st.sets(st.sampled_from(TOPICS), min_size=1)),
            instance_id=draw(st.none() | st.just(f"i-{member_id}")),
        )
        for member_id in ids
    ]
    return counts, members


def _all_partitions(counts: dict[str, int], members: list[Member]) -> set[TopicPartition]:
    wanted = set().union(*(m.topics for m in members))
    return {TopicPartition(t, p) for t, n in counts.items() if t in wanted for p in range(n)}


@settings(max_examples=300, deadline=None)
@given(groups(equal=False), st.sampled_from(strategy_names()), st.randoms())
def test_each_partition_once_and_only_to_subscribers(
    group: tuple[dict[str, int], list[Member]], name: str, rng: object
) -> None:
    """Every partition of a subscribed topic goes to exactly one of its subscribers."""
    counts, members = group
    result = get_strategy(name).assign(counts, members)
    assert set(result) == {m.id for m in members}
    handed = Counter(p for parts in result.values() for p in parts)
    assert set(handed) == _all_partitions(counts, members)
    assert max(handed.values(), default=1) == 1
    by_id = {m.id: m for m in members}
    for member_id, parts in result.items():
        assert all(p.topic in by_id[member_id].topics for p in parts)
        assert parts == sorted(parts)


@settings(max_examples=300, deadline=None)
@given(groups(equal=False), st.sampled_from(strategy_names()), st.randoms())
def test_input_order_does_not_change_the_answer(
    group: tuple[dict[str, int], list[Member]], name: str, rng: object
) -> None:
    """Shuffling members and topics gives the same assignment."""
    counts, members = group
    shuffled = list(members)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    reversed_counts = dict(reversed(list(counts.items())))
    strategy = get_strategy(name)
    assert strategy.assign(counts, members) == strategy.assign(reversed_counts, shuffled)


@settings(max_examples=300, deadline=None)
@given(groups(equal=True))
def test_roundrobin_balances_equal_subscriptions(
    group: tuple[dict[str, int], list[Member]],
) -> None:
    """With equal subscriptions round robin's totals differ by at most one."""
    counts, members = group
    sizes = [len(parts) for parts in get_strategy("roundrobin").assign(counts, members).values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=300, deadline=None)
@given(groups(equal=True), st.sampled_from(["range", "modulo"]))
def test_per_topic_balance(group: tuple[dict[str, int], list[Member]], name: str) -> None:
    """Range and modulo balance every topic: per-topic counts differ by at most one."""
    counts, members = group
    result = get_strategy(name).assign(counts, members)
    for topic in members[0].topics:
        per_member = [sum(1 for p in parts if p.topic == topic) for parts in result.values()]
        assert max(per_member) - min(per_member) <= 1
