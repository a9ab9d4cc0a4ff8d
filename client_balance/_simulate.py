"""``client-balance simulate``: the seed documents' assignment tables, computed by the strategies.

Three separate steps, so tests can check the numbers without reading text:

1. parse: :func:`plan_simulation` turns the command line's strings into a :class:`SimulationPlan`
   and raises :class:`ConfigError` naming the bad value and what is allowed;
2. compute: :func:`simulate` runs a plan with one strategy and returns its :class:`Round` records;
3. render: :func:`render_rounds`, :func:`render_comparison` and :func:`simulation_to_json`.

The rules the rounds follow are :data:`DEFINITIONS`; the command's help prints them too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from client_balance.errors import ClientBalanceError, ConfigError
from client_balance.keys import TopicPartition, check_topic_name
from client_balance.strategies import Member, Strategy

__all__ = [
    "DEFINITIONS",
    "MAX_PARTITIONS_PER_TOPIC",
    "MAX_REBALANCES_PER_ROUND",
    "MOVED_MARK",
    "ChangeKind",
    "MemberSpec",
    "MembershipChange",
    "Rebalance",
    "Round",
    "SimulationError",
    "SimulationPlan",
    "format_partition",
    "parse_members",
    "parse_topics",
    "plan_simulation",
    "render_comparison",
    "render_rounds",
    "simulate",
    "simulation_to_json",
]

MAX_REBALANCES_PER_ROUND: Final = 10
"""A round whose strategy still withholds partitions after this many rebalances is an error."""

MAX_PARTITIONS_PER_TOPIC: Final = 100_000
"""Larger counts are refused: a mistyped digit should fail at once, not fill memory."""

MOVED_MARK: Final = "*"
"""Suffix of a partition whose owner changed since the previous round."""

ChangeKind = Literal["add", "remove"]
"""``--then-add`` or ``--then-remove``."""

DEFINITIONS: Final = f"""\
How the rounds are computed:
  round 1       the --members start with nothing owned; its assignment is generation 1.
  later rounds  each --then-remove/--then-add option is one more round, in the order given;
                a comma list changes those members together in that round. Members that
                stay report owned = their assignment from the previous round and the
                generation it was made in; joining members own nothing (generation -1).
  rebalances    if the assignment leaves a subscribed partition unassigned (cooperative-sticky
                withholds partitions that change owner), the round rebalances again with
                owned = that result and the next generation, as Kafka's consumer rejoins,
                until nothing is withheld. A round still withholding partitions after
                {MAX_REBALANCES_PER_ROUND} rebalances is an error.
  moves         partitions whose owner at the end of a round differs from their owner at the
                end of the previous round (marked *). A partition freed by a leaving member
                counts once a remaining member gets it; one that had no owner before (a
                topic nobody subscribed) or has none now is not a move. "taken" counts the
                moves whose previous owner is still a member: 0 for the sticky strategies
                when members with equal subscriptions only leave.
  balance       the largest minus the smallest partition count of the round's members."""

_COUNT = re.compile(r"[0-9]+")
_TOPICS_EXAMPLE = "--topics Order:7,Stock:5"
_MEMBERS_EXAMPLE = "C1,C2=Order,C3=Order+Stock (no '=' subscribes every topic)"


class SimulationError(ClientBalanceError):
    """A strategy's answer cannot be simulated: it is inconsistent, or it never settles."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """A member of the simulated group and the topics it subscribes."""

    id: str
    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class MembershipChange:
    """What changes before a round: members that leave and members that join."""

    leaving: tuple[str, ...] = ()
    joining: tuple[MemberSpec, ...] = ()

    def describe(self) -> str:
        """``"C3 leaves"``, ``"C4, C5 join"``, or both joined by ``"; "``."""
        parts = []
        if self.leaving:
            verb = "leaves" if len(self.leaving) == 1 else "leave"
            parts.append(f"{', '.join(self.leaving)} {verb}")
        if self.joining:
            verb = "joins" if len(self.joining) == 1 else "join"
            parts.append(f"{', '.join(member.id for member in self.joining)} {verb}")
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class SimulationPlan:
    """Topics (name -> partition count, sorted), the first round's members, and the changes."""

    topics: Mapping[str, int]
    members: tuple[MemberSpec, ...]
    changes: tuple[MembershipChange, ...] = ()


