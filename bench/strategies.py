"""Assignment strategies: ``get_strategy(name).assign()`` against Kafka's Java and kafka-python's.

A case is strategy x size x round x peer. Sizes follow Kafka's own sticky-assignor tests
(``AbstractStickyAssignorTest``): topics ``t000..`` with equal partition counts, members
``c0000..``, every member subscribing every topic, or, for ``nonequal``, the last member only
the first topic. Round ``fresh`` is a new group; round ``rebalance`` is the Java test's round 2:
every member but the first reports what it got in round 1 (Kafka's Java answer to the fresh
round, the same input for all three sides) with generation 1, and the first member rejoins
empty.

Sides, timed on the same inputs, which are built outside the timed region:

- ours: ``get_strategy(name).assign(partitions, members)``, median of ``--runs`` runs.
- Java: ``ConsumerPartitionAssignor.assign()`` of kafka-clients through the conformance
  oracle (``tests/conformance/oracle.py``), one JVM for the whole run, ``--warmup`` untimed
  runs per case for the JIT, then the median of ``--runs``. Eager members present owned
  partitions the way the Java consumer does (sticky: its userData), cooperative ones on the
  subscription.
- kafka-python: its Range/RoundRobin/Sticky/CooperativeSticky assignors called as its consumer
  coordinator calls them: a cluster-metadata stub with ``topics()`` and
  ``partitions_for_topic()`` (a fresh set per call, as ``ClusterMetadata``), and per member the
  subscription its own assignor instance writes after ``on_assignment(round 1, generation 1)``,
  encoded and decoded as on the wire (sticky: ``StickyAssignorUserData`` v1 with generation;
  cooperative: owned partitions with ``generation_id`` 1, subscription v2). Only where it
  finishes in reasonable time (at most 10k partitions and 1,000 members); its sticky
  assignor alone takes 8 to 15 s there, so it runs ``--peer-runs`` times (default 3). It
  runs in a process of its own (``bench/kafka_python_peer.py``), as Java runs in its JVM:
  in the bench's process its allocations slowed the assignors of ours timed after them.

Each case prints one JSON line in the format of every bench script: ``bench`` ("strategies"),
``case``, ``ours`` and ``peer`` (median seconds of one ``assign()``, also as ``ours_s`` and
``peer_s``), ``peer_name`` (``java-4.3.1``, ``kafka-python-3.0.12``), ``unit`` ("s") and
``ratio`` = peer / ours, so above 1 means we are faster (10 = ten times faster; 0.2 = we take
five times as long). Then the case's shape, the single runs, and checks of every answer:
``valid`` (every partition of a subscribed topic goes to exactly one of its subscribers; in a
cooperative rebalance a partition may instead be withheld while its owner gives it up, counted
in ``withheld``) and ``balanced`` (equal subscriptions: counts differ by at most one; unequal:
Kafka's test criterion, no member holds a partition that a member with two fewer subscribes;
counted on the answer as given, so a cooperative round that withholds partitions, or ``range``
with fewer partitions per topic than members, can be valid and not balanced). ``peer_valid``,
``peer_balanced`` are the same checks of the peer's answer. ``load``: the 1-minute load
average before our timing and after the peer's.
A strategy that is not registered yet, or a side that fails, gives a line with ``error``.
A header line with the machine goes to stderr.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_python_peer import kafka_python_version, time_kafka_python
from measure import PeerProcess, timed
from progress_bar import advance, emit, progress  # bench/progress_bar.py

from client_balance.broker import ensure_kafka_jars, find_java
from client_balance.errors import ConfigError
from client_balance.strategies import Member, TopicPartition, get_strategy

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script, bench/ is on the path but not the repository
    sys.path.insert(0, str(ROOT))

from tests.conformance.oracle import JavaOracle, OracleError, oracle_classpath  # noqa: E402

Pairs = Sequence[tuple[str, int]]
Answer = Mapping[str, Pairs]
"""Member id -> its (topic, partition) pairs: what every side's answer is checked as."""

