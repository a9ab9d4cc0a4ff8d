"""The Java oracle answers as Kafka's own assignors do: seed scenarios and hand-made cases."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from client_balance.broker import ensure_kafka_jars
from tests.conformance import oracle as oracle_module
from tests.conformance.oracle import JavaOracle, OracleError, compile_oracle, oracle_classpath
from tests.seeds import SCENARIOS_PATH

Partition = tuple[str, int]
Assignment = dict[str, set[Partition]]

SEED_SCENARIOS = Path(os.environ.get("CLIENT_BALANCE_SEED_SCENARIOS", SCENARIOS_PATH))


def _load_scenarios() -> list[dict[str, Any]]:
    if not SEED_SCENARIOS.is_file():
        return []
    scenarios: list[dict[str, Any]] = json.loads(SEED_SCENARIOS.read_text())["scenarios"]
    return scenarios


SCENARIOS = _load_scenarios()
SCENARIOS_BY_ID = {scenario["id"]: scenario for scenario in SCENARIOS}


def parse_partition(text: str) -> Partition:
    """``"t0-1"`` as ``("t0", 1)``; the topic may itself contain dashes."""
    topic, _, number = text.rpartition("-")
    return topic, int(number)


def owned_in_scenario(scenario: Mapping[str, Any], member: str) -> list[str]:
    """What ``member`` held before ``scenario``: its ``owned`` list, else the previous round's."""
    spec = scenario["members"][member]
    if "owned" in spec:
        return list(spec["owned"])
    previous = scenario.get("previous_scenario")
    if previous is None:
        return []
    return list(SCENARIOS_BY_ID[previous]["expected"].get(member, []))


def scenario_case(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """A seed scenario as an oracle case (members in the scenario's order)."""
    members = []
    for member, spec in scenario["members"].items():
        owned = [list(parse_partition(p)) for p in owned_in_scenario(scenario, member)]
        members.append(
            {
                "id": member,
                "topics": spec["topics"],
                "owned": owned,
                "generation": spec.get("generation"),
                "rack": spec.get("rack"),
                "instance_id": spec.get("instance_id"),
            }
        )
    return {
        "id": scenario["id"],
        "strategy": scenario["strategy"],
        "topics": scenario["topics"],
        "members": members,
    }


def as_sets(assignment: Mapping[str, list[list[Any]]]) -> Assignment:
    """An oracle assignment (``[[topic, partition], ...]`` per member) as sets of pairs."""
    return {member: {(tp[0], tp[1]) for tp in tps} for member, tps in assignment.items()}


def expected_sets(expected: Mapping[str, list[str]]) -> Assignment:
    """A scenario's ``expected`` table as sets of pairs."""
    return {member: {parse_partition(p) for p in tps} for member, tps in expected.items()}


def validity_problems(
    topics: Mapping[str, int], subscriptions: Mapping[str, list[str]], assignment: Assignment
) -> list[str]:
    """Why ``assignment`` is invalid: a partition unassigned, doubly held, or unsubscribed."""
    problems = []
    owners: dict[Partition, list[str]] = {}
    for member, partitions in assignment.items():
        for topic, number in partitions:
            owners.setdefault((topic, number), []).append(member)
            if topic not in subscriptions.get(member, []):
                problems.append(f"{member} got {topic}-{number} without subscribing to {topic}")
    wanted = {
        (topic, number)
        for member_topics in subscriptions.values()
        for topic in member_topics
        if topic in topics
        for number in range(topics[topic])
    }
    for partition in sorted(wanted):
        holders = owners.get(partition, [])
        if len(holders) != 1:
            problems.append(f"{partition[0]}-{partition[1]} is held by {holders}")
    problems += [f"{p[0]}-{p[1]} does not exist" for p in sorted(set(owners) - wanted)]
    return problems


def balance_problems(subscriptions: Mapping[str, list[str]], assignment: Assignment) -> list[str]:
    """Breaches of sticky balance: a member 2+ partitions short could take one from another."""
    problems = []
    for rich_partitions in assignment.values():
        for poor, poor_partitions in assignment.items():
            if len(rich_partitions) > len(poor_partitions) + 1:
                movable = [tp for tp in rich_partitions if tp[0] in subscriptions[poor]]
                if movable:
                    problems.append(f"{poor} ({len(poor_partitions)}) could take {movable}")
    return problems


@pytest.fixture(scope="module")
def oracle() -> Iterator[JavaOracle]:
    """One JVM for the whole module."""
    with JavaOracle() as java:
        yield java


@pytest.fixture(scope="module")
def seed_answers(oracle: JavaOracle) -> dict[str, dict[str, Any]]:
    """Java's answers to every seed scenario, from one batch."""
    answers = oracle.assign([scenario_case(scenario) for scenario in SCENARIOS])
    return {answer["id"]: answer for answer in answers}


def test_seed_scenarios_are_present() -> None:
    """The seed scenario file exists and holds scenarios."""
    assert SEED_SCENARIOS.is_file(), f"missing {SEED_SCENARIOS}"
    assert SCENARIOS


@pytest.mark.parametrize(
    "scenario", [s for s in SCENARIOS if s.get("previous_scenario")], ids=lambda s: s["id"]
)
def test_seed_owned_partitions_match_previous_round(scenario: dict[str, Any]) -> None:
    """A scenario's owned partitions are what its previous scenario expected."""
    previous = SCENARIOS_BY_ID[scenario["previous_scenario"]]
    for member in scenario["members"]:
        assert set(owned_in_scenario(scenario, member)) == set(previous["expected"][member])


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s["id"])
def test_seed_scenario(scenario: dict[str, Any], seed_answers: dict[str, dict[str, Any]]) -> None:
    """Java's assignment equals the expected table (exact) or is valid, balanced and sticky."""
    answer = seed_answers[scenario["id"]]
    assert "error" not in answer, answer["error"]
    got = as_sets(answer["assignment"])
    assert set(got) == set(scenario["members"])
    if scenario["check"] == "exact":
        expected = expected_sets(scenario["expected"])
        for member in scenario["members"]:
            assert got[member] == expected.get(member, set()), member
        return
    assert scenario["check"] == "properties"
    subscriptions = {member: spec["topics"] for member, spec in scenario["members"].items()}
    assert validity_problems(scenario["topics"], subscriptions, got) == []
    assert balance_problems(subscriptions, got) == []
    for member in scenario["members"]:
        kept = {parse_partition(p) for p in owned_in_scenario(scenario, member)}
        assert kept <= got[member], f"{member} lost {sorted(kept - got[member])}"


