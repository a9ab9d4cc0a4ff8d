"""A user's rule as a strategy: its input in one canonical order, its every answer checked.

A rule is a plain function ``rule(partitions, members) -> {member id: partitions}`` or an object
with the :class:`~client_balance.strategies.Strategy` interface. :class:`UserStrategy` puts it
under a name, and on every call

- hands it the members in node order (by number when every id is a number, else Kafka's member
  order: static members first) with each member's ``owned`` sorted, and the topics sorted by
  name, so that a rule that walks its input in order gives the same answer on every member;
- checks the answer: every partition of a subscribed topic goes to exactly one member that
  subscribes its topic, and nothing else is assigned. A rule that loses or doubles a partition
  would make the group skip or repeat messages; it raises
  :class:`~client_balance.errors.StrategyContractError` instead;
- returns it as the built-ins do: every member id a key, partitions sorted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from client_balance.errors import ConfigError, StrategyContractError
from client_balance.keys import TopicPartition
from client_balance.strategies._base import (
    Assignment,
    Member,
    PartitionRacks,
    Strategy,
    sorted_members,
    subscribed_partition_counts,
)
from client_balance.strategies._nodes import node_order

__all__ = ["Rule", "UserStrategy", "as_strategy", "assignment_problem", "canonical_input"]

Rule = Callable[[Mapping[str, int], Sequence[Member]], Mapping[str, Iterable[TopicPartition]]]
"""``rule(partitions, members) -> {member id: partitions}``: a strategy as a plain function."""

_SHOWN_MISSING = 5
"""Partitions named in a "not assigned" message; the rest are counted."""


def canonical_input(
    partitions: Mapping[str, int], members: Sequence[Member]
) -> tuple[dict[str, int], list[Member]]:
    """The topics sorted by name, and the members in node order with ``owned`` sorted."""
    ordered = sorted_members(members)  # also refuses duplicate ids
    if not any(member.instance_id is not None for member in ordered):
        by_id = {member.id: member for member in ordered}
        ordered = [by_id[member_id] for member_id in node_order(by_id)]
    canonical = [
        member
        if list(member.owned) == sorted(member.owned)
        else Member(
            member.id,
            member.topics,
            sorted(member.owned),
            member.generation,
            member.rack,
            member.instance_id,
        )
        for member in ordered
    ]
    return {topic: partitions[topic] for topic in sorted(partitions)}, canonical


def _partition(value: object) -> TopicPartition | None:
    """``value`` as a partition if it is a ``(topic, number)`` pair, else None."""
    if isinstance(value, tuple) and len(value) == 2:  # noqa: PLR2004 - a pair
        topic, number = value
        if isinstance(topic, str) and type(number) is int:
            return TopicPartition(topic, number)
    return None


def _missing_text(missing: list[TopicPartition]) -> str:
    shown = ", ".join(map(str, missing[:_SHOWN_MISSING]))
    more = len(missing) - _SHOWN_MISSING
    return shown + (f" and {more} more" if more > 0 else "")


def assignment_problem(  # noqa: PLR0911 - one check per way an answer can be wrong
    partitions: Mapping[str, int],
    members: Sequence[Member],
    answer: object,
    *,
    complete: bool = True,
) -> tuple[Assignment | None, str | None]:
    """The answer as an :data:`Assignment`, or what is wrong with it.

    Wrong is: not a mapping, a key that is no member, a value that is no collection of
    ``(topic, partition)`` pairs, a partition of a topic its member does not subscribe or that
    does not exist, a partition given twice, and (``complete``) a subscribed one given to nobody.
    """
    if not isinstance(answer, Mapping):
        return None, f"answered a {type(answer).__name__}, not a mapping of member id -> partitions"
    counts = subscribed_partition_counts(partitions, members)
    topics_of = {member.id: member.topics for member in members}
    assignment: Assignment = {member.id: [] for member in members}
    owners: dict[TopicPartition, str] = {}
    for member_id, held in answer.items():
        if member_id not in topics_of:
            known = sorted(topics_of)
            return None, f"assigned partitions to {member_id!r}, which is not a member {known}"
        if isinstance(held, str | bytes) or not isinstance(held, Iterable):
            return None, f"gave member {member_id!r} {held!r}, not a collection of partitions"
        for value in cast("Iterable[object]", held):
            partition = _partition(value)
            if partition is None:
                return None, f"gave member {member_id!r} {value!r}, not a (topic, partition) pair"
            if partition.topic not in topics_of[member_id]:
                return None, f"gave {partition} to {member_id!r}, which does not subscribe it"
            if not 0 <= partition.partition < counts.get(partition.topic, 0):
                return None, f"gave {member_id!r} partition {partition}, which does not exist"
            if partition in owners:
                twice = owners[partition] == member_id
                return None, (
                    f"gave {partition} to {member_id!r} twice" if twice
                    else f"gave {partition} to both {owners[partition]!r} and {member_id!r}"
                )  # fmt: skip
            owners[partition] = member_id
            assignment[member_id].append(partition)
    if complete:
        missing = [
            TopicPartition(topic, number)
            for topic, count in counts.items()
            for number in range(count)
            if TopicPartition(topic, number) not in owners
        ]
        if missing:
            return None, f"assigned {_missing_text(missing)} to nobody"
    for held in assignment.values():
        held.sort()
    return assignment, None


class UserStrategy:
    """A user's rule under a registry name; see the module's docstring for what it adds."""

    __slots__ = ("_name", "rule")

    def __init__(self, name: str, rule: Rule | Strategy) -> None:
        self._name = name
        self.rule = rule
        """The function or strategy object as the user gave it."""

    @property
    def name(self) -> str:
        """The name it is found by."""
        return self._name

    def __repr__(self) -> str:
        return f"UserStrategy({self._name!r}, {self.rule!r})"

    def assign(
        self,
        partitions: Mapping[str, int],
        members: Sequence[Member],
        *,
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        """The rule's answer to the canonical input, checked and normalised."""
        counts, ordered = canonical_input(partitions, members)
        rule: Any = self.rule
        # Copies: the answer is checked against the input, which a rule may use as a work list.
        try:
            if callable(getattr(rule, "assign", None)):
                answer = rule.assign(dict(counts), list(ordered), partition_racks=partition_racks)
            else:
                answer = rule(dict(counts), list(ordered))
        except Exception as error:  # the user's code: said as what check_strategy says of it
            raise StrategyContractError(
                f"strategy {self._name!r} raised {type(error).__name__}: {error}",
                strategy=self._name,
                violation="raises",
            ) from error
        assignment, problem = assignment_problem(counts, ordered, answer)
        if assignment is None:
            raise StrategyContractError(
                f"strategy {self._name!r} {problem}; a strategy must give every partition of a "
                "subscribed topic to exactly one member that subscribes it",
                strategy=self._name,
                violation="valid",
            )
        return assignment


def as_strategy(name: str, rule: object) -> UserStrategy:
    """``rule`` under ``name``.

    ``rule`` is a function, a strategy object, or a strategy class, made with no arguments (an
    entry point or a ``module:attr`` reference often names a class).
    """
    if isinstance(rule, UserStrategy):
        return UserStrategy(name, rule.rule)
    if isinstance(rule, type) and callable(getattr(rule, "assign", None)):
        cls = rule
        try:
            rule = cls()
        except Exception as error:
            raise ConfigError(
                f"strategy {name!r}: class {cls.__qualname__} could not be made without "
                f"arguments ({type(error).__name__}); register an instance instead"
            ) from error
    if callable(getattr(rule, "assign", None)) or callable(rule):
        return UserStrategy(name, cast("Rule | Strategy", rule))
    raise ConfigError(
        f"strategy {name!r} is a {type(rule).__name__}; use a function "
        "rule(partitions, members) -> {member id: partitions} or an object with assign()"
    )