@dataclass(frozen=True, slots=True)
class Rebalance:
    """One call of the strategy: its generation, its answer and what it left unassigned."""

    generation: int
    assignment: Mapping[str, tuple[TopicPartition, ...]]
    withheld: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class Round:
    """One membership step: its members, its rebalances and what moved since the round before.

    ``members`` and the keys of every assignment are in Kafka's member order; partitions are
    sorted by (topic, partition).
    """

    number: int
    change: MembershipChange | None
    members: tuple[MemberSpec, ...]
    rebalances: tuple[Rebalance, ...]
    moved: tuple[TopicPartition, ...]
    taken_from_survivors: tuple[TopicPartition, ...]

    @property
    def assignment(self) -> Mapping[str, tuple[TopicPartition, ...]]:
        """The settled assignment: the last rebalance's."""
        return self.rebalances[-1].assignment

    @property
    def counts(self) -> dict[str, int]:
        """Member id -> number of partitions it holds at the end of the round."""
        return {member_id: len(parts) for member_id, parts in self.assignment.items()}

    @property
    def balance(self) -> int:
        """Largest minus smallest partition count (0 for a group without members)."""
        counts = self.counts.values()
        return max(counts) - min(counts) if counts else 0


def format_partition(partition: TopicPartition) -> str:
    """``Order-3``: the seed documents' notation."""
    return f"{partition.topic}-{partition.partition}"


def _member_order(member_id: str) -> tuple[int, int, bytes]:
    # Node ids ("0", "1", ... "10") read best in numeric order, as node mode numbers them; other
    # ids follow Kafka's member order, Java string order (UTF-16 code units): C10 before C2.
    java_order = member_id.encode("utf-16-be")
    if _COUNT.fullmatch(member_id):
        return (0, int(member_id), java_order)
    return (1, 0, java_order)


def _in_member_order(members: Iterable[MemberSpec]) -> list[MemberSpec]:
    return sorted(members, key=lambda member: _member_order(member.id))


def _entries(text: str, option: str, example: str) -> list[str]:
    entries = [entry.strip() for entry in text.split(",")]
    if entries == [""]:
        raise ConfigError(f"{option} is empty; write for example {example}")
    if "" in entries:
        raise ConfigError(
            f"{option} {text!r} has an empty entry between commas; write for example {example}"
        )
    return entries


def parse_topics(text: str) -> dict[str, int]:
    """``"Order:7,Stock:5"`` -> ``{"Order": 7, "Stock": 5}``, sorted by topic name."""
    counts: dict[str, int] = {}
    for entry in _entries(text, "--topics", _TOPICS_EXAMPLE):
        topic, colon, count_text = (part.strip() for part in entry.partition(":"))
        if not colon or not count_text:
            raise ConfigError(
                f"--topics entry {entry!r} has no partition count; write TOPIC:PARTITIONS, "
                f"e.g. {_TOPICS_EXAMPLE}"
            )
        try:
            check_topic_name(topic)
        except ConfigError as error:
            raise ConfigError(f"--topics entry {entry!r}: {error}") from None
        if not _COUNT.fullmatch(count_text.removeprefix("-")):
            raise ConfigError(
                f"partition count {count_text!r} of topic {topic!r} is not a whole number; write "
                f"TOPIC:PARTITIONS, e.g. {_TOPICS_EXAMPLE}"
            )
        count = int(count_text)  # a leading "-" gets here on purpose, to say why it is refused
        if not 1 <= count <= MAX_PARTITIONS_PER_TOPIC:
            raise ConfigError(
                f"partition count {count} of topic {topic!r} is not allowed; a topic has "
                f"1 to {MAX_PARTITIONS_PER_TOPIC} partitions here"
            )
        if topic in counts:
            raise ConfigError(f"topic {topic!r} appears twice in --topics; name each topic once")
        counts[topic] = count
    return dict(sorted(counts.items()))


def _parse_subscription(
    member_id: str, text: str, topics: Mapping[str, int], option: str
) -> frozenset[str]:
    names = [name.strip() for name in text.split("+")]
    if names == [""]:
        raise ConfigError(
            f"member {member_id!r} in {option} subscribes no topic; write {member_id}=Order+Stock, "
            f"or {member_id} alone for every topic"
        )
    for name in names:
        if name not in topics:
            raise ConfigError(
                f"member {member_id!r} in {option} subscribes topic {name!r}, which is not in "
                f"--topics; known topics: {', '.join(topics)}"
            )
    if len(set(names)) != len(names):
        raise ConfigError(
            f"member {member_id!r} in {option} names a topic twice in {text!r}; name each once"
        )
    return frozenset(names)


