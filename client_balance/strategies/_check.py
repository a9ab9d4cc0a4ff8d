"""``check_strategy``: whether a rule keeps the contract of every strategy.

Every member of a group computes its share on its own, so a strategy must give one answer to
one input wherever and whenever it runs. :func:`check_strategy` runs a rule on a set of groups
and raises :class:`~client_balance.errors.StrategyContractError` when

- an answer is not an assignment (``"valid"``), or the rule raises (``"raises"``);
- the same input twice gives two answers (``"deterministic"``: randomness, a clock, state kept
  between calls);
- the same input in another order gives another answer (``"order-independent"``: members,
  topics, owned partitions and topic sets built in other orders);
- another Python process, started with another hash seed, gives another answer
  (``"same-in-every-process"``: ``hash()`` of a string, iteration over a set of strings).

The last check needs the rule to be importable by name in a fresh process (see
:func:`~client_balance.strategies._registry.reference_of`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from client_balance.errors import ConfigError, StrategyContractError
from client_balance.keys import TopicPartition
from client_balance.strategies._base import Assignment, Member, Strategy
from client_balance.strategies._nodes import node_member_ids
from client_balance.strategies._registry import get_strategy, reference_of
from client_balance.strategies._user import UserStrategy, as_strategy, assignment_problem

__all__ = ["Example", "check_strategy", "default_examples", "main_in_child"]

Example = tuple[Mapping[str, int], Sequence[Member]]
"""One input of a strategy: partition counts by topic, and the members."""

_FRESH_PROCESS_TIMEOUT_S = 120.0
_DESCRIBED_CHARS = 240
_REPEATS = 8
"""Calls of the same input before a changed answer is put down to the order, not to chance."""


def _owned(*pairs: str | int) -> list[TopicPartition]:
    return [TopicPartition(str(t), int(n)) for t, n in zip(pairs[::2], pairs[1::2], strict=True)]


def default_examples() -> list[Example]:
    """The groups a rule is checked on unless it is given others.

    They cover what a strategy meets: node mode, mixed subscriptions, owned partitions, static
    members with racks, topics nobody subscribes or that have no partitions, no members at all.
    """
    topics = {"orders": 6, "stock": 5, "audit": 1, "empty": 0, "unused": 3}
    every = ("orders", "stock", "audit", "empty")

    def nodes(count: int) -> list[Member]:
        return [Member(member_id, every) for member_id in node_member_ids(count)]

    return [
        (topics, []),
        (topics, nodes(1)),
        ({"orders": 6, "stock": 5}, [Member(i, ("orders", "stock")) for i in ("0", "1")]),
        (topics, nodes(3)),
        (topics, nodes(12)),  # more nodes than any topic has partitions
        (
            topics,
            [
                Member("C1", ["orders"]),
                Member("C2", ["orders", "stock"]),
                Member("C3", ["stock", "audit"]),
                Member("C4", []),
            ],
        ),
        (topics, [Member("C10", every), Member("C2", every), Member("C1", ["gone"])]),
        (
            topics,
            [
                Member("C1", every, _owned("orders", 0, "orders", 3, "stock", 1), 1),
                Member("C2", every, _owned("orders", 1, "stock", 0, "stock", 4), 1),
                Member("C3", every),
            ],
        ),
        (
            topics,
            [
                Member("m-b", every, rack="r1", instance_id="i-2"),
                Member("m-a", every, rack="r2", instance_id="i-1"),
                Member("m-c", every, rack="r1"),
            ],
        ),
    ]


def _found(name: str) -> Strategy | None:
    try:
        return get_strategy(name)
    except ConfigError:
        return None


def _resolve(rule: object) -> Strategy:
    if isinstance(rule, str):
        return get_strategy(rule)
    if isinstance(rule, UserStrategy):
        return rule
    name = getattr(rule, "name", None)
    if isinstance(name, str) and _found(name) is rule:
        return cast("Strategy", rule)  # a built-in or a registered strategy
    label = getattr(rule, "__qualname__", None) or type(rule).__qualname__
    return as_strategy(name if isinstance(name, str) else label, rule)


def _describe(partitions: Mapping[str, int], members: Sequence[Member]) -> str:
    topics = " ".join(f"{topic}:{count}" for topic, count in sorted(partitions.items()))
    shown = ", ".join(f"{m.id}={'+'.join(sorted(m.topics)) or '-'}" for m in members) or "none"
    text = f"topics {topics}; members {shown}"
    return text if len(text) <= _DESCRIBED_CHARS else text[: _DESCRIBED_CHARS - 3] + "..."


def _difference(first: Assignment, second: Assignment) -> str:
    for member_id in sorted(first.keys() | second.keys()):
        one, other = first.get(member_id), second.get(member_id)
        if one != other:
            shown = [" ".join(map(str, held)) if held is not None else "no entry"
                     for held in (one, other)]  # fmt: skip
            return f"member {member_id!r} got [{shown[0]}], then [{shown[1]}]"
    return "the answers differ"


def _answer(strategy: Strategy, number: int, partitions: Mapping[str, int],
            members: Sequence[Member], *, complete: bool) -> Assignment:  # fmt: skip
    where = f"example {number} ({_describe(partitions, members)})"
    try:
        answer = strategy.assign(partitions, members)
    except StrategyContractError as error:  # the rule's own exception stays its cause
        raise StrategyContractError(
            f"{error} [{where}]", strategy=strategy.name, violation=error.violation
        ) from error.__cause__
    except Exception as error:
        raise StrategyContractError(
            f"strategy {strategy.name!r} raised {type(error).__name__}: {error} [{where}]",
            strategy=strategy.name,
            violation="raises",
        ) from error
    assignment, problem = assignment_problem(partitions, members, answer, complete=complete)
    if assignment is None:
        raise StrategyContractError(
            f"strategy {strategy.name!r} {problem} [{where}]",
            strategy=strategy.name,
            violation="valid",
        )
    return assignment


def _reorderings() -> list[Callable[[list[Any]], list[Any]]]:
    """Fixed permutations (no randomness, so a failure repeats): reversed, rotated, interleaved."""
    return [
        lambda items: items[::-1],
        lambda items: items[1:] + items[:1],
        lambda items: items[1::2] + items[::2],
    ]


def _reordered(example: Example, reorder: Callable[[list[Any]], list[Any]]) -> Example:
    partitions, members = example
    again = [
        Member(m.id, reorder(sorted(m.topics)), reorder(list(m.owned)), m.generation, m.rack,
               m.instance_id)
        for m in reorder(list(members))
    ]  # fmt: skip
    return dict(reorder(list(partitions.items()))), again


def _copy(example: Example) -> Example:
    return _reordered(example, list)


def _check_repeats(strategy: Strategy, number: int, example: Example, first: Assignment,
                   times: int, *, complete: bool) -> None:  # fmt: skip
    for _ in range(times):
        again = _answer(strategy, number, *_copy(example), complete=complete)
        if again != first:
            raise StrategyContractError(
                f"strategy {strategy.name!r} is not deterministic: the same input twice gave two "
                f"answers ({_difference(first, again)}) [example {number} "
                f"({_describe(*example)})]; a strategy uses no randomness, clock or state",
                strategy=strategy.name,
                violation="deterministic",
            )


def check_strategy(
    rule: object,
    *,
    examples: Iterable[Example] | None = None,
    across_processes: bool | None = None,
) -> None:
    """Raise :class:`StrategyContractError` if ``rule`` breaks the contract of a strategy.

    ``rule`` is a strategy name (built-in, registered, ``module:attr``, entry point), a function
    ``rule(partitions, members)`` or a strategy object, checked as :func:`register_strategy`
    would run it. ``examples`` (``(partitions, members)`` pairs) replace the built-in set of
    groups. ``across_processes``: run the examples again in a fresh Python process with
    another hash seed (``None``: when the rule is importable there by name; ``True``: a rule
    that is not raises :class:`ConfigError`).
    """
    strategy = _resolve(rule)
    # Built-ins may withhold partitions for a second rebalance (cooperative-sticky); a user's
    # rule must assign everything, since nothing here rebalances again.
    complete = isinstance(strategy, UserStrategy)
    cases = list(examples) if examples is not None else default_examples()
    answers: list[Assignment] = []
    for number, example in enumerate(cases, start=1):
        first = _answer(strategy, number, *example, complete=complete)
        _check_repeats(strategy, number, example, first, 1, complete=complete)
        for reorder in _reorderings():
            other = _answer(strategy, number, *_reordered(example, reorder), complete=complete)
            if other != first:
                # Tell a rule that is random from one that follows the order: if the same input
                # gives another answer now and then, it is the randomness.
                _check_repeats(strategy, number, example, first, _REPEATS, complete=complete)
                raise StrategyContractError(
                    f"strategy {strategy.name!r} depends on the order of its input "
                    f"({_difference(first, other)}) [example {number} ({_describe(*example)})]; "
                    "sort what you iterate over (members, topics, sets)",
                    strategy=strategy.name,
                    violation="order-independent",
                )
        answers.append(first)
    if across_processes is not False:
        _check_in_fresh_process(strategy, cases, answers, required=across_processes is True)


# ------------------------------------------------------------------------ another process
def _example_json(partitions: Mapping[str, int], members: Sequence[Member]) -> dict[str, Any]:
    return {
        "partitions": dict(partitions),
        "members": [
            [m.id, sorted(m.topics), [list(tp) for tp in m.owned], m.generation, m.rack,
             m.instance_id]
            for m in members
        ],
    }  # fmt: skip


def _example_from_json(data: dict[str, Any]) -> Example:
    members = [
        Member(member_id, topics, [TopicPartition(*tp) for tp in owned], generation, rack, static)
        for member_id, topics, owned, generation, rack, static in data["members"]
    ]
    return data["partitions"], members


def _assignment_json(assignment: Assignment) -> dict[str, list[list[Any]]]:
    return {member: [list(tp) for tp in held] for member, held in sorted(assignment.items())}


def _check_in_fresh_process(
    strategy: Strategy, cases: list[Example], answers: list[Assignment], *, required: bool
) -> None:
    reference = reference_of(strategy)
    if reference is None or not sys.executable:
        if required:
            raise ConfigError(
                f"strategy {strategy.name!r} cannot be found by name in another process; check a "
                "'module:attr' reference, an entry point, or a function defined at the top "
                "level of an importable module"
            )
        return
    theirs = _answers_in_fresh_process(reference, cases)
    for number, (ours, other) in enumerate(zip(answers, theirs, strict=True), start=1):
        if _assignment_json(ours) != other:
            raise StrategyContractError(
                f"strategy {strategy.name!r} gives another answer in another Python process "
                f"[example {number} ({_describe(*cases[number - 1])})]; it depends on the hash "
                "seed: do not use hash() of strings or the order of a set of strings",
                strategy=strategy.name,
                violation="same-in-every-process",
            )


def _answers_in_fresh_process(reference: str, cases: list[Example]) -> list[Any]:
    # Imported here: only this check needs them, and every application importing the SDK
    # would keep tempfile's ~600 objects (and 3.7 ms of import) for a test helper otherwise.
    import subprocess  # noqa: PLC0415 - see above
    import tempfile  # noqa: PLC0415 - see above

    ours = os.environ.get("PYTHONHASHSEED")
    env = {
        **os.environ,
        "PYTHONHASHSEED": "2" if ours == "1" else "1",
        # The child imports the rule as this process does, whatever put its module on the path.
        "PYTHONPATH": os.pathsep.join(entry for entry in sys.path if entry),
    }
    with tempfile.TemporaryDirectory(prefix="client-balance-check-") as folder:
        request, reply = Path(folder, "request.json"), Path(folder, "answers.json")
        cases_json = [_example_json(*example) for example in cases]
        request.write_text(json.dumps({"reference": reference, "examples": cases_json}))
        code = "from client_balance.strategies._check import main_in_child; main_in_child()"
        try:
            done = subprocess.run(
                [sys.executable, "-c", code, str(request), str(reply)],
                env=env,
                capture_output=True,
                text=True,
                timeout=_FRESH_PROCESS_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ConfigError(
                f"strategy {reference!r}: the check in a fresh Python process took over "
                f"{_FRESH_PROCESS_TIMEOUT_S:.0f} s"
            ) from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ConfigError(
                f"strategy {reference!r}: the check in a fresh Python process failed (exit "
                f"{done.returncode}): {last}"
            )
        answers: list[Any] = json.loads(reply.read_text())
        return answers


def main_in_child() -> None:
    """The fresh process's side: answer the request file's examples into the reply file."""
    request, reply = sys.argv[1:3]
    payload = json.loads(Path(request).read_text())
    strategy = get_strategy(payload["reference"])
    answers = []
    for example in payload["examples"]:
        partitions, members = _example_from_json(example)
        answer = strategy.assign(partitions, members)
        assignment, problem = assignment_problem(partitions, members, answer, complete=False)
        if assignment is None:
            raise StrategyContractError(
                f"strategy {strategy.name!r} {problem}", strategy=strategy.name, violation="valid"
            )
        answers.append(_assignment_json(assignment))
    Path(reply).write_text(json.dumps(answers))
