import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from client_balance.cli import main
from client_balance.cli._render import (
    Renderable,
    describe_change,
    show,
    simulation_comparison,
    simulation_rounds,
)
from client_balance.cli._simulate import DEFINITIONS, simulation_to_json
from client_balance.errors import ConfigError
from client_balance.keys import TopicPartition
from client_balance.strategies import (
    Assignment,
    Member,
    PartitionRacks,
    Strategy,
    get_strategy,
    strategy_names,
)
from client_balance.strategies.simulation import (
    MAX_REBALANCES_PER_ROUND,
    ChangeKind,
    MembershipChange,
    MemberSpec,
    Round,
    SimulationError,
    SimulationPlan,
    parse_members,
    parse_topics,
    plan_simulation,
    simulate,
)
from tests.seeds import load_seed_scenarios, parse_partition

SEED = {scenario.id: scenario for scenario in load_seed_scenarios()}
C3_LEAVES: list[tuple[ChangeKind, str]] = [("remove", "C3")]
SEED_002 = plan_simulation("Order:7,Stock:5", "C1,C2,C3", C3_LEAVES)
VALID_NAMES = ", ".join(strategy_names())
SEED_002_ARGV = ["simulate", "--topics", "Order:7,Stock:5", "--members", "C1,C2,C3"]


def _as_sets(assignment: Mapping[str, Sequence[TopicPartition]]) -> dict[str, set[TopicPartition]]:
    return {member: set(parts) for member, parts in assignment.items()}


def _partitions(*names: str) -> tuple[TopicPartition, ...]:
    return tuple(parse_partition(name) for name in names)


def _shown(shown: Renderable, capsys: pytest.CaptureFixture[str]) -> list[str]:
    show(shown)
    return capsys.readouterr().out.splitlines()


def _rounds_text(
    plan: SimulationPlan,
    name: str,
    rounds: Sequence[Round],
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    return _shown(simulation_rounds(plan, name, rounds), capsys)


@dataclass
class _Recording:
    """Another strategy's answers, remembering the members of every call."""

    inner: Strategy
    calls: list[list[Member]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.inner.name

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        self.calls.append(list(members))
        return self.inner.assign(partitions, members)


class _CooperativeRoundRobin:
    """Round robin's target minus partitions another member still owns, as cooperative rebalancing.

    A partition changes owner only after its old owner has given it up.
    """

    name = "cooperative-roundrobin"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        target = get_strategy("roundrobin").assign(partitions, members)
        owners = {partition: member.id for member in members for partition in member.owned}
        return {
            member_id: [p for p in parts if owners.get(p, member_id) == member_id]
            for member_id, parts in target.items()
        }


class _NeverSettles:
    """Round robin that never hands out Order-0."""

    name = "never-settles"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        target = get_strategy("roundrobin").assign(partitions, members)
        return {m: [p for p in parts if p != ("Order", 0)] for m, parts in target.items()}


class _GivesEverythingToEveryone:
    """An invalid strategy: every member gets every partition."""

    name = "greedy"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        every = [TopicPartition(t, p) for t, count in partitions.items() for p in range(count)]
        return {member.id: list(every) for member in members}


# --- parsing ---------------------------------------------------------------------------------


def test_parse_topics_sorts_by_name_and_ignores_spaces() -> None:
    """Topics come back sorted by name with integer counts; spaces around entries are fine."""
    assert parse_topics(" Stock:5 , Order : 7") == {"Order": 7, "Stock": 5}
    assert list(parse_topics("b:1,a:2")) == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "--topics is empty"),
        ("Order", "entry 'Order' has no partition count; write TOPIC:PARTITIONS"),
        ("Order:", "entry 'Order:' has no partition count"),
        ("Order:x", "partition count 'x' of topic 'Order' is not a whole number"),
        ("Order:1.5", "partition count '1.5' of topic 'Order' is not a whole number"),
        ("Order:-3", "partition count -3 of topic 'Order' is not allowed; a topic has 1 to"),
        ("Order:0", "partition count 0 of topic 'Order' is not allowed"),
        ("Order:100001", "partition count 100001 of topic 'Order' is not allowed"),
        ("Order:7,Order:5", "topic 'Order' appears twice in --topics"),
        ("Order:7,", "'Order:7,' has an empty entry between commas"),
        ("bad topic:3", "topic name 'bad topic' is not allowed"),
        (":3", "topic name '' has 0 characters"),
    ],
)
def test_parse_topics_names_the_bad_value(text: str, message: str) -> None:
    """Malformed --topics raise ConfigError naming the bad entry and what is allowed."""
    with pytest.raises(ConfigError, match=message):
        parse_topics(text)


