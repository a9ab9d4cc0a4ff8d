import json
import pickle
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from client_balance import ClientBalanceSettings, ConfigError, StrategyContractError
from client_balance.cli import main
from client_balance.keys import TopicPartition
from client_balance.strategies import (
    Assignment,
    Member,
    PartitionRacks,
    _registry,
    check_strategy,
    get_strategy,
    register_strategy,
    strategy_names,
    unregister_strategy,
)
from client_balance.strategies._nodes import node_share
from tests import custom_rules
from tests.custom_rules import ByTopic, by_given_order, by_topic, reversed_range

REPO = Path(__file__).resolve().parents[2]
BUILTINS = ("cooperative-sticky", "hash", "modulo", "range", "roundrobin", "sticky")
A, B = "Alpha", "Beta"


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with nothing registered, cached or read from entry points."""
    monkeypatch.setattr(_registry, "_registered", {})
    monkeypatch.setattr(_registry, "_references", {})
    monkeypatch.setattr(_registry, "_loaded", {})
    monkeypatch.setattr(_registry, "_declared", None)


@pytest.fixture
def declare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], None]:
    """Declares ``name = value`` in the strategies group of a distribution on the path.

    The distribution is a ``.dist-info`` folder, which importlib.metadata finds as it finds
    an installed package's; declare before the registry's first lookup.
    """
    info = tmp_path / "my_rules-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-rules\nVersion: 1.0\n")
    lines = ["[client_balance.strategies]"]
    monkeypatch.syspath_prepend(str(tmp_path))

    def add(name: str, value: str) -> None:
        lines.append(f"{name} = {value}")
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")

    return add


def answering(answer: object) -> Assignment:
    """A rule (as its registered strategy) that always gives ``answer``."""
    return register_strategy("fixed", lambda partitions, members: answer, replace=True).assign(
        {A: 2, B: 1}, [Member("C1", [A]), Member("C2", [A, B])]
    )


# ------------------------------------------------------------------------------ registering
def test_a_registered_function_is_a_strategy_by_name() -> None:
    """register_strategy makes a function a strategy: found, listed, answering like a built-in."""
    registered = register_strategy("by-topic", by_topic)
    assert get_strategy("by-topic") is registered
    assert registered.name == "by-topic"
    assert "by-topic" in strategy_names()
    members = [Member("1", [A, B]), Member("0", [A, B])]
    assert registered.assign({B: 2, A: 1}, members) == {
        "0": [TopicPartition(A, 0)],
        "1": [TopicPartition(B, 0), TopicPartition(B, 1)],
    }
    unregister_strategy("by-topic")
    assert "by-topic" not in strategy_names()
    with pytest.raises(ConfigError, match="unknown strategy 'by-topic'"):
        get_strategy("by-topic")


def test_answers_are_normalised_every_member_a_key_partitions_sorted() -> None:
    """A rule may leave out members with nothing and give partitions in any order."""
    answer = answering({"C2": [(B, 0), (A, 1), TopicPartition(A, 0)]})
    assert answer == {"C1": [], "C2": [(A, 0), (A, 1), (B, 0)]}
    assert all(type(tp) is TopicPartition for tp in answer["C2"])


def test_a_strategy_object_and_a_strategy_class_are_registered_too() -> None:
    """An object with assign() is used as is; a class is made with no arguments."""
    members = [Member("0", [A, B]), Member("1", [A, B])]
    expected = by_topic({A: 1, B: 1}, members)
    assert register_strategy("object", ByTopic()).assign({A: 1, B: 1}, members) == expected
    assert register_strategy("class", ByTopic).assign({A: 1, B: 1}, members) == expected


def test_a_taken_name_needs_replace_and_unregistering_brings_the_built_in_back() -> None:
    """A built-in name is refused unless replace=True; unregistering restores the built-in."""
    with pytest.raises(ConfigError, match="strategy name 'range' is taken; pass replace=True"):
        register_strategy("range", by_topic)
    register_strategy("mine", by_topic)
    with pytest.raises(ConfigError, match="'mine' is taken"):
        register_strategy("mine", reversed_range)
    built_in = get_strategy("range")
    replaced = register_strategy("range", by_topic, replace=True)
    assert get_strategy("range") is replaced
    unregister_strategy("range")
    assert get_strategy("range") is built_in
    with pytest.raises(ConfigError, match="'range' is not registered here"):
        unregister_strategy("range")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "strategy name '' is not allowed"),
        (" mine", "strategy name ' mine' is not allowed"),
        (7, "strategy name 7 is not allowed"),
        ("mine:rule", "a name with ':' is a 'module:attr' reference"),
    ],
)
def test_bad_names_are_refused(name: object, message: str) -> None:
    """A name is a non-empty string without surrounding spaces or ':'."""
    with pytest.raises(ConfigError, match=message):
        register_strategy(name, by_topic)  # type: ignore[arg-type]


def test_what_is_no_rule_is_refused() -> None:
    """A rule is a function, an object with assign() or a class that needs no arguments."""
    with pytest.raises(ConfigError, match="strategy 'mine' is a int; use a function"):
        register_strategy("mine", 42)

    class NeedsWeights(ByTopic):
        def __init__(self, weights: dict[str, int]) -> None:
            self.weights = weights

    with pytest.raises(ConfigError, match="could not be made without arguments"):
        register_strategy("mine", NeedsWeights)


def test_a_rule_gets_its_input_in_one_order() -> None:
    """Members come in node order with owned sorted, topics by name, whatever the caller's order."""
    seen: list[tuple[list[str], list[str], list[tuple[TopicPartition, ...]]]] = []

    def recording(
        partitions: Mapping[str, int], members: Sequence[Member]
    ) -> dict[str, list[TopicPartition]]:
        seen.append(([m.id for m in members], list(partitions), [m.owned for m in members]))
        return by_topic(partitions, members)

    strategy = register_strategy("recording", recording)
    owned = [TopicPartition(B, 1), TopicPartition(A, 0)]
    strategy.assign({B: 2, A: 1}, [Member("10", [A, B], owned), Member("2", [A]), Member("1", [])])
    strategy.assign({"x": 1, "y": 1}, [Member("C2", ["x"]), Member("C10", ["y"])])
    assert seen[0] == (
        ["1", "2", "10"],
        [A, B],
        [(), (), (TopicPartition(A, 0), TopicPartition(B, 1))],
    )
    assert seen[1][0] == ["C10", "C2"]  # not all numbers: Kafka's (Java string) order


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ([("Alpha", 0)], "answered a list, not a mapping of member id -> partitions"),
        ({"C9": []}, r"assigned partitions to 'C9', which is not a member \['C1', 'C2'\]"),
        ({"C1": "Alpha:0"}, "gave member 'C1' 'Alpha:0', not a collection of partitions"),
        ({"C1": [("Alpha", "0")]}, r"gave member 'C1' \('Alpha', '0'\), not a \(topic, partition"),
        ({"C1": [(B, 0)]}, "gave Beta:0 to 'C1', which does not subscribe it"),
        ({"C2": [(A, 2)]}, "gave 'C2' partition Alpha:2, which does not exist"),
        ({"C1": [(A, 0)], "C2": [(A, 0)]}, "gave Alpha:0 to both 'C1' and 'C2'"),
        ({"C1": [(A, 0), (A, 0)]}, "gave Alpha:0 to 'C1' twice"),
        ({"C1": [(A, 0)], "C2": [(A, 1)]}, "assigned Beta:0 to nobody"),
    ],
)
def test_an_invalid_answer_raises_naming_what_is_wrong(answer: object, message: str) -> None:
    """Every subscribed partition goes to one subscriber; anything else names the bad value."""
    with pytest.raises(StrategyContractError, match=message) as raised:
        answering(answer)
    assert (raised.value.strategy, raised.value.violation) == ("fixed", "valid")
    again = pickle.loads(pickle.dumps(raised.value))
    assert (str(again), again.violation) == (str(raised.value), "valid")