def test_roundrobin_javadoc_example(oracle: JavaOracle) -> None:
    """RoundRobin on unequal subscriptions gives the RoundRobinAssignor javadoc's table."""
    answer = oracle.assign_one(
        {
            "id": "rr-javadoc",
            "strategy": "roundrobin",
            "topics": {"t0": 1, "t1": 2, "t2": 3},
            "members": [
                {"id": "C0", "topics": ["t0"]},
                {"id": "C1", "topics": ["t0", "t1"]},
                {"id": "C2", "topics": ["t0", "t1", "t2"]},
            ],
        }
    )
    assert answer == {
        "id": "rr-javadoc",
        "assignment": {
            "C0": [["t0", 0]],
            "C1": [["t1", 0]],
            "C2": [["t1", 1], ["t2", 0], ["t2", 1], ["t2", 2]],
        },
    }


def test_range_orders_static_members_first(oracle: JavaOracle) -> None:
    """Range serves static members (by instance id) before dynamic ones (by member id)."""
    members: list[dict[str, Any]] = [
        {"id": "A", "topics": ["t0"]},
        {"id": "M", "topics": ["t0"], "instance_id": "i1"},
        {"id": "Z", "topics": ["t0"], "instance_id": "i0"},
    ]
    dynamic = [{"id": m["id"], "topics": m["topics"]} for m in members]
    static_answer, dynamic_answer = oracle.assign(
        [
            {"id": "static", "strategy": "range", "topics": {"t0": 3}, "members": members},
            {"id": "dynamic", "strategy": "range", "topics": {"t0": 3}, "members": dynamic},
        ]
    )
    assert static_answer["assignment"] == {"Z": [["t0", 0]], "M": [["t0", 1]], "A": [["t0", 2]]}
    assert dynamic_answer["assignment"] == {"A": [["t0", 0]], "M": [["t0", 1]], "Z": [["t0", 2]]}