def test_members_without_a_subscription_take_every_topic() -> None:
    """'C3' subscribes all topics; 'C1=Order' and 'C2=Order+Stock' only those named."""
    members = parse_members("C1=Order, C2=Order+Stock ,C3", {"Order": 7, "Stock": 5})
    assert members == (
        MemberSpec("C1", frozenset({"Order"})),
        MemberSpec("C2", frozenset({"Order", "Stock"})),
        MemberSpec("C3", frozenset({"Order", "Stock"})),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "--members is empty"),
        ("C1,,C2", "has an empty entry between commas"),
        ("C1,C1", "member 'C1' appears twice in --members"),
        ("=Order", "entry '=Order' has no member id"),
        ("C1=", "member 'C1' in --members subscribes no topic"),
        ("C1=Orders", "subscribes topic 'Orders', which is not in --topics; known topics: Order"),
        ("C1=Order+Order", "names a topic twice"),
    ],
)
def test_parse_members_names_the_bad_value(text: str, message: str) -> None:
    """Empty, duplicate or badly subscribed members raise ConfigError naming them."""
    with pytest.raises(ConfigError, match=message):
        parse_members(text, {"Order": 7, "Stock": 5})


def test_changes_keep_command_line_order_and_a_comma_list_is_one_round() -> None:
    """Each change option is one round, in the order given; a member may rejoin after leaving."""
    plan = plan_simulation(
        "Order:7", "C1,C2,C3", [("remove", "C2,C3"), ("add", "C4"), ("add", "C2,C5=Order")]
    )
    assert plan.changes == (
        MembershipChange(leaving=("C2", "C3")),
        MembershipChange(joining=(MemberSpec("C4", frozenset({"Order"})),)),
        MembershipChange(
            joining=(MemberSpec("C2", frozenset({"Order"})), MemberSpec("C5", frozenset({"Order"})))
        ),
    )
    assert [describe_change(change) for change in plan.changes] == [
        "C2, C3 leave",
        "C4 joins",
        "C2, C5 join",
    ]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ([("remove", "C9")], r"--then-remove 'C9' \(round 2\): no such member; .*: C1, C2"),
        ([("remove", "C2"), ("remove", "C2")], r"'C2' \(round 3\): no such member"),
        ([("add", "C1")], r"--then-add 'C1' \(round 2\): already a member; choose a new id"),
        ([("remove", "C1,C2")], "would leave round 2 without members"),
        ([("remove", "C1,C1")], "names 'C1' twice"),
        ([("add", "C3=Stock")], "member 'C3' in --then-add subscribes topic 'Stock'"),
        ([("add", "")], "--then-add is empty"),
    ],
)
def test_bad_changes_name_the_member(changes: list[tuple[ChangeKind, str]], message: str) -> None:
    """Removing an unknown member, adding a present one or emptying the group is refused."""
    with pytest.raises(ConfigError, match=message):
        plan_simulation("Order:7", "C1,C2", changes)


# --- computing -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["range", "roundrobin"])
def test_seed_002_matches_kafka(name: str) -> None:
    """Seed 002 (Order 7, Stock 5, C1-C3, then C3 leaves) gives Kafka's Java tables."""
    first, after = simulate(SEED_002, get_strategy(name))
    assert _as_sets(first.assignment) == SEED[f"s002-{name}-3"].expected
    assert _as_sets(after.assignment) == SEED[f"s002-{name}-C3-left"].expected