def parse_members(
    text: str, topics: Mapping[str, int], *, option: str = "--members"
) -> tuple[MemberSpec, ...]:
    """``"C1=Order,C2=Order+Stock,C3"`` -> members; without ``=`` a member takes every topic."""
    members: list[MemberSpec] = []
    for entry in _entries(text, option, _MEMBERS_EXAMPLE):
        member_id, equals, subscription = (part.strip() for part in entry.partition("="))
        if not member_id:
            raise ConfigError(
                f"{option} entry {entry!r} has no member id; write for example {_MEMBERS_EXAMPLE}"
            )
        if any(member.id == member_id for member in members):
            raise ConfigError(
                f"member {member_id!r} appears twice in {option}; member ids must be unique"
            )
        subscribed = (
            _parse_subscription(member_id, subscription, topics, option)
            if equals
            else frozenset(topics)
        )
        members.append(MemberSpec(member_id, subscribed))
    return tuple(members)


def _parse_change(
    kind: ChangeKind, text: str, topics: Mapping[str, int], present: Sequence[str], number: int
) -> MembershipChange:
    if kind == "add":
        joining = parse_members(text, topics, option="--then-add")
        for member in joining:
            if member.id in present:
                raise ConfigError(
                    f"--then-add {member.id!r} (round {number}): already a member; choose a new "
                    f"id (members before that round: {', '.join(present)})"
                )
        return MembershipChange(joining=joining)
    leaving = _entries(text, "--then-remove", "--then-remove C3 or --then-remove C2,C3")
    for position, member_id in enumerate(leaving):
        if member_id not in present:
            raise ConfigError(
                f"--then-remove {member_id!r} (round {number}): no such member; members before "
                f"that round: {', '.join(present)}"
            )
        if member_id in leaving[:position]:
            raise ConfigError(f"--then-remove {text!r} names {member_id!r} twice; name it once")
    if len(leaving) == len(present):
        raise ConfigError(
            f"--then-remove {text!r} would leave round {number} without members; keep at least one"
        )
    return MembershipChange(leaving=tuple(leaving))


def plan_simulation(
    topics: str, members: str, changes: Sequence[tuple[ChangeKind, str]] = ()
) -> SimulationPlan:
    """Check the command line's strings and turn them into a plan.

    ``changes`` are ``("remove", "C3")`` or ``("add", "C4=Order")`` in command-line order; each
    is one further round.
    """
    topic_counts = parse_topics(topics)
    first = parse_members(members, topic_counts)
    present = sorted((member.id for member in first), key=_member_order)
    planned: list[MembershipChange] = []
    for number, (kind, text) in enumerate(changes, start=2):
        change = _parse_change(kind, text, topic_counts, present, number)
        present = sorted(
            [
                *(member_id for member_id in present if member_id not in change.leaving),
                *(member.id for member in change.joining),
            ],
            key=_member_order,
        )
        planned.append(change)
    return SimulationPlan(topic_counts, first, tuple(planned))


def _checked_assignment(
    strategy: Strategy,
    topics: Mapping[str, int],
    members: Sequence[MemberSpec],
    answer: Mapping[str, Sequence[TopicPartition]],
) -> dict[str, tuple[TopicPartition, ...]]:
    # A strategy under construction can answer nonsense; a table built on it would mislead.
    owners: dict[TopicPartition, str] = {}
    assignment: dict[str, tuple[TopicPartition, ...]] = {}
    for member in members:
        partitions = tuple(sorted(answer.get(member.id, ())))
        for partition in partitions:
            if partition.topic not in member.topics or not (
                0 <= partition.partition < topics.get(partition.topic, 0)
            ):
                raise SimulationError(
                    f"strategy {strategy.name!r} gave {member.id} partition "
                    f"{format_partition(partition)}, which does not exist or {member.id} does "
                    "not subscribe"
                )
            if partition in owners:
                raise SimulationError(
                    f"strategy {strategy.name!r} gave {format_partition(partition)} to both "
                    f"{owners[partition]} and {member.id}"
                )
            owners[partition] = member.id
        assignment[member.id] = partitions
    strangers = sorted(set(answer) - set(assignment), key=_member_order)
    if strangers:
        raise SimulationError(
            f"strategy {strategy.name!r} assigned partitions to {', '.join(strangers)}, "
            "which are not members"
        )
    return assignment


def _unassigned(
    topics: Mapping[str, int],
    members: Sequence[MemberSpec],
    assignment: Mapping[str, Sequence[TopicPartition]],
) -> tuple[TopicPartition, ...]:
    subscribed = sorted({topic for member in members for topic in member.topics})
    assigned = {partition for parts in assignment.values() for partition in parts}
    return tuple(
        partition
        for topic in subscribed
        for partition in (TopicPartition(topic, number) for number in range(topics[topic]))
        if partition not in assigned
    )