def test_cooperative_sticky_withholds_partitions_that_change_owner(oracle: JavaOracle) -> None:
    """When C1 leaves and C2, C3 join, a partition C0 must give up goes to nobody until revoked."""
    before = {"C0": [["t0", 0], ["t0", 1], ["t0", 2]], "C1": [["t0", 3], ["t0", 4], ["t0", 5]]}
    members: list[dict[str, Any]] = [
        {"id": "C0", "topics": ["t0"], "owned": before["C0"], "generation": 5},
        {"id": "C2", "topics": ["t0"]},
        {"id": "C3", "topics": ["t0"]},
    ]
    first = as_sets(
        oracle.assign_one(
            {"id": "r1", "strategy": "cooperative-sticky", "topics": {"t0": 6}, "members": members}
        )["assignment"]
    )
    c0_before = {("t0", 0), ("t0", 1), ("t0", 2)}
    assert first["C0"] < c0_before
    assert len(first["C0"]) == 2
    withheld = c0_before - first["C0"]
    assigned = set().union(*first.values())
    assert assigned == {("t0", p) for p in range(6)} - withheld
    assert first["C2"] | first["C3"] == {("t0", 3), ("t0", 4), ("t0", 5)}

    # C0 revokes the withheld partition and everyone rejoins: now it is handed out, nothing moves.
    rejoin = [
        {"id": m, "topics": ["t0"], "owned": sorted(map(list, tps)), "generation": 6}
        for m, tps in first.items()
    ]
    second = as_sets(
        oracle.assign_one(
            {"id": "r2", "strategy": "cooperative-sticky", "topics": {"t0": 6}, "members": rejoin}
        )["assignment"]
    )
    assert all(first[m] <= second[m] for m in first)
    assert validity_problems({"t0": 6}, {m: ["t0"] for m in second}, second) == []
    assert sorted(len(tps) for tps in second.values()) == [2, 2, 2]

    # The eager StickyAssignor moves the partition at once instead.
    eager = as_sets(
        oracle.assign_one(
            {"id": "eager", "strategy": "sticky", "topics": {"t0": 6}, "members": members}
        )["assignment"]
    )
    assert validity_problems({"t0": 6}, {m: ["t0"] for m in eager}, eager) == []


@pytest.mark.parametrize("strategy", ["sticky", "cooperative-sticky"])
def test_sticky_assignors_trust_the_newest_generation(oracle: JavaOracle, strategy: str) -> None:
    """When two members claim a partition, the claim of the newer generation wins."""
    for order in (["C0", "C1"], ["C1", "C0"]):
        claims = {"C0": 2, "C1": 3}
        members = [
            {"id": m, "topics": ["t0"], "owned": [["t0", 0]], "generation": claims[m]}
            for m in order
        ]
        answer = oracle.assign_one(
            {"id": "gen", "strategy": strategy, "topics": {"t0": 2}, "members": members}
        )
        assert answer["assignment"] == {"C0": [["t0", 1]], "C1": [["t0", 0]]}


def test_rack_aware_range_follows_partition_racks(oracle: JavaOracle) -> None:
    """With partition_racks, Range gives each consumer the partitions on its own rack."""
    case: dict[str, Any] = {
        "id": "racks",
        "strategy": "range",
        "topics": {"t0": 4},
        "members": [
            {"id": "C0", "topics": ["t0"], "rack": "r2"},
            {"id": "C1", "topics": ["t0"], "rack": "r1"},
        ],
        "partition_racks": {"t0:0": ["r1"], "t0:1": ["r1"], "t0:2": ["r2"], "t0:3": ["r2"]},
    }
    rackless = {key: value for key, value in case.items() if key != "partition_racks"}
    with_racks, without_racks = oracle.assign([case, rackless])
    assert with_racks["assignment"] == {"C0": [["t0", 2], ["t0", 3]], "C1": [["t0", 0], ["t0", 1]]}
    assert without_racks["assignment"] == {
        "C0": [["t0", 0], ["t0", 1]],
        "C1": [["t0", 2], ["t0", 3]],
    }