JAVA_HEAP = "6g"
"""-Xmx of the oracle JVM: a 1M-partition case, its owned lists and the assignor's maps."""
KAFKA_PYTHON_MAX = (10_000, 1_000)
"""Largest (partitions, members) kafka-python runs at; above it a sticky run takes minutes."""
COOPERATIVE = "cooperative-sticky"
BENCH = "strategies"
GENERATION = 1


@dataclass(frozen=True)
class Size:
    """Topics x partitions per topic, and members."""

    label: str
    topics: int
    partitions_per_topic: int
    members: int

    @property
    def partitions(self) -> int:
        """All partitions."""
        return self.topics * self.partitions_per_topic


SMALL = Size("1k", 10, 100, 100)
TEN_K = Size("10k", 100, 100, 1_000)
HUNDRED_K = Size("100k", 100, 1_000, 1_000)
ONE_M = Size("1m", 500, 2_000, 2_000)  # testLargeAssignmentAndGroupWithUniformSubscription


@dataclass(frozen=True)
class Scenario:
    """A strategy at a size and round; one JSON line per peer."""

    strategy: str
    size: Size
    round: str
    nonequal: bool = False

    @property
    def name(self) -> str:
        """``sticky-nonequal-10k-x1000-rebalance``."""
        shape = "-nonequal" if self.nonequal else ""
        return f"{self.strategy}{shape}-{self.size.label}-x{self.size.members}-{self.round}"

    @property
    def peers(self) -> tuple[str, ...]:
        """Java always; kafka-python where it finishes in reasonable time."""
        small = (self.size.partitions, self.size.members) <= KAFKA_PYTHON_MAX
        return ("java", "kafka-python") if small else ("java",)

    def case(self, peer: str) -> str:
        """The name ``--case`` selects and the JSON line carries."""
        return f"{self.name}-vs-{peer}"


def _both_rounds(strategy: str, size: Size, *, nonequal: bool = False) -> list[Scenario]:
    return [Scenario(strategy, size, round_, nonequal) for round_ in ("fresh", "rebalance")]


def plan(*, quick: bool) -> list[Scenario]:
    """The cases of a full run, or of a ``--quick`` smoke run (small sizes only)."""
    if quick:
        return [
            *_both_rounds("range", SMALL),
            *_both_rounds("roundrobin", SMALL),
            *_both_rounds("sticky", SMALL),
            *_both_rounds(COOPERATIVE, SMALL),
            *_both_rounds("sticky", SMALL, nonequal=True),
        ]
    return [
        *_both_rounds("range", TEN_K),
        *_both_rounds("roundrobin", TEN_K),
        *_both_rounds("sticky", TEN_K),
        *_both_rounds(COOPERATIVE, TEN_K),
        *_both_rounds("sticky", TEN_K, nonequal=True),
        *_both_rounds("sticky", HUNDRED_K, nonequal=True),
        *_both_rounds("range", ONE_M),
        *_both_rounds("roundrobin", ONE_M),
        *_both_rounds("sticky", ONE_M),
        *_both_rounds(COOPERATIVE, ONE_M),
    ]


# ------------------------------------------------------------------------------ the group


@dataclass(frozen=True)
class Group:
    """Topics with their partition counts and each member's subscription, members in order."""

    topics: dict[str, int]
    subscriptions: dict[str, tuple[str, ...]]
    equal: bool


def _name(prefix: str, index: int, count: int) -> str:
    # Kafka's tests: getCanonicalName("t", i, max) pads i to the digits of max.
    return f"{prefix}{index:0{len(str(count))}d}"


def make_group(scenario: Scenario) -> Group:
    """The Java test's group: every member subscribes every topic, or the last only topic 0."""
    size = scenario.size
    topics = {_name("t", i, size.topics): size.partitions_per_topic for i in range(size.topics)}
    every = tuple(topics)
    subscriptions = {_name("c", i, size.members): every for i in range(size.members)}
    if scenario.nonequal:
        subscriptions[_name("c", size.members - 1, size.members)] = every[:1]
    return Group(topics, subscriptions, equal=not scenario.nonequal)