def test_seed_002_sticky_keeps_what_the_survivors_had() -> None:
    """Sticky gives seed 002's first table; when C3 leaves, C1 and C2 keep theirs and end 6/6."""
    first, after = simulate(SEED_002, get_strategy("sticky"))
    assert _as_sets(first.assignment) == SEED["s002-sticky-3"].expected
    for member_id in ("C1", "C2"):
        assert set(first.assignment[member_id]) <= set(after.assignment[member_id])
    assert after.counts == {"C1": 6, "C2": 6}
    assert len(after.moved) == 4
    assert after.taken_from_survivors == ()


def test_seed_002_cooperative_sticky_hands_over_in_a_second_rebalance() -> None:
    """When C4 joins, cooperative-sticky first withholds what C4 will get, then hands it over."""
    plan = plan_simulation("Order:7,Stock:5", "C1,C2,C3", [("add", "C4")])
    first, joined = simulate(plan, get_strategy("cooperative-sticky"))
    # Kafka's two sticky assignors share one algorithm, so a fresh group gets sticky's table.
    assert _as_sets(first.assignment) == SEED["s002-sticky-3"].expected
    withheld = joined.rebalances[0].withheld
    assert len(joined.rebalances) == 2
    assert len(withheld) == 3
    assert joined.assignment["C4"] == withheld
    assert joined.moved == joined.taken_from_survivors == withheld
    assert joined.counts == {"C1": 3, "C2": 3, "C3": 3, "C4": 3}


@pytest.mark.parametrize("name", strategy_names())
def test_every_round_holds_each_subscribed_partition_once(name: str) -> None:
    """Every registered strategy settles each round with each subscribed partition held once."""
    plan = plan_simulation(
        "Order:7,Stock:5,Audit:1",
        "C1=Order,C2=Order+Stock,C3,C4=Audit",
        [("remove", "C3"), ("add", "C5,C6=Stock"), ("remove", "C1,C4")],
    )
    for round_ in simulate(plan, get_strategy(name)):
        subscribed = {topic for member in round_.members for topic in member.topics}
        held = sorted(p for parts in round_.assignment.values() for p in parts)
        assert held == [
            TopicPartition(topic, number)
            for topic, count in plan.topics.items()
            if topic in subscribed
            for number in range(count)
        ]
        for member in round_.members:
            assert all(p.topic in member.topics for p in round_.assignment[member.id])
        assert round_.rebalances[-1].withheld == ()


@pytest.mark.parametrize("name", strategy_names())
def test_partitions_of_a_leaving_member_count_as_moves(name: str) -> None:
    """Moves = the leaver's partitions plus those taken from survivors; sticky takes none."""
    first, after = simulate(SEED_002, get_strategy(name))
    freed = set(first.assignment["C3"])
    taken = set(after.taken_from_survivors)
    assert set(after.moved) == freed | taken
    assert not freed & taken
    if "sticky" in name:
        assert taken == set()


def test_moves_of_seed_002_range_are_counted_and_split() -> None:
    """Range on seed 002: 5 moves when C3 leaves, of which Order-3 and Stock-2 come from C2."""
    first, after = simulate(SEED_002, get_strategy("range"))
    assert first.moved == first.taken_from_survivors == ()
    assert after.moved == _partitions("Order-3", "Order-5", "Order-6", "Stock-2", "Stock-4")
    assert after.taken_from_survivors == _partitions("Order-3", "Stock-2")
    assert (first.balance, after.balance) == (2, 2)


def test_partitions_without_a_previous_or_next_owner_are_not_moves() -> None:
    """A topic that gains its first subscriber, or loses its last, moves nothing."""
    plan = plan_simulation("Order:3,Stock:2", "C1=Order", [("add", "C2=Stock"), ("remove", "C2")])
    first, joined, left = simulate(plan, get_strategy("range"))
    assert joined.assignment == {
        "C1": first.assignment["C1"],
        "C2": _partitions("Stock-0", "Stock-1"),
    }
    assert joined.moved == left.moved == ()