def _drops_topic_b(partitions: dict[str, int], members: list[Member]) -> Assignment:
    """A wrong rule that pops Beta off the input it was handed and gives it to nobody."""
    partitions.pop(B, None)
    return {m.id: [TopicPartition(A, n) for n in range(partitions[A])] if i == 0 else []
            for i, m in enumerate(members)}  # fmt: skip


def _drains_its_input(partitions: dict[str, int], members: list[Member]) -> Assignment:
    """A right rule that uses the input it was handed as a work list."""
    answer: dict[str, list[TopicPartition]] = {m.id: [] for m in members}
    given = 0
    while partitions:
        topic, count = partitions.popitem()
        for number in range(count):
            answer[members[given % len(members)].id].append(TopicPartition(topic, number))
            given += 1
    members.clear()
    return answer


def test_a_rule_that_changes_its_input_is_checked_against_the_real_one() -> None:
    """A rule's edits to its input neither hide a wrong answer nor fail a right one."""
    group = [Member("C1", {A, B}), Member("C2", {A, B})]
    with pytest.raises(StrategyContractError, match="assigned Beta:0 to nobody"):
        register_strategy("drops", _drops_topic_b).assign({A: 2, B: 1}, group)
    answer = register_strategy("drains", _drains_its_input).assign({A: 2, B: 1}, group)
    assert sorted(tp for share in answer.values() for tp in share) == [
        TopicPartition(A, 0), TopicPartition(A, 1), TopicPartition(B, 0)
    ]  # fmt: skip
    assert node_share(get_strategy("drains"), {A: 4}, 2, 1)  # members.clear() did no harm