def previous_round(group: Group, round_one: Answer) -> dict[str, list[tuple[str, int]]]:
    """Owned partitions of the rebalance round: round 1's, for every member but the first."""
    first = next(iter(group.subscriptions))
    return {
        member: [(topic, partition) for topic, partition in round_one.get(member, ())]
        for member in group.subscriptions
        if member != first
    }


# ------------------------------------------------------------------------------ checks


def _counts_balanced(group: Group, answer: Answer) -> bool:
    counts = {member: len(answer.get(member, ())) for member in group.subscriptions}
    if group.equal:
        return max(counts.values()) - min(counts.values()) <= 1
    # Kafka's verifyValidityAndBalance: if two members differ by more than one, the busier one
    # holds no topic that the other subscribes.
    least: dict[str, int] = {}
    for member, topics in group.subscriptions.items():
        for topic in topics:
            least[topic] = min(least.get(topic, counts[member]), counts[member])
    return all(
        least[topic] >= counts[member] - 1
        for member, pairs in answer.items()
        for topic in {topic for topic, _ in pairs}
    )


def _placement_fault(
    group: Group,
    answer: Answer,
    holder: dict[str, list[str | None]],
    owner: Mapping[tuple[str, int], str],
) -> str | None:
    """Fills ``holder`` (topic -> member per partition); the first misplaced partition."""
    fault = None
    if set(answer) != set(group.subscriptions):
        fault = "the answer's member ids are not the group's"
    for member, pairs in answer.items():
        subscribed = group.subscriptions.get(member, ())
        for topic, partition in pairs:
            slots = holder.get(topic)
            if topic not in subscribed or slots is None or not 0 <= partition < len(slots):
                fault = fault or f"{member} got {topic}:{partition}, which it does not subscribe"
            elif slots[partition] is not None:
                fault = fault or f"{topic}:{partition} went to {slots[partition]} and {member}"
            else:
                slots[partition] = member
                previous = owner.get((topic, partition), member)
                if previous != member:
                    fault = fault or f"{topic}:{partition} added to {member}; {previous} owns it"
    return fault


def check(
    group: Group,
    answer: Answer,
    owned: Mapping[str, Pairs] | None = None,
    *,
    cooperative: bool = False,
) -> dict[str, Any]:
    """``valid``, ``balanced`` and (cooperative) ``withheld`` of an answer, and its first fault."""
    holder: dict[str, list[str | None]] = {
        topic: [None] * count for topic, count in group.topics.items()
    }
    owner: dict[tuple[str, int], str] = {}
    if cooperative and owned:
        owner = {(topic, p): member for member, pairs in owned.items() for topic, p in pairs}
    fault = _placement_fault(group, answer, holder, owner)
    unassigned = [
        (topic, partition)
        for topic, slots in holder.items()
        for partition, holder_id in enumerate(slots)
        if holder_id is None
    ]
    # A cooperative round may leave out a partition while its owner gives it up.
    withheld = sum(1 for tp in unassigned if tp in owner)
    if withheld < len(unassigned):
        topic, partition = next(tp for tp in unassigned if tp not in owner)
        fault = fault or f"{topic}:{partition} is not assigned"
    result: dict[str, Any] = {"valid": fault is None, "balanced": _counts_balanced(group, answer)}
    if cooperative:
        result["withheld"] = withheld
    if fault is not None:
        result["fault"] = fault
    return result


# ------------------------------------------------------------------------------ timing


# ------------------------------------------------------------------------------ ours


def our_members(group: Group, owned: Mapping[str, Pairs]) -> list[Member]:
    """Our ``Member``s; owners are of generation 1, the rest new."""
    return [
        Member(
            member,
            topics,
            owned=tuple(TopicPartition(topic, p) for topic, p in owned.get(member, ())),
            generation=GENERATION if member in owned else -1,
        )
        for member, topics in group.subscriptions.items()
    ]