def test_members_carry_owned_and_generation_into_the_next_round() -> None:
    """Members that stay bring the previous round's partitions and generation; joiners bring -1."""
    recording = _Recording(get_strategy("range"))
    plan = plan_simulation("Order:4", "C2,C1", [("add", "C3"), ("remove", "C1")])
    first, second, third = simulate(plan, recording)
    calls = [[(m.id, m.owned, m.generation) for m in call] for call in recording.calls]
    assert calls == [
        [("C1", (), -1), ("C2", (), -1)],
        [("C1", first.assignment["C1"], 1), ("C2", first.assignment["C2"], 1), ("C3", (), -1)],
        [("C2", second.assignment["C2"], 2), ("C3", second.assignment["C3"], 2)],
    ]
    assert [r.rebalances[0].generation for r in (first, second, third)] == [1, 2, 3]


def test_withheld_partitions_are_rebalanced_again_with_the_next_generation() -> None:
    """A round that withholds partitions rebalances again (owned = last result, generation + 1)."""
    plan = plan_simulation("Order:6", "C1,C2", [("add", "C3"), ("remove", "C1")])
    recording = _Recording(_CooperativeRoundRobin())
    first, joined, left = simulate(plan, recording)
    assert [len(r.rebalances) for r in (first, joined, left)] == [1, 2, 2]
    assert [b.generation for r in (first, joined, left) for b in r.rebalances] == [1, 2, 3, 4, 5]
    hand_over = joined.rebalances[0]
    assert hand_over.assignment == {
        "C1": _partitions("Order-0"),
        "C2": _partitions("Order-1"),
        "C3": (),
    }
    assert hand_over.withheld == _partitions("Order-2", "Order-3", "Order-4", "Order-5")
    assert joined.assignment == {
        "C1": _partitions("Order-0", "Order-3"),
        "C2": _partitions("Order-1", "Order-4"),
        "C3": _partitions("Order-2", "Order-5"),
    }
    second_call = recording.calls[2]
    assert [(m.id, m.owned, m.generation) for m in second_call] == [
        (m, hand_over.assignment[m], 2) for m in ("C1", "C2", "C3")
    ]
    assert joined.moved == joined.taken_from_survivors == hand_over.withheld


def test_a_round_that_never_settles_is_an_error() -> None:
    """A strategy that withholds a partition forever fails after the rebalance cap."""
    with pytest.raises(SimulationError, match=r"still withholds Order-0 after 10 rebalances"):
        simulate(SEED_002, _NeverSettles())
    assert MAX_REBALANCES_PER_ROUND == 10


def test_an_inconsistent_strategy_answer_is_an_error() -> None:
    """A partition given to two members is reported, not tabulated."""
    with pytest.raises(SimulationError, match="gave Order-0 to both C1 and C2"):
        simulate(SEED_002, _GivesEverythingToEveryone())


# --- rendering -------------------------------------------------------------------------------


def test_render_marks_moved_partitions_and_counts(capsys: pytest.CaptureFixture[str]) -> None:
    """The table has one row per member with its partitions and count; moves are starred."""
    lines = _rounds_text(SEED_002, "range", simulate(SEED_002, get_strategy("range")), capsys)
    assert lines[:8] == [
        "strategy range; topics Order:7 Stock:5",
        "* = moved: the owner changed since the previous round",
        "",
        "round 1 (generation 1): members C1, C2, C3",
        "member  partitions                               count",
        "C1      Order-0 Order-1 Order-2 Stock-0 Stock-1      5",
        "C2      Order-3 Order-4 Stock-2 Stock-3              4",
        "C3      Order-5 Order-6 Stock-4                      3",
    ]
    assert lines[10:] == [
        "round 2 (generation 2): C3 leaves",
        "member  partitions                                                 count",
        "C1      Order-0 Order-1 Order-2 Order-3* Stock-0 Stock-1 Stock-2*      7",
        "C2      Order-4 Order-5* Order-6* Stock-3 Stock-4*                     5",
        "balance 2 (counts 5 to 7)",
        "moves 5: 2 taken from members that stayed, 3 freed by members that left",
    ]