def test_bad_case_reports_error_and_oracle_goes_on(oracle: JavaOracle) -> None:
    """A case Java rejects comes back as an error, and the next case is still answered."""
    bad, good = oracle.assign(
        [
            {"id": "bad", "strategy": "nope", "topics": {"t0": 1}, "members": []},
            {
                "id": "good",
                "strategy": "range",
                "topics": {"t0": 1},
                "members": [{"id": "C0", "topics": ["t0"]}],
            },
        ]
    )
    assert bad == {
        "id": "bad",
        "error": "java.lang.IllegalArgumentException: unknown strategy 'nope'",
    }
    assert good == {"id": "good", "assignment": {"C0": [["t0", 0]]}}


def test_every_member_is_in_the_answer(oracle: JavaOracle) -> None:
    """Members that get nothing are still listed, with an empty list."""
    answer = oracle.assign_one(
        {
            "id": "idle",
            "strategy": "roundrobin",
            "topics": {"t0": 1},
            "members": [{"id": "C0", "topics": ["t0"]}, {"id": "C1", "topics": ["t0"]}],
        }
    )
    assert answer["assignment"] == {"C0": [["t0", 0]], "C1": []}


def test_repeat_reports_median_nanos() -> None:
    """With repeat, each answer also carries the median assign() time and whether runs agreed."""
    case = {
        "id": "timed",
        "strategy": "cooperative-sticky",
        "topics": {"t0": 8},
        "members": [{"id": f"C{i}", "topics": ["t0"]} for i in range(3)],
    }
    with JavaOracle(repeat=5, warmup=2) as timed:
        [answer] = timed.assign([case])
    assert isinstance(answer["nanos"], int)
    assert answer["nanos"] > 0
    assert answer["stable"] is True
    assert sorted(len(tps) for tps in answer["assignment"].values()) == [2, 3, 3]


def test_compiled_classes_are_cached() -> None:
    """A second compilation of an unchanged source reuses the cached classes."""
    first = compile_oracle()
    stamp = (first / "AssignorOracle.class").stat().st_mtime_ns
    assert compile_oracle() == first
    assert (first / "AssignorOracle.class").stat().st_mtime_ns == stamp


@pytest.fixture
def scratch_libs(tmp_path: Path) -> Path:
    """A libs folder of links to the real jars, so compiled classes are cached under tmp_path."""
    libs = tmp_path / "libs"
    libs.mkdir()
    for jar in oracle_classpath(ensure_kafka_jars()):
        (libs / jar.name).symlink_to(jar)
    return libs


def test_changed_source_is_recompiled(
    scratch_libs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Editing the Java source compiles it afresh into a folder named by the new hash."""
    first = compile_oracle(scratch_libs)
    edited = tmp_path / "AssignorOracle.java"
    edited.write_text(oracle_module.JAVA_SOURCE.read_text() + "\n// edited\n")
    monkeypatch.setattr(oracle_module, "JAVA_SOURCE", edited)
    second = compile_oracle(scratch_libs)
    assert second != first
    assert second.parent == first.parent == tmp_path / "oracle-classes"
    assert (second / "AssignorOracle.class").is_file()


def test_compile_failure_shows_javac_output(
    scratch_libs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source javac rejects raises OracleError carrying javac's message, and caches nothing."""
    broken = tmp_path / "AssignorOracle.java"
    broken.write_text("public final class AssignorOracle { int x = ; }\n")
    monkeypatch.setattr(oracle_module, "JAVA_SOURCE", broken)
    with pytest.raises(OracleError, match=r"javac failed[\s\S]*illegal start of expression"):
        compile_oracle(scratch_libs)
    assert list((tmp_path / "oracle-classes").iterdir()) == []


def test_missing_javac_is_a_clear_error(
    scratch_libs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a JDK on PATH or JAVA_HOME, compiling says that javac is missing."""
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(OracleError, match="needs 'javac' from a JDK"):
        compile_oracle(scratch_libs)


def test_close_ends_the_jvm() -> None:
    """close() ends the Java process, and a closed oracle refuses further cases."""
    java = JavaOracle()
    java.close()
    assert java._process.returncode == 0
    with pytest.raises(OracleError, match="not running"):
        java.assign([{"id": "late", "strategy": "range", "topics": {}, "members": []}])