# ------------------------------------------------------------------------------ Java


def java_case(scenario: Scenario, group: Group, owned: Mapping[str, Pairs]) -> dict[str, Any]:
    """The oracle's JSON case (format at the top of ``AssignorOracle.java``)."""
    members: list[dict[str, Any]] = []
    for member, topics in group.subscriptions.items():
        entry: dict[str, Any] = {"id": member, "topics": list(topics)}
        if member in owned:
            entry["owned"] = [[topic, partition] for topic, partition in owned[member]]
            entry["generation"] = GENERATION
        members.append(entry)
    return {"id": scenario.name, "strategy": scenario.strategy, "topics": group.topics,
            "members": members}  # fmt: skip


def java_answer(answer: Mapping[str, Any]) -> dict[str, list[tuple[str, int]]]:
    """The oracle's assignment as (topic, partition) pairs."""
    return {
        member: [(topic, partition) for topic, partition in pairs]
        for member, pairs in answer["assignment"].items()
    }


# ------------------------------------------------------------------------------ the run


def _load() -> float:
    """The 1-minute load average: each line carries it before ours and after the peer's."""
    return round(os.getloadavg()[0], 2)


def _median(times: Sequence[float]) -> float:
    return statistics.median(times)


def _rounded(times: Sequence[float]) -> list[float]:
    return [round(t, 6) for t in times]