# ------------------------------------------------------------------------------- references
def test_a_module_attr_reference_resolves_without_registering() -> None:
    """'module:attr' imports the rule once, under the reference as its name; it is not listed."""
    strategy = get_strategy("tests.custom_rules:by_topic")
    assert strategy.name == "tests.custom_rules:by_topic"
    assert get_strategy("tests.custom_rules:by_topic") is strategy
    assert "tests.custom_rules:by_topic" not in strategy_names()
    share = node_share(strategy, {A: 3, B: 2}, 2, 1)
    assert share == {TopicPartition(B, 0), TopicPartition(B, 1)}
    assert get_strategy("tests.custom_rules:ByTopic").assign({A: 1}, [Member("0", [A])]) == {
        "0": [TopicPartition(A, 0)]
    }


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("no_such_pkg.rules:by_topic", "module 'no_such_pkg.rules' cannot be imported"),
        ("tests.custom_rules:by_nothing", "module 'tests.custom_rules' has no attribute"),
        ("tests.custom_rules:__doc__", "'tests.custom_rules:__doc__' is a str; use a function"),
    ],
)
def test_a_bad_reference_says_why(name: str, message: str) -> None:
    """A reference that does not import, or names no rule, raises ConfigError saying why."""
    with pytest.raises(ConfigError, match=message):
        get_strategy(name)


def test_an_unknown_name_lists_the_valid_ones_and_how_to_add_one() -> None:
    """The message of an unknown name lists every name and the three ways to add a rule."""
    register_strategy("mine", by_topic)
    with pytest.raises(ConfigError) as raised:
        get_strategy("fair")
    message = str(raised.value)
    assert f"valid names: {', '.join(sorted([*BUILTINS, 'mine']))}." in message
    assert "register_strategy(name, rule)" in message
    assert "'module:attr' reference" in message
    assert "entry point of the group 'client_balance.strategies'" in message


# ----------------------------------------------------------------------------- entry points
def test_an_entry_point_is_found_by_name_and_listed(declare: Callable[[str, str], None]) -> None:
    """An installed entry point is a strategy by its name, loaded when first asked for."""
    declare("by-topic", "tests.custom_rules:by_topic")
    declare("by-topic-class", "tests.custom_rules:ByTopic")
    assert "by-topic" in strategy_names()
    strategy = get_strategy("by-topic")
    assert strategy.name == "by-topic"
    assert get_strategy("by-topic") is strategy
    assert get_strategy("by-topic-class").assign({A: 1}, [Member("0", [A])]) == {
        "0": [TopicPartition(A, 0)]
    }
    check_strategy("by-topic", across_processes=True)  # the fresh process finds it too