def _owners(assignment: Mapping[str, Sequence[TopicPartition]]) -> dict[TopicPartition, str]:
    return {partition: member for member, parts in assignment.items() for partition in parts}


def _rebalance_until_settled(
    strategy: Strategy,
    topics: Mapping[str, int],
    members: Sequence[MemberSpec],
    previous: Mapping[str, tuple[TopicPartition, ...]],
    *,
    generation: int,
    number: int,
) -> list[Rebalance]:
    owned = {member.id: previous.get(member.id, ()) for member in members}
    # A member of the previous round reports the generation its partitions come from; a
    # joining one has none, which Kafka writes as -1.
    generations = {member.id: generation if member.id in previous else -1 for member in members}
    rebalances: list[Rebalance] = []
    for _ in range(MAX_REBALANCES_PER_ROUND):
        generation += 1
        answer = strategy.assign(
            topics,
            [
                Member(member.id, member.topics, owned[member.id], generations[member.id])
                for member in members
            ],
        )
        assignment = _checked_assignment(strategy, topics, members, answer)
        withheld = _unassigned(topics, members, assignment)
        rebalances.append(Rebalance(generation, assignment, withheld))
        if not withheld:
            return rebalances
        owned = assignment
        generations = dict.fromkeys(owned, generation)
    raise SimulationError(
        f"strategy {strategy.name!r} still withholds "
        f"{' '.join(map(format_partition, rebalances[-1].withheld))} after "
        f"{MAX_REBALANCES_PER_ROUND} rebalances in round {number}; it does not converge"
    )


def simulate(plan: SimulationPlan, strategy: Strategy) -> tuple[Round, ...]:
    """Run every round of ``plan`` with ``strategy`` (rules: :data:`DEFINITIONS`)."""
    rounds: list[Round] = []
    members = _in_member_order(plan.members)
    previous: Mapping[str, tuple[TopicPartition, ...]] = {}
    generation = 0
    steps: list[MembershipChange | None] = [None, *plan.changes]
    for number, change in enumerate(steps, start=1):
        if change is not None:
            staying = (member for member in members if member.id not in change.leaving)
            members = _in_member_order([*staying, *change.joining])
        rebalances = _rebalance_until_settled(
            strategy, plan.topics, members, previous, generation=generation, number=number
        )
        generation = rebalances[-1].generation
        before = _owners(previous)
        after = _owners(rebalances[-1].assignment)
        moved = tuple(
            partition
            for partition, owner in sorted(after.items())
            if before.get(partition, owner) != owner
        )
        member_ids = {member.id for member in members}
        taken = tuple(partition for partition in moved if before[partition] in member_ids)
        rounds.append(Round(number, change, tuple(members), tuple(rebalances), moved, taken))
        previous = rebalances[-1].assignment
    return tuple(rounds)