class Bench:
    """Runs scenarios; holds the JVM, kafka-python's process and Java's last fresh answer."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.runs: int = args.runs
        self.warmup: int = args.warmup
        self.peer_runs: int = args.peer_runs
        self.budget_s: float = args.budget
        self.java_heap: str = args.java_heap
        self._oracle: JavaOracle | None = None
        self._kafka_python_process = PeerProcess()
        self._round_one: tuple[tuple[str, str, bool], dict[str, list[tuple[str, int]]]] | None
        self._round_one = None
        self.java_peer = "java-" + kafka_clients_version()

    def close(self) -> None:
        """Stop the JVM and kafka-python's process."""
        self._kafka_python_process.close()
        if self._oracle is not None:
            self._oracle.close()
            self._oracle = None

    def oracle(self) -> JavaOracle:
        """The timing JVM, started on first use (and again after it died)."""
        if self._oracle is None:
            self._oracle = JavaOracle(
                repeat=self.runs,
                warmup=self.warmup,
                timeout=1800.0,
                java_options=[f"-Xmx{self.java_heap}"],
            )
        return self._oracle

    def java(self, case: Mapping[str, Any]) -> dict[str, Any]:
        """The oracle's answer; a dead JVM is replaced for the next case."""
        try:
            return self.oracle().assign_one(case)
        except OracleError:
            self.close()
            raise

    @staticmethod
    def kafka_python() -> str:
        """``kafka-python-3.0.12``; ``PackageNotFoundError`` when it is not installed."""
        return f"kafka-python-{kafka_python_version()}"

    def peer_name(self, peer: str) -> str:
        """``java-4.3.1``, ``kafka-python-3.0.12``: the peer with its version."""
        if peer == "java":
            return self.java_peer
        try:
            return self.kafka_python()
        except importlib.metadata.PackageNotFoundError:
            return peer

    def round_one(self, scenario: Scenario, group: Group) -> dict[str, list[tuple[str, int]]]:
        """Java's answer to the fresh round of this strategy and group (kept from that case)."""
        key = (scenario.strategy, scenario.size.label, scenario.nonequal)
        if self._round_one is not None and self._round_one[0] == key:
            return self._round_one[1]
        fresh = Scenario(scenario.strategy, scenario.size, "fresh", scenario.nonequal)
        answer = self.java(java_case(fresh, group, {}))
        if "error" in answer:
            raise OracleError(f"Java rejected the fresh round: {answer['error']}")
        return self._remember(fresh, answer)

    def _remember(
        self, fresh: Scenario, answer: Mapping[str, Any]
    ) -> dict[str, list[tuple[str, int]]]:
        round_one = java_answer(answer)
        self._round_one = ((fresh.strategy, fresh.size.label, fresh.nonequal), round_one)
        return round_one

    def run(self, scenario: Scenario, peers: Sequence[str]) -> Iterator[dict[str, Any]]:
        """One JSON line per peer."""
        size = scenario.size
        load_before = _load()
        head: dict[str, Any] = {
            "strategy": scenario.strategy,
            "subscriptions": "nonequal" if scenario.nonequal else "equal",
            "topics": size.topics,
            "partitions": size.partitions,
            "members": size.members,
            "round": scenario.round,
        }

        def failed(peer: str, error: str) -> dict[str, Any]:
            return {
                "bench": BENCH,
                "case": scenario.case(peer),
                "ours": None,
                "peer": None,
                "peer_name": self.peer_name(peer),
                "unit": "s",
                "ratio": None,
                **head,
                "error": error,
            }

        try:
            strategy = get_strategy(scenario.strategy)
        except ConfigError as error:  # not registered (yet)
            yield from (failed(peer, f"ours: {error}") for peer in peers)
            return
        group = make_group(scenario)
        cooperative = scenario.strategy == COOPERATIVE
        owned: dict[str, list[tuple[str, int]]] = {}
        if scenario.round == "rebalance":
            try:
                owned = previous_round(group, self.round_one(scenario, group))
            except OracleError as error:
                yield from (failed(peer, f"round 1 from Java: {error}") for peer in peers)
                return

        members = our_members(group, owned)
        try:
            ours_times, ours_answer = timed(
                lambda: lambda: strategy.assign(group.topics, members), self.runs, self.budget_s
            )
        except Exception as error:  # a broken strategy must not stop the other cases
            yield from (failed(peer, f"ours: {type(error).__name__}: {error}") for peer in peers)
            return
        ours_s = _median(ours_times)
        ours: dict[str, Any] = {
            "ours_s": round(ours_s, 6),
            **check(group, ours_answer, owned, cooperative=cooperative),
        }
        del ours_answer
        for peer in peers:
            try:
                line = (
                    self._java_line(scenario, group, owned)
                    if peer == "java"
                    else self._kafka_python_line(scenario, group, owned)
                )
            except Exception as error:  # one failing side must not stop the other cases
                yield failed(peer, f"{peer}: {type(error).__name__}: {error}")
                continue
            if isinstance(line, str):
                yield failed(peer, line)
                continue
            yield {
                "bench": BENCH,
                "case": scenario.case(peer),
                "ours": ours["ours_s"],
                "peer": line["peer_s"],
                "peer_name": line.pop("peer_name"),
                "unit": "s",
                "ratio": round(line["peer_s"] / ours_s, 3) if ours_s > 0 else None,
                **head,
                **ours,
                "runs": len(ours_times),
                "ours_runs_s": _rounded(ours_times),
                **line,
                "load": [load_before, _load()],
            }

    def _java_line(
        self, scenario: Scenario, group: Group, owned: Mapping[str, Pairs]
    ) -> dict[str, Any] | str:
        answer = self.java(java_case(scenario, group, owned))
        if "error" in answer:
            return f"java: {answer['error']}"
        if scenario.round == "fresh":
            self._remember(scenario, answer)
        checked = check(
            group, java_answer(answer), owned, cooperative=scenario.strategy == COOPERATIVE
        )
        return {
            "peer_name": self.java_peer,
            "peer_s": round(answer["nanos"] / 1e9, 6),
            "peer_runs": self.runs,
            "peer_runs_s": [round(nanos / 1e9, 6) for nanos in answer.get("runs_nanos", [])],
            "peer_warmup": self.warmup,
            "peer_stable": answer.get("stable"),
            **{f"peer_{key}": value for key, value in checked.items()},
        }

    def _kafka_python_line(
        self, scenario: Scenario, group: Group, owned: Mapping[str, Pairs]
    ) -> dict[str, Any] | str:
        try:
            kafka_python = self.kafka_python()
        except importlib.metadata.PackageNotFoundError as error:
            return f"kafka-python is not installed ({error}); `make bench` installs it"
        # In its own process: its allocations must not stay in the heap ours are timed in.
        times, answer = self._kafka_python_process.call(
            functools.partial(
                time_kafka_python, scenario.strategy, dict(group.topics),
                {member: list(topics) for member, topics in group.subscriptions.items()},
                {member: list(pairs) for member, pairs in owned.items()},
                generation=GENERATION,
                runs=min(self.runs, self.peer_runs), budget_s=self.budget_s,
            )
        )  # fmt: skip
        checked = check(group, answer, owned, cooperative=scenario.strategy == COOPERATIVE)
        return {
            "peer_name": kafka_python,
            "peer_s": round(_median(times), 6),
            "peer_runs": len(times),
            "peer_runs_s": _rounded(times),
            **{f"peer_{key}": value for key, value in checked.items()},
        }