def test_an_entry_point_cannot_shadow_a_built_in_nor_be_shadowed_silently(
    declare: Callable[[str, str], None],
) -> None:
    """An entry point named like a built-in is ignored; registering its name needs replace."""
    declare("range", "tests.custom_rules:by_topic")
    declare("by-topic", "tests.custom_rules:by_topic")
    assert get_strategy("range") is _registry._BUILTINS["range"]
    with pytest.raises(ConfigError, match="'by-topic' is taken"):
        register_strategy("by-topic", reversed_range)
    assert register_strategy("by-topic", reversed_range, replace=True).name == "by-topic"


def test_a_broken_entry_point_names_itself(declare: Callable[[str, str], None]) -> None:
    """An entry point that fails to load raises ConfigError naming the entry point."""
    declare("broken", "no_such_pkg.rules:by_topic")
    with pytest.raises(ConfigError, match=r"its entry point 'no_such_pkg\.rules:by_topic' failed"):
        get_strategy("broken")


# ------------------------------------------------------------------------ settings and CLI
def test_settings_accept_registered_names_and_references() -> None:
    """The strategy setting takes a registered name or a reference, and refuses a bad one."""
    register_strategy("by-topic", by_topic)
    common = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "g"}
    assert ClientBalanceSettings(**common, strategy="by-topic").strategy == "by-topic"
    reference = "tests.custom_rules:reversed_range"
    assert ClientBalanceSettings(**common, strategy=reference).strategy == reference
    with pytest.raises(ConfigError, match=r"strategy.*module 'no_such_pkg' cannot be imported"):
        ClientBalanceSettings(**common, strategy="no_such_pkg:rule")


def test_simulate_runs_a_rule_named_by_reference(capsys: pytest.CaptureFixture[str]) -> None:
    """The simulate command runs a rule named module:attr: whole topics to members."""
    argv = ["simulate", "--topics", "Order:3,Stock:2", "--members", "C1,C2", "--strategy"]
    assert main([*argv, "tests.custom_rules:by_topic", "--json"]) == 0
    [round_] = json.loads(capsys.readouterr().out)["strategies"]["tests.custom_rules:by_topic"]
    assert round_["assignment"] == {
        "C1": ["Order-0", "Order-1", "Order-2"],
        "C2": ["Stock-0", "Stock-1"],
    }