def _table(
    header: Sequence[str], rows: Sequence[Sequence[str]], right_aligned_from: int
) -> list[str]:
    widths = [max(len(row[column]) for row in (header, *rows)) for column in range(len(header))]
    return [
        "  ".join(
            cell.rjust(width) if column >= right_aligned_from else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in (header, *rows)
    ]


def _topics_line(topics: Mapping[str, int]) -> str:
    return " ".join(f"{topic}:{count}" for topic, count in topics.items())


def _assignment_table(
    topics: Mapping[str, int],
    members: Sequence[MemberSpec],
    assignment: Mapping[str, Sequence[TopicPartition]],
    moved: frozenset[TopicPartition],
) -> list[str]:
    unequal = any(member.topics != frozenset(topics) for member in members)
    header = ["member", *(["subscribes"] if unequal else []), "partitions", "count"]
    rows = []
    for member in members:
        parts = assignment[member.id]
        cells = [
            format_partition(partition) + (MOVED_MARK if partition in moved else "")
            for partition in parts
        ]
        subscribes = ["+".join(sorted(member.topics))] if unequal else []
        rows.append([member.id, *subscribes, " ".join(cells) or "-", str(len(parts))])
    return _table(header, rows, right_aligned_from=len(header) - 1)


def _round_change(round_: Round) -> str:
    if round_.change is None:
        return "members " + ", ".join(member.id for member in round_.members)
    return round_.change.describe()


def _round_title(round_: Round) -> str:
    what = _round_change(round_)
    generations = [rebalance.generation for rebalance in round_.rebalances]
    if len(generations) == 1:
        return f"round {round_.number} (generation {generations[0]}): {what}"
    return (
        f"round {round_.number} (generations {generations[0]}-{generations[-1]}, "
        f"{len(generations)} rebalances): {what}"
    )


def _moves_line(round_: Round) -> str:
    taken = len(round_.taken_from_survivors)
    freed = len(round_.moved) - taken
    return (
        f"moves {len(round_.moved)}: {taken} taken from members that stayed, "
        f"{freed} freed by members that left"
    )


def render_rounds(plan: SimulationPlan, strategy_name: str, rounds: Sequence[Round]) -> str:
    """The assignment table of every round, moved partitions marked, for one strategy."""
    lines = [f"strategy {strategy_name}; topics {_topics_line(plan.topics)}"]
    if len(rounds) > 1:
        lines.append(f"{MOVED_MARK} = moved: the owner changed since the previous round")
    for round_ in rounds:
        moved = frozenset(round_.moved)
        lines += ["", _round_title(round_)]
        for index, rebalance in enumerate(round_.rebalances, start=1):
            if len(round_.rebalances) > 1:
                lines.append(f"rebalance {index} (generation {rebalance.generation})")
            lines += _assignment_table(plan.topics, round_.members, rebalance.assignment, moved)
            if rebalance.withheld:
                lines.append(
                    "withheld until the next rebalance: "
                    + " ".join(map(format_partition, rebalance.withheld))
                )
        counts = round_.counts.values()
        lines.append(f"balance {round_.balance} (counts {min(counts)} to {max(counts)})")
        if round_.number > 1:
            lines.append(_moves_line(round_))
    return "\n".join(lines)


def render_comparison(plan: SimulationPlan, results: Mapping[str, Sequence[Round]]) -> str:
    """Per round, one row per strategy: member counts, balance, moves, taken, rebalances."""
    names = sorted(results)
    lines = [
        f"topics {_topics_line(plan.topics)}; strategies {', '.join(names)}",
        "counts per member; balance = max - min; moves = partitions whose owner changed; "
        "taken = moves from members that stayed",
    ]
    for index, round_ in enumerate(results[names[0]] if names else ()):
        lines += ["", f"round {round_.number}: {_round_change(round_)}"]
        member_ids = [member.id for member in round_.members]
        header = ["strategy", *member_ids, "balance", "moves", "taken", "rebalances"]
        rows = []
        for name in names:
            this = results[name][index]
            first = this.number == 1
            rows.append(
                [
                    name,
                    *(str(this.counts[member_id]) for member_id in member_ids),
                    str(this.balance),
                    "-" if first else str(len(this.moved)),
                    "-" if first else str(len(this.taken_from_survivors)),
                    str(len(this.rebalances)),
                ]
            )
        lines += _table(header, rows, right_aligned_from=1)
    return "\n".join(lines)


def _partitions_json(partitions: Sequence[TopicPartition]) -> list[str]:
    return [format_partition(partition) for partition in partitions]


def _assignment_json(assignment: Mapping[str, Sequence[TopicPartition]]) -> dict[str, list[str]]:
    return {member: _partitions_json(parts) for member, parts in assignment.items()}


def _member_json(member: MemberSpec) -> dict[str, Any]:
    return {"id": member.id, "topics": sorted(member.topics)}


def _change_json(change: MembershipChange | None) -> dict[str, Any] | None:
    if change is None:
        return None
    return {
        "leaving": list(change.leaving),
        "joining": [_member_json(member) for member in change.joining],
    }


def _round_json(round_: Round) -> dict[str, Any]:
    return {
        "round": round_.number,
        "change": _change_json(round_.change),
        "members": [_member_json(member) for member in round_.members],
        "rebalances": [
            {
                "generation": rebalance.generation,
                "assignment": _assignment_json(rebalance.assignment),
                "withheld": _partitions_json(rebalance.withheld),
            }
            for rebalance in round_.rebalances
        ],
        "assignment": _assignment_json(round_.assignment),
        "counts": round_.counts,
        "balance": round_.balance,
        "moves": len(round_.moved),
        "moved": _partitions_json(round_.moved),
        "taken_from_survivors": len(round_.taken_from_survivors),
        "taken": _partitions_json(round_.taken_from_survivors),
    }


def simulation_to_json(
    plan: SimulationPlan, results: Mapping[str, Sequence[Round]]
) -> dict[str, Any]:
    """Plain data for ``json.dumps``: the plan and, per strategy (sorted), every round."""
    return {
        "topics": dict(plan.topics),
        "members": [_member_json(member) for member in plan.members],
        "strategies": {
            name: [_round_json(round_) for round_ in results[name]] for name in sorted(results)
        },
    }