# ------------------------------------------------------------------------------ main


def kafka_clients_version() -> str:
    """Version of the kafka-clients jar the oracle runs (``kafka-clients-4.3.1.jar``)."""
    jar = oracle_classpath(ensure_kafka_jars())[0].name
    return jar.removeprefix("kafka-clients-").removesuffix(".jar")


def machine() -> dict[str, Any]:
    """The header: where the figures come from."""
    try:
        shown = subprocess.run(
            [find_java(), "-version"], capture_output=True, text=True, timeout=60, check=False
        )
        java = (shown.stderr or shown.stdout).splitlines()[0].strip()
    except Exception as error:  # the header must not stop the run
        java = f"unknown ({error})"
    try:
        kafka_python = kafka_python_version()
    except importlib.metadata.PackageNotFoundError:
        kafka_python = None
    return {
        "bench": BENCH,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "java": java,
        "kafka_clients": kafka_clients_version(),
        "kafka_python": kafka_python,
    }


def select(
    scenarios: list[Scenario], names: Sequence[str]
) -> list[tuple[Scenario, tuple[str, ...]]]:
    """Scenarios with the peers to run: all, or those ``--case`` names (a case or a scenario)."""
    if not names:
        return [(scenario, scenario.peers) for scenario in scenarios]
    chosen = []
    for scenario in scenarios:
        if scenario.name in names:
            chosen.append((scenario, scenario.peers))
        else:
            peers = tuple(peer for peer in scenario.peers if scenario.case(peer) in names)
            if peers:
                chosen.append((scenario, peers))
    return chosen


def main(argv: list[str] | None = None) -> int:
    """Run the cases and print their JSON lines."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes only (smoke run)")
    parser.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this case (repeatable); a name without -vs-PEER runs all its peers",
    )
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of ours and Java")
    parser.add_argument("--warmup", type=int, default=3, help="untimed Java runs per case")
    parser.add_argument(
        "--peer-runs", type=int, default=3, help="at most this many kafka-python runs"
    )
    parser.add_argument(
        "--budget", type=float, default=300.0, help="stop timing a side after this many seconds"
    )
    parser.add_argument("--java-heap", default=JAVA_HEAP, help="-Xmx of the Java oracle")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.peer_runs < 1 or args.warmup < 0:
        parser.error("--runs and --peer-runs must be >= 1, --warmup >= 0")

    every = plan(quick=False) + plan(quick=True)
    if args.list:
        for scenario in every:
            for peer in scenario.peers:
                print(scenario.case(peer))
        return 0
    chosen = select(every if args.case else plan(quick=args.quick), args.case)
    if not chosen:
        parser.error(f"no case named {', '.join(args.case)}; see --list")

    print(json.dumps(machine()), file=sys.stderr, flush=True)
    bench = Bench(args)
    try:
        with progress("strategies", sum(len(peers) for _, peers in chosen)):
            for scenario, peers in chosen:
                for line in bench.run(scenario, peers):
                    emit(json.dumps(line))
                    advance(line["case"])
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
