"""The ``client-balance`` command.

``main(argv) -> int`` does the work and returns the exit code (0 success, 1 failure, 2 usage), so
tests call it directly; ``run()`` is the console-script entry point. Only this module configures
logging: the library itself never does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from client_balance import _simulate, admin
from client_balance._cli_groups import GROUP_COMMANDS, add_group_parsers
from client_balance.broker import (
    DEFAULT_KAFKA_VERSION,
    LocalKafka,
    ensure_kafka_jars,
    kafka_home,
    stop_pid,
)
from client_balance.errors import ClientBalanceError, ConfigError
from client_balance.strategies import DEFAULT_STRATEGY, get_strategy, strategy_names

__all__ = ["main", "run"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _default_state_file() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "client-balance" / "broker.json"


def _configure_logging(verbose: bool) -> None:
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(10 if verbose else 20),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="client-balance",
        description="Client-balanced Kafka consumption: tools for users and operators.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    broker = commands.add_parser("broker", help="a local Apache Kafka 4.x broker (KRaft)")
    actions = broker.add_subparsers(dest="action", required=True, metavar="ACTION")
    state_help = (
        f"where a detached broker's pid and address are kept (default {_default_state_file()})"
    )

    fetch = actions.add_parser("fetch", help="fetch the broker jars with Maven (once, cached)")
    fetch.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)

    start = actions.add_parser("start", help="start a broker; prints its bootstrap address")
    start.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)
    start.add_argument("--port", type=int, default=None, help="listener port (default: free)")
    start.add_argument(
        "--data-dir", type=Path, default=None, help="keep data here (default: fresh temp dir)"
    )
    start.add_argument("--heap-mb", type=int, default=512)
    start.add_argument(
        "--foreground", action="store_true", help="run until Ctrl-C instead of detaching"
    )
    start.add_argument("--state-file", type=Path, default=_default_state_file(), help=state_help)

    stop = actions.add_parser("stop", help="stop the detached broker")
    stop.add_argument("--state-file", type=Path, default=_default_state_file(), help=state_help)

    status = actions.add_parser("status", help="is the detached broker running, and where")
    status.add_argument("--state-file", type=Path, default=_default_state_file(), help=state_help)
    status.add_argument("--bootstrap", action="store_true", help="print only the bootstrap address")

    _add_simulate_parser(commands)
    add_group_parsers(commands, _running_broker_address)
    return parser


def _running_broker_address() -> str | None:
    state = _read_state(_default_state_file())
    return state["bootstrap_servers"] if state and _is_our_broker(state) else None


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


def _add_simulate_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    simulate = commands.add_parser(
        "simulate",
        help="print the assignment tables a strategy gives, round by round",
        description=(
            "Compute the partition assignment of a group with a registered strategy and show\n"
            "how it changes as members leave and join, with moved partitions marked."
        ),
        epilog=(
            "example: client-balance simulate --topics Order:7,Stock:5 --members C1,C2,C3 "
            f"--strategy range --then-remove C3\n\n{_simulate.DEFINITIONS}"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    simulate.add_argument(
        "--topics", required=True, metavar="TOPIC:PARTITIONS,...", help="e.g. Order:7,Stock:5"
    )
    simulate.add_argument(
        "--members",
        required=True,
        metavar="MEMBER[=TOPIC+TOPIC],...",
        help="the first round's members, e.g. C1,C2,C3 or C1=Order,C2=Order+Stock,C3 "
        "(no '=' subscribes every topic)",
    )
    choice = simulate.add_mutually_exclusive_group()
    choice.add_argument(
        "--strategy",
        default=DEFAULT_STRATEGY,
        help=f"a registered strategy: {', '.join(strategy_names())} (default {DEFAULT_STRATEGY})",
    )
    choice.add_argument(
        "--compare",
        action="store_true",
        help="every registered strategy side by side: counts, balance and moves per round",
    )
    simulate.add_argument(
        "--then-remove",
        dest="changes",
        action=_AppendChange,
        const="remove",
        default=[],
        metavar="MEMBER,...",
        help="one more round without these members (repeatable; a comma list leaves together)",
    )
    simulate.add_argument(
        "--then-add",
        dest="changes",
        action=_AppendChange,
        const="add",
        default=[],
        metavar="MEMBER[=TOPIC+TOPIC],...",
        help="one more round with these members added (repeatable; a comma list joins together)",
    )
    simulate.add_argument("--json", action="store_true", help="print JSON instead of tables")


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state


def _is_our_broker(state: dict[str, Any]) -> bool:
    # The pid may have been reused by an unrelated process since the broker died.
    try:
        command_line = Path(f"/proc/{state['pid']}/cmdline").read_bytes()
    except (OSError, KeyError):
        return False
    return b"kafka.Kafka" in command_line and str(state["data_dir"]).encode() in command_line


def _broker_fetch(args: argparse.Namespace) -> int:
    libs = ensure_kafka_jars(args.kafka_version, progress=_say)
    print(libs)
    return EXIT_OK


def _broker_start(args: argparse.Namespace) -> int:
    state = _read_state(args.state_file)
    if not args.foreground and state is not None and _is_our_broker(state):
        _say(
            f"a broker is already running at {state['bootstrap_servers']} (pid {state['pid']}); "
            "stop it first with 'client-balance broker stop'"
        )
        return EXIT_FAILED
    data_dir = args.data_dir
    if data_dir is None and not args.foreground:
        # A detached broker outlives this process, so its data dir must be one we can find.
        data_dir = kafka_home(args.kafka_version).parent / f"broker-data-{int(time.time())}"
    kafka = LocalKafka(
        version=args.kafka_version,
        data_dir=data_dir,
        port=args.port,
        heap_mb=args.heap_mb,
        die_with_parent=args.foreground,
        progress=_say,
    )
    kafka.start()
    _say(f"Apache Kafka {args.kafka_version} is ready in {kafka.startup_s:.1f} s")
    print(kafka.bootstrap_servers, flush=True)
    if args.foreground:
        try:
            while kafka.is_running():
                time.sleep(0.5)
        except KeyboardInterrupt:
            _say("stopping the broker")
        finally:
            kafka.stop()
        return EXIT_OK
    record = {
        "pid": kafka.detach(),
        "bootstrap_servers": kafka.bootstrap_servers,
        "data_dir": str(kafka.data_dir),
        "log": str(kafka.log_path),
        "owns_data_dir": args.data_dir is None,
    }
    args.state_file.parent.mkdir(parents=True, exist_ok=True)
    args.state_file.write_text(json.dumps(record, indent=2) + "\n")
    _say(
        f"detached (pid {record['pid']}, log {record['log']}); stop it with "
        "'client-balance broker stop'"
    )
    return EXIT_OK


def _broker_stop(args: argparse.Namespace) -> int:
    state = _read_state(args.state_file)
    if state is None:
        _say(f"no detached broker is recorded in {args.state_file}")
        return EXIT_FAILED
    if _is_our_broker(state):
        stop_pid(int(state["pid"]))
        _say(f"stopped the broker at {state['bootstrap_servers']} (pid {state['pid']})")
    else:
        _say(f"the broker recorded in {args.state_file} was no longer running")
    if state.get("owns_data_dir"):
        shutil.rmtree(state["data_dir"], ignore_errors=True)
    args.state_file.unlink(missing_ok=True)
    return EXIT_OK


def _broker_status(args: argparse.Namespace) -> int:
    state = _read_state(args.state_file)
    if state is None or not _is_our_broker(state):
        _say("no broker is running" + ("" if state is None else " (stale state file)"))
        return EXIT_FAILED
    answers = admin.cluster_answers(state["bootstrap_servers"], timeout_s=5.0)
    if args.bootstrap:
        print(state["bootstrap_servers"])
    else:
        health = "answers metadata" if answers else "does NOT answer metadata"
        print(
            f"running at {state['bootstrap_servers']} (pid {state['pid']}), {health}; "
            f"log {state['log']}"
        )
    return EXIT_OK if answers else EXIT_FAILED


def _simulate_command(args: argparse.Namespace) -> int:
    try:
        plan = _simulate.plan_simulation(args.topics, args.members, args.changes)
        names = strategy_names() if args.compare else (args.strategy,)
        strategies = [get_strategy(name) for name in names]
    except ConfigError as error:
        _say(f"client-balance simulate: error: {error}")
        return EXIT_USAGE
    results = {strategy.name: _simulate.simulate(plan, strategy) for strategy in strategies}
    if args.json:
        print(json.dumps(_simulate.simulation_to_json(plan, results), indent=2))
    elif args.compare:
        print(_simulate.render_comparison(plan, results))
    else:
        [(name, rounds)] = results.items()
        print(_simulate.render_rounds(plan, name, rounds))
    return EXIT_OK


_BROKER_ACTIONS = {
    "fetch": _broker_fetch,
    "start": _broker_start,
    "stop": _broker_stop,
    "status": _broker_status,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits on --help and on usage errors
        return int(exit_.code or 0)
    _configure_logging(args.verbose)
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "broker": lambda given: _BROKER_ACTIONS[given.action](given),
        "simulate": _simulate_command,
        **GROUP_COMMANDS,
    }
    try:
        return commands[args.command](args)
    except ClientBalanceError as error:
        _say(f"error: {error}")
        return EXIT_FAILED
    except KeyboardInterrupt:  # --watch runs until Ctrl-C
        return EXIT_OK


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
