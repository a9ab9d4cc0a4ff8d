"""Simulated group rebalances: the assignment tables a strategy gives, round by round.

Pure data in and out, so tests check the numbers without reading text, and the
``client-balance simulate`` command only renders them: :func:`plan_simulation` checks the
command line's strings and returns a :class:`SimulationPlan` (a bad value raises
:class:`ConfigError` naming it and what is allowed); :func:`simulate` runs a plan with one
strategy and returns its :class:`Round` records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from client_balance.errors import ClientBalanceError, ConfigError
from client_balance.keys import TopicPartition, check_topic_name
from client_balance.strategies._base import Member, Strategy
from client_balance.strategies._nodes import node_order

__all__ = [
    "MAX_PARTITIONS_PER_TOPIC",
    "MAX_REBALANCES_PER_ROUND",
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
    "simulate",
]

MAX_REBALANCES_PER_ROUND: Final = 10
"""A round whose strategy still withholds partitions after this many rebalances is an error."""

MAX_PARTITIONS_PER_TOPIC: Final = 100_000
"""Larger counts are refused: a mistyped digit should fail at once, not fill memory."""

ChangeKind = Literal["add", "remove"]
"""``--then-add`` or ``--then-remove``."""

_Owned = Mapping[str, Sequence[TopicPartition]]
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

    ``members`` and the keys of every assignment are in node order (numeric ids by number,
    other ids in Kafka's member order); partitions are sorted by (topic, partition).
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


def _in_member_order(members: Iterable[MemberSpec]) -> list[MemberSpec]:
    by_id = {member.id: member for member in members}
    return [by_id[member_id] for member_id in node_order(by_id)]


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
    present = node_order(member.id for member in first)
    planned: list[MembershipChange] = []
    for number, (kind, text) in enumerate(changes, start=2):
        change = _parse_change(kind, text, topic_counts, present, number)
        staying = (member_id for member_id in present if member_id not in change.leaving)
        present = node_order([*staying, *(member.id for member in change.joining)])
        planned.append(change)
    return SimulationPlan(topic_counts, first, tuple(planned))


def _checked_assignment(
    strategy: Strategy, topics: Mapping[str, int], members: Sequence[MemberSpec], answer: _Owned
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
    strangers = node_order(set(answer) - set(assignment))
    if strangers:
        raise SimulationError(
            f"strategy {strategy.name!r} assigned partitions to {', '.join(strangers)}, "
            "which are not members"
        )
    return assignment


def _unassigned(
    topics: Mapping[str, int], members: Sequence[MemberSpec], assignment: _Owned
) -> tuple[TopicPartition, ...]:
    subscribed = sorted({topic for member in members for topic in member.topics})
    assigned = {partition for parts in assignment.values() for partition in parts}
    return tuple(
        partition
        for topic in subscribed
        for partition in (TopicPartition(topic, number) for number in range(topics[topic]))
        if partition not in assigned
    )


def _owners(assignment: _Owned) -> dict[TopicPartition, str]:
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
    """Run every round of ``plan`` with ``strategy``.

    Members that stay report the previous round's partitions and generation as owned; joiners
    own nothing (generation -1). A round whose answer leaves a subscribed partition unassigned
    rebalances again, as Kafka's consumer rejoins, at most :data:`MAX_REBALANCES_PER_ROUND`
    times. ``client-balance simulate --help`` states the rules in full.
    """
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