def test_simulate_help_names_the_built_ins_and_references(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The help of --strategy lists the built-ins and says module:attr is accepted."""
    assert main(["simulate", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"a built-in strategy ({', '.join(BUILTINS)}; default modulo)" in out
    assert "module:attr, e.g. mypkg.rules:by_topic" in out


def test_the_installed_command_imports_a_rule_from_the_current_directory(tmp_path: Path) -> None:
    """client-balance simulate finds a module in the directory it runs in, as python -m does."""
    (tmp_path / "my_rules.py").write_text(
        "from tests.custom_rules import by_topic as whole_topics\n"
    )
    command = Path(sys.executable).parent / "client-balance"
    done = subprocess.run(
        [str(command), "simulate", "--topics", "Order:3,Stock:2", "--members", "C1,C2",
         "--strategy", "my_rules:whole_topics"],
        cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": ""}, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "strategy my_rules:whole_topics" in done.stdout
    assert "Order-0 Order-1 Order-2" in done.stdout


# ---------------------------------------------------------------------------- the contract
@pytest.mark.parametrize("name", BUILTINS)
def test_every_built_in_keeps_the_contract(name: str) -> None:
    """The built-ins pass the check a user's rule is held to."""
    check_strategy(name, across_processes=False)


@pytest.mark.parametrize(
    "rule",
    [by_topic, reversed_range, ByTopic(), "tests.custom_rules:by_topic", by_given_order],
    ids=["function", "another", "object", "reference", "order-dependent-but-registered"],
)
def test_pure_rules_pass(rule: object) -> None:
    """Deterministic, order-independent rules pass, in this process and in a fresh one."""
    check_strategy(rule)


def test_a_registered_name_is_checked_in_a_fresh_process_too() -> None:
    """A registered top-level function is found by module:qualname in the fresh process."""
    register_strategy("by-topic", by_topic)
    check_strategy("by-topic", across_processes=True)
    check_strategy("range", across_processes=True)


@pytest.mark.parametrize(
    ("rule", "violation", "message"),
    [
        (custom_rules.impure_random, "deterministic", "is not deterministic: the same input"),
        (custom_rules.impure_stateful, "deterministic", "is not deterministic: the same input"),
        (custom_rules.impure_loses_a_partition, "valid", "assigned .* to nobody"),
        (custom_rules.impure_string_hash, "same-in-every-process", "in another Python process"),
        (lambda partitions, members: 1 // 0, "raises", "raised ZeroDivisionError"),
    ],
    ids=["random", "stateful", "loses-a-partition", "string-hash", "raises"],
)
def test_impure_rules_are_caught(rule: object, violation: str, message: str) -> None:
    """Randomness, state, hash seeds, lost partitions and exceptions each fail the check."""
    with pytest.raises(StrategyContractError, match=message) as raised:
        check_strategy(rule)
    assert raised.value.violation == violation
    assert "[example " in str(raised.value)  # the group it failed on is named


class _FirstSubscriberTakesAll:
    """Order-dependent, and (as a built-in would be) used as given, without the registry's order."""

    name = "first-takes-all"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        return dict(by_given_order(partitions, members))


def test_order_dependence_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A strategy used as given that follows the members' order fails the order check."""
    monkeypatch.setitem(_registry._BUILTINS, "first-takes-all", _FirstSubscriberTakesAll())
    with pytest.raises(StrategyContractError, match="depends on the order of its input") as raised:
        check_strategy("first-takes-all", across_processes=False)
    assert raised.value.violation == "order-independent"


def test_examples_replace_the_built_in_groups() -> None:
    """A rule for node mode only passes on node-mode examples and fails on the built-in set."""

    def by_node_number(
        partitions: Mapping[str, int], members: Sequence[Member]
    ) -> dict[str, list[TopicPartition]]:
        owners = sorted(members, key=lambda member: int(member.id))
        return {
            m.id: [TopicPartition(t, p) for t in sorted(m.topics & set(partitions))
                   for p in range(partitions[t]) if p % len(owners) == index]
            for index, m in enumerate(owners)
        }  # fmt: skip

    nodes = [(dict.fromkeys([A, B], 5), [Member(str(n), [A, B]) for n in range(count)])
             for count in (1, 2, 7)]  # fmt: skip
    check_strategy(by_node_number, examples=nodes)
    with pytest.raises(StrategyContractError, match="raised ValueError"):
        check_strategy(by_node_number)


def test_a_rule_no_other_process_can_import_cannot_be_required_there() -> None:
    """across_processes=True needs a rule importable by name; a local function is not."""

    def local(
        partitions: Mapping[str, int], members: Sequence[Member]
    ) -> dict[str, list[TopicPartition]]:
        return by_topic(partitions, members)

    check_strategy(local)  # checked in this process only
    with pytest.raises(ConfigError, match="cannot be found by name in another process"):
        check_strategy(local, across_processes=True)


def test_a_rule_that_raises_is_a_contract_error_naming_the_strategy() -> None:
    """A rule's own exception comes as StrategyContractError(violation="raises"), its cause kept.

    It escaped as it was, and a reconcile round said only "reconcile round failed:
    KeyError(None)", naming no strategy (the review of 2026-11-29, later).
    """

    def broken(partitions: Mapping[str, int], members: Sequence[Member]) -> Assignment:
        raise KeyError(None)

    strategy = register_strategy("broken", broken)
    with pytest.raises(StrategyContractError, match="strategy 'broken' raised KeyError") as raised:
        strategy.assign({A: 2}, [Member("C1", [A])])
    assert raised.value.violation == "raises"
    assert isinstance(raised.value.__cause__, KeyError)
    assert pickle.loads(pickle.dumps(raised.value)).violation == "raises"


def test_check_strategy_keeps_a_raising_rules_own_exception_as_the_cause() -> None:
    """check_strategy() of a rule that raises: its KeyError stays the cause, traceback and all.

    The contract error was raised ``from None`` over the one naming the rule, and the rule's
    own exception (where in the user's code) was lost (the review of 2026-11-29, later).
    """

    def broken(partitions: Mapping[str, int], members: Sequence[Member]) -> Assignment:
        raise KeyError("no such member")

    with pytest.raises(StrategyContractError) as raised:
        check_strategy(register_strategy("broken", broken))
    assert raised.value.violation == "raises"
    assert isinstance(raised.value.__cause__, KeyError)
