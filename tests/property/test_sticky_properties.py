"""Properties of sticky and cooperative-sticky on generated groups with a history.

A history is what a group looks like after joins, leaves and missed rounds: members claim
partitions (some claims stale, some contested) at various generations.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from client_balance.keys import TopicPartition
from client_balance.strategies import Assignment, Member, get_strategy
from tests.assignment_checks import (
    balance_problems,
    next_round,
    spread,
    validity_problems,
)

TOPICS = ["a", "b", "c", "d"]
STICKY = ["sticky", "cooperative-sticky"]
# Pieces whose concatenations share Java hashes ("Aa" and "BB" do): ids that collide in buckets.
member_ids = st.lists(
    st.lists(st.sampled_from(["Aa", "BB", "c", "9"]), min_size=1, max_size=3).map("".join),
    min_size=1,
    max_size=8,
    unique=True,
)
topic_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 25), min_size=1)

Group = tuple[dict[str, int], list[Member]]


@st.composite
def groups_with_history(draw: st.DrawFn, *, equal: bool | None = None) -> Group:
    """Members with subscriptions (equal, unequal, or either) and claims at some generations."""
    counts = draw(topic_counts)
    ids = draw(member_ids)
    shared = draw(st.sets(st.sampled_from(TOPICS), min_size=1))
    same = draw(st.booleans()) if equal is None else equal
    partitions = [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]
    claims: dict[str, list[TopicPartition]] = {member_id: [] for member_id in ids}
    for partition in partitions:
        for claimant in draw(st.lists(st.sampled_from(ids), max_size=2, unique=True)):
            claims[claimant].append(partition)
    members = [
        Member(
            member_id,
            shared if same else draw(st.sets(st.sampled_from(TOPICS), min_size=1)),
            claims[member_id],
            draw(st.sampled_from([-1, 3, 4, 5])),
        )
        for member_id in ids
    ]
    return counts, members


def withheld(
    members: list[Member], assignment: Assignment, target: Assignment
) -> set[TopicPartition]:
    """Partitions of the eager target missing from a cooperative round."""
    return {tp for m in members for tp in set(target[m.id]) - set(assignment[m.id])}


@settings(max_examples=300, deadline=None)
@given(groups_with_history(), st.sampled_from(STICKY))
def test_valid_whatever_the_history(group: Group, name: str) -> None:
    """Any history gives a valid assignment (a cooperative round may only hold back claims)."""
    counts, members = group
    result = get_strategy(name).assign(counts, members)
    target = get_strategy("sticky").assign(counts, members)
    claimed = {tp for member in members for tp in member.owned}
    held_back = withheld(members, result, target) if name == "cooperative-sticky" else set()
    assert held_back <= claimed
    assert validity_problems(counts, members, result, may_be_missing=held_back) == []


@settings(max_examples=300, deadline=None)
@given(groups_with_history())
def test_sticky_is_balanced_whatever_the_history(group: Group) -> None:
    """No member 2+ partitions short could take one; equal subscriptions: spread <= 1."""
    counts, members = group
    result = get_strategy("sticky").assign(counts, members)
    assert balance_problems(members, result) == []
    if len({member.topics for member in members}) == 1:
        assert spread(result) <= 1


@settings(max_examples=300, deadline=None)
@given(groups_with_history(), st.sampled_from(STICKY), st.randoms())
def test_member_order_does_not_change_the_answer(group: Group, name: str, rng: object) -> None:
    """Shuffled members (ids that collide in Java's hash buckets included): the same answer."""
    counts, members = group
    shuffled = list(members)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    strategy = get_strategy(name)
    assert strategy.assign(counts, members) == strategy.assign(counts, shuffled)


@settings(max_examples=300, deadline=None)
@given(groups_with_history(equal=True), st.sampled_from(STICKY), st.data())
def test_survivors_keep_everything_when_a_member_leaves(
    group: Group, name: str, data: st.DataObject
) -> None:
    """From a settled group, a member leaving takes nothing from the members that stay."""
    counts, members = group
    if len(members) < 2:
        return
    settled = _settle(counts, members, name)
    leaver = data.draw(st.sampled_from([member.id for member in settled]))
    survivors = [member for member in settled if member.id != leaver]
    result = get_strategy(name).assign(counts, survivors)
    for member in survivors:
        assert set(member.owned) <= set(result[member.id]), member.id
    assert validity_problems(counts, survivors, result) == []


@settings(max_examples=300, deadline=None)
@given(groups_with_history())
def test_cooperative_rounds_converge_without_revoking_and_adding_at_once(group: Group) -> None:
    """Fed back, cooperative rounds settle on a balanced target within 4 rounds.

    No round adds a partition to a member while another member that claims it loses it (the
    rule Kafka's ``validateCooperativeAssignment`` enforces).
    """
    counts, members = group
    strategy = get_strategy("cooperative-sticky")
    generation = 6
    for _ in range(4):
        result = strategy.assign(counts, members)
        claimants: dict[TopicPartition, set[str]] = {}
        for member in members:
            for tp in member.owned:
                claimants.setdefault(tp, set()).add(member.id)
        for member_id, held in result.items():
            taken = [
                tp
                for tp in held
                if claimants.get(tp, {member_id}) - {member_id} and member_id not in claimants[tp]
            ]
            assert taken == [], f"{member_id} got {taken} while others still claim them"
        target = get_strategy("sticky").assign(counts, members)
        members = next_round(result, members, generation)
        generation += 1
        if result == target:
            break
    else:
        raise AssertionError("not settled after 4 cooperative rounds")
    assert balance_problems(members, result) == []
    assert strategy.assign(counts, members) == result


def _settle(counts: dict[str, int], members: list[Member], name: str) -> list[Member]:
    """Members after the group has settled: rounds fed back until nothing changes."""
    strategy = get_strategy(name)
    previous: Assignment | None = None
    for generation in range(7, 17):
        result = strategy.assign(counts, members)
        members = next_round(result, members, generation)
        if result == previous:
            return members
        previous = result
    raise AssertionError("group did not settle")