def test_render_shows_each_rebalance_and_what_was_withheld(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A round of several rebalances prints each one and the partitions it withheld."""
    plan = plan_simulation("Order:6", "C1,C2", [("add", "C3")])
    lines = _rounds_text(plan, "coop", simulate(plan, _CooperativeRoundRobin()), capsys)
    start = lines.index("round 2 (generations 2-3, 2 rebalances): C3 joins")
    assert lines[start + 1 :] == [
        "rebalance 1 (generation 2)",
        "member  partitions  count",
        "C1      Order-0         1",
        "C2      Order-1         1",
        "C3      -               0",
        "withheld until the next rebalance: Order-2 Order-3 Order-4 Order-5",
        "rebalance 2 (generation 3)",
        "member  partitions         count",
        "C1      Order-0 Order-3*       2",
        "C2      Order-1 Order-4*       2",
        "C3      Order-2* Order-5*      2",
        "balance 0 (counts 2 to 2)",
        "moves 4: 4 taken from members that stayed, 0 freed by members that left",
    ]


def test_render_shows_subscriptions_when_they_differ(capsys: pytest.CaptureFixture[str]) -> None:
    """Unequal subscriptions add a 'subscribes' column."""
    plan = plan_simulation("Order:2,Stock:1", "C1=Order,C2")
    lines = _rounds_text(plan, "range", simulate(plan, get_strategy("range")), capsys)
    assert "C1      Order        Order-0              1" in lines


def test_comparison_has_a_row_per_strategy_and_round(capsys: pytest.CaptureFixture[str]) -> None:
    """--compare shows per strategy the member counts, balance, moves and taken per round."""
    results = {name: simulate(SEED_002, get_strategy(name)) for name in ("roundrobin", "range")}
    lines = _shown(simulation_comparison(SEED_002, results), capsys)
    assert lines[3:] == [
        "round 1: members C1, C2, C3",
        "strategy    C1  C2  C3  balance  moves  taken  rebalances",
        "range        5   4   3        2      -      -           1",
        "roundrobin   4   4   4        0      -      -           1",
        "",
        "round 2: C3 leaves",
        "strategy    C1  C2  balance  moves  taken  rebalances",
        "range        7   5        2      5      2           1",
        "roundrobin   6   6        0      8      4           1",
    ]


def test_output_does_not_depend_on_the_order_members_are_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Members are shown in Kafka's order whatever order the command line used."""
    shuffled = plan_simulation("Order:7,Stock:5", "C3,C1,C2", C3_LEAVES)
    for name in strategy_names():
        strategy = get_strategy(name)
        assert _rounds_text(shuffled, name, simulate(shuffled, strategy), capsys) == (
            _rounds_text(SEED_002, name, simulate(SEED_002, strategy), capsys)
        )


def test_members_are_listed_in_kafka_order_and_node_ids_by_number() -> None:
    """Ids sort as Java strings (C10 before C2), but all-numeric node ids sort by number."""
    named = plan_simulation("t:3", "C2,C10,C1")
    [round_] = simulate(named, get_strategy("range"))
    assert [member.id for member in round_.members] == ["C1", "C10", "C2"]
    nodes = plan_simulation("t:3", "10,2,1")
    [round_] = simulate(nodes, get_strategy("modulo"))
    assert list(round_.assignment) == ["1", "2", "10"]


def test_mixed_ids_follow_kafka_order_not_numbers_first() -> None:
    """If any id is not a number, every id sorts as a Java string: "10" before "2" before "C1"."""
    [round_] = simulate(plan_simulation("t:3", "C1,2,10"), get_strategy("range"))
    assert [member.id for member in round_.members] == ["10", "2", "C1"]
    assert list(round_.assignment) == ["10", "2", "C1"]


def test_ids_that_look_like_markup_are_shown_as_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A member id such as "[bold]C1" is printed literally, never read as rich markup."""
    plan = plan_simulation("t:2", "[bold]C1,C2")
    lines = _rounds_text(plan, "range", simulate(plan, get_strategy("range")), capsys)
    assert lines[3:6] == [
        "member    partitions  count",
        "C2        t-0             1",
        "[bold]C1  t-1             1",
    ]


def test_json_has_every_round_and_the_move_counts() -> None:
    """simulation_to_json carries assignments, counts, balance, moves and taken per round."""
    data = simulation_to_json(SEED_002, {"range": simulate(SEED_002, get_strategy("range"))})
    first, after = data["strategies"]["range"]
    assert data["topics"] == {"Order": 7, "Stock": 5}
    assert first["assignment"]["C3"] == ["Order-5", "Order-6", "Stock-4"]
    assert first["change"] is None
    assert after["change"] == {"leaving": ["C3"], "joining": []}
    assert after["counts"] == {"C1": 7, "C2": 5}
    assert (after["balance"], after["moves"], after["taken_from_survivors"]) == (2, 5, 2)
    assert after["taken"] == ["Order-3", "Stock-2"]
    assert after["rebalances"][0]["generation"] == 2


def test_a_plan_built_by_hand_is_simulated_too() -> None:
    """simulate() takes a SimulationPlan made without the parser (a library use)."""
    plan = SimulationPlan({"t": 2}, (MemberSpec("a", frozenset({"t"})),))
    [only] = simulate(plan, get_strategy("roundrobin"))
    assert only.assignment == {"a": _partitions("t-0", "t-1")}


# --- command line ----------------------------------------------------------------------------


def test_cli_prints_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    """The simulate command prints each round's table and exits 0."""
    assert main([*SEED_002_ARGV, "--strategy", "roundrobin", "--then-remove", "C3"]) == 0
    out = capsys.readouterr().out
    assert "C1      Order-0 Order-3 Order-6 Stock-2      4" in out
    assert "C1      Order-0 Order-2* Order-4* Order-6 Stock-1* Stock-3*      6" in out
    assert "moves 8: 4 taken from members that stayed, 4 freed by members that left" in out


def test_cli_applies_changes_in_command_line_order(capsys: pytest.CaptureFixture[str]) -> None:
    """--then-add and --then-remove are applied in the order given, one round each."""
    argv = [*SEED_002_ARGV, "--strategy", "range", "--then-add", "C4", "--then-remove", "C1,C2"]
    assert main([*argv, "--json"]) == 0
    rounds = json.loads(capsys.readouterr().out)["strategies"]["range"]
    assert [[m["id"] for m in r["members"]] for r in rounds] == [
        ["C1", "C2", "C3"],
        ["C1", "C2", "C3", "C4"],
        ["C3", "C4"],
    ]


def test_cli_compare_lists_every_registered_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    """--compare has one row per registered strategy in every round."""
    assert main([*SEED_002_ARGV, "--compare", "--then-remove", "C3"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line]
    for name in strategy_names():
        assert rows.count(name) == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--topics", "Order:x"], "partition count 'x' of topic 'Order' is not a whole number"),
        (["--members", "C1,C1"], "member 'C1' appears twice in --members"),
        (["--members", "C1=Audit"], "subscribes topic 'Audit', which is not in --topics"),
        (["--then-remove", "C9"], "--then-remove 'C9' (round 2): no such member"),
        (["--then-add", "C2"], "--then-add 'C2' (round 2): already a member"),
        (["--strategy", "fair"], f"unknown strategy 'fair'; valid names: {VALID_NAMES}"),
    ],
)
def test_cli_usage_errors_exit_2(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad values exit 2 with a message naming the value and what is allowed."""
    assert main([*SEED_002_ARGV, *extra]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


def test_cli_compare_and_strategy_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    """Asking for one strategy and for all of them is a usage error."""
    assert main([*SEED_002_ARGV, "--compare", "--strategy", "range"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_cli_help_states_the_definitions(capsys: pytest.CaptureFixture[str]) -> None:
    """The help of simulate explains rounds, rebalances and what counts as a move."""
    assert main(["simulate", "--help"]) == 0
    out = capsys.readouterr().out
    assert DEFINITIONS.splitlines()[0] in out
    assert "A partition freed by a leaving member" in out
