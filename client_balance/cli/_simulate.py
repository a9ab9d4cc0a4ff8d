"""``client-balance simulate``: the assignment tables a strategy gives, round by round.

The numbers come from :mod:`client_balance.strategies.simulation`; this module reads the command
line, and prints the tables (through :mod:`client_balance.cli._render`) or JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from client_balance.cli import _render
from client_balance.errors import ConfigError
from client_balance.keys import TopicPartition
from client_balance.strategies import DEFAULT_STRATEGY, get_strategy, strategy_names
from client_balance.strategies._registry import BUILTIN_NAMES, ENTRY_POINT_GROUP, is_reference
from client_balance.strategies.simulation import (
    MAX_REBALANCES_PER_ROUND,
    MembershipChange,
    MemberSpec,
    Round,
    SimulationPlan,
    format_partition,
    plan_simulation,
    simulate,
)

__all__ = ["COMMANDS", "DEFINITIONS", "add_parsers", "simulation_to_json"]

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
"""The rules :func:`~client_balance.strategies.simulation.simulate` follows, for the help."""


class _AppendChange(argparse.Action):
    """Collect --then-remove and --then-add into one list, so their order survives."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        # A fresh list each time: argparse shares the default list between both options.
        changes = [*getattr(namespace, self.dest), (self.const, values)]
        setattr(namespace, self.dest, changes)


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``simulate`` to the ``client-balance`` parser."""
    parser = commands.add_parser(
        "simulate",
        help="print the assignment tables a strategy gives, round by round",
        description=(
            "Compute the partition assignment of a group with a strategy and show\n"
            "how it changes as members leave and join, with moved partitions marked."
        ),
        epilog=(
            "example: client-balance simulate --topics Order:7,Stock:5 --members C1,C2,C3 "
            f"--strategy range --then-remove C3\n\n{DEFINITIONS}"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--topics", required=True, metavar="TOPIC:PARTITIONS,...", help="e.g. Order:7,Stock:5"
    )
    parser.add_argument(
        "--members",
        required=True,
        metavar="MEMBER[=TOPIC+TOPIC],...",
        help="the first round's members, e.g. C1,C2,C3 or C1=Order,C2=Order+Stock,C3 "
        "(no '=' subscribes every topic)",
    )
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument(
        "--strategy",
        default=DEFAULT_STRATEGY,
        metavar="NAME",
        help=f"a built-in strategy ({', '.join(BUILTIN_NAMES)}; default {DEFAULT_STRATEGY}), "
        f"one an installed package declares (entry point group {ENTRY_POINT_GROUP}), or your "
        "own rule as module:attr, e.g. mypkg.rules:by_topic (the current directory is on the "
        "import path)",
    )
    choice.add_argument(
        "--compare",
        action="store_true",
        help="every built-in and entry-point strategy side by side: counts, balance and "
        "moves per round",
    )
    parser.add_argument(
        "--then-remove",
        dest="changes",
        action=_AppendChange,
        const="remove",
        default=[],
        metavar="MEMBER,...",
        help="one more round without these members (repeatable; a comma list leaves together)",
    )
    parser.add_argument(
        "--then-add",
        dest="changes",
        action=_AppendChange,
        const="add",
        default=[],
        metavar="MEMBER[=TOPIC+TOPIC],...",
        help="one more round with these members added (repeatable; a comma list joins together)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def _simulate_command(args: argparse.Namespace) -> int:
    try:
        plan = plan_simulation(args.topics, args.members, args.changes)
        names = strategy_names() if args.compare else (args.strategy,)
        if not args.compare and is_reference(args.strategy) and os.getcwd() not in sys.path:
            # As `python -m` does: a rule next to where the command runs is importable.
            sys.path.insert(0, os.getcwd())
        strategies = [get_strategy(name) for name in names]
    except ConfigError as error:
        _render.say("client-balance simulate: error: " + " ".join(str(error).splitlines()))
        return _render.EXIT_USAGE
    results = {strategy.name: simulate(plan, strategy) for strategy in strategies}
    if args.json:
        _render.out(json.dumps(simulation_to_json(plan, results), indent=2))
    elif args.compare:
        _render.show(_render.simulation_comparison(plan, results))
    else:
        [(name, rounds)] = results.items()
        _render.show(_render.simulation_rounds(plan, name, rounds))
    return _render.EXIT_OK


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


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"simulate": _simulate_command}
