"""``client-balance broker``: a local Apache Kafka broker for trying things out.

``start`` detaches the broker unless ``--foreground``; a state file records its pid, address and
data directory so that ``status`` and ``stop`` (in another process, later) can find it; it is
written as soon as the JVMs are spawned, one start at a time (``_broker_state.py``). With
``--brokers N`` it is a cluster of N nodes, and the state file records every node's pid
(``"pids"``; ``"pid"`` is the first node's, so state files of single brokers read the same).
``stop`` deletes the recorded data directory only if LocalKafka created it (its marker file):
the state file is plain JSON, and its word alone must never delete a folder.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from client_balance import admin
from client_balance._kafka import wait_until
from client_balance.broker import (
    DEFAULT_KAFKA_VERSION,
    LocalKafka,
    ensure_kafka_jars,
    kafka_home,
)
from client_balance.broker._config import MIN_HEAP_MB
from client_balance.broker._datadir import new_data_dir, remove_data_dir
from client_balance.broker._process import stop_pids, tail
from client_balance.cli._broker_state import (
    node_records,
    our_pids,
    read_state,
    start_lock,
    write_state,
)
from client_balance.cli._render import EXIT_FAILED, EXIT_OK, out, say
from client_balance.errors import BrokerError, BrokerStartError

__all__ = ["COMMANDS", "add_parsers", "running_broker_address"]

_MAX_PORT = 65_535
_UNWOUND_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_SIGNALLED_EXIT = 128  # plus the signal's number, as a shell reports a process it ended


def _default_state_file() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "client-balance" / "broker.json"


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``broker`` and its actions to the ``client-balance`` parser."""
    broker = commands.add_parser("broker", help="a local Apache Kafka 4.x broker (KRaft)")
    actions = broker.add_subparsers(dest="action", required=True, metavar="ACTION")
    state_help = (
        f"where a detached broker's pid and address are kept (default {_default_state_file()})"
    )

    fetch = actions.add_parser("fetch", help="fetch the broker jars with Maven (once, cached)")
    fetch.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)

    start = actions.add_parser("start", help="start a broker; prints its bootstrap address")
    start.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)
    start.add_argument("--port", type=_port, default=None, help="listener port (default: free)")
    start.add_argument(
        "--data-dir", type=Path, default=None, help="keep data here (default: fresh temp dir)"
    )
    start.add_argument(
        "--brokers", type=_node_count, default=1, help="nodes in the cluster (default 1)"
    )
    start.add_argument("--heap-mb", type=_heap_mb, default=512, help="heap of each node's JVM")
    start.add_argument(
        "--foreground", action="store_true", help="run until Ctrl-C instead of detaching"
    )
    start.add_argument("--state-file", type=Path, default=_default_state_file(), help=state_help)

    stop = actions.add_parser("stop", help="stop the detached broker (every node of a cluster)")
    stop.add_argument("--state-file", type=Path, default=_default_state_file(), help=state_help)

    status = actions.add_parser("status", help="is the detached broker running, and where")
    status.add_argument("--state-file", type=Path, default=_default_state_file(), help=state_help)
    status.add_argument("--bootstrap", action="store_true", help="print only the bootstrap address")


def _whole(text: str, lowest: int, highest: int | None, what: str) -> int:
    """``text`` as a whole number in ``[lowest, highest]``, else an error naming what it is."""
    # isdigit() is True for "²", which int() refuses: ASCII digits only.
    number = int(text) if text.isascii() and text.isdecimal() else lowest - 1
    if number < lowest or (highest is not None and number > highest):
        allowed = f"from {lowest} to {highest}" if highest is not None else f"of {lowest} or more"
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; use {what} {allowed}")
    return number


def _port(text: str) -> int:
    """--port: 1 to 65535."""
    return _whole(text, 1, _MAX_PORT, "a port")


def _node_count(text: str) -> int:
    """--brokers: 1 or more."""
    return _whole(text, 1, None, "a node count")


def _heap_mb(text: str) -> int:
    """--heap-mb: what a Kafka node needs to start, at least."""
    return _whole(text, MIN_HEAP_MB, None, "a heap in MiB")


def running_broker_address() -> str | None:
    """The address of the broker that ``broker start`` left running, if it still runs."""
    state = read_state(_default_state_file())
    return state["bootstrap_servers"] if state and our_pids(state) else None


def _broker_fetch(args: argparse.Namespace) -> int:
    libs = ensure_kafka_jars(args.kafka_version, progress=say)
    out(str(libs))
    return EXIT_OK


class _Signalled(BaseException):
    """SIGTERM or SIGHUP while a broker starts: unwind, so that what started is stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _signals_unwind() -> Iterator[None]:
    # Python ends at SIGTERM or SIGHUP without unwinding (`timeout`, a closed terminal, a
    # cancelled CI step): the JVMs just spawned would run on with no one to stop them.
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; a caller's thread keeps its own
        return

    def unwind(signum: int, _frame: object) -> None:
        raise _Signalled(signum)

    previous = {number: signal.signal(number, unwind) for number in _UNWOUND_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _broker_start(args: argparse.Namespace) -> int:
    if args.foreground:
        return _run_in_foreground(args)
    # From the check to the write: two starts at once would each find no broker and start one.
    with start_lock(args.state_file):
        state = read_state(args.state_file)
        running = our_pids(state) if state is not None else []
        if state is not None and running:
            say(
                f"a broker is already running at {state['bootstrap_servers']} "
                f"(pid {', '.join(map(str, running))}); stop it first with "
                "'client-balance broker stop'"
            )
            return EXIT_FAILED
        return _start_detached(args)


def _run_in_foreground(args: argparse.Namespace) -> int:
    kafka = _local_kafka(args, args.data_dir, die_with_parent=True)
    kafka.start()
    _announce(args, kafka)
    try:
        wait_until(lambda: not kafka.is_running(), timeout_s=math.inf, interval_s=0.5)
        log = kafka.log_path  # read now: stop() removes a temporary data dir
        which = "broker" if args.brokers == 1 else "cluster"
        say(f"the {which} exited on its own; last lines of {log}:\n{tail(log)}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        say("stopping the broker" if args.brokers == 1 else "stopping the cluster")
        return EXIT_OK
    finally:
        kafka.stop()


def _start_detached(args: argparse.Namespace) -> int:
    # A detached broker outlives this process, so its data dir must be one we can find; a
    # random name, as two starts in one second (even with other state files) must not share it.
    made = None
    if args.data_dir is None:
        made = new_data_dir(kafka_home(args.kafka_version).parent, "broker-data-")
    # Resolved: the state file is read from other folders, and its path is matched exactly.
    data_dir = (made or args.data_dir).resolve()
    kafka = _local_kafka(args, data_dir, die_with_parent=False)
    recorded = False

    def record(pids: dict[int, int]) -> None:  # as soon as the JVMs exist, before the wait
        nonlocal recorded
        state = {
            "pid": pids[min(pids)], "pids": [pid for _, pid in sorted(pids.items())],
            "nodes": node_records(pids, data_dir, args.brokers),
            "bootstrap_servers": kafka.bootstrap_servers, "data_dir": str(data_dir),
            "log": str(kafka.log_path), "owns_data_dir": made is not None,
        }  # fmt: skip
        try:
            write_state(args.state_file, state)
        except OSError as error:
            raise BrokerError(
                f"cannot write the state file {args.state_file} ({error}); the broker was stopped"
            ) from error
        recorded = True

    try:
        with _signals_unwind():
            kafka.start(on_spawned=record)
            kafka.detach()
    except BaseException as error:
        kafka.stop()
        if recorded:
            args.state_file.unlink(missing_ok=True)
        if made is not None and not isinstance(error, BrokerStartError):  # its log is named
            remove_data_dir(made)
        if isinstance(error, _Signalled):
            say(f"{error} while the broker started: it was stopped")
            return _SIGNALLED_EXIT + error.signum
        raise
    _announce(args, kafka)
    pids = ", ".join(map(str, sorted(kafka.broker_pids().values())))
    say(f"detached (pid {pids}, log {kafka.log_path}); stop it with 'client-balance broker stop'")
    return EXIT_OK


def _local_kafka(
    args: argparse.Namespace, data_dir: Path | None, *, die_with_parent: bool
) -> LocalKafka:
    return LocalKafka(
        version=args.kafka_version,
        data_dir=data_dir,
        brokers=args.brokers,
        port=args.port,
        heap_mb=args.heap_mb,
        die_with_parent=die_with_parent,
        progress=say,
    )


def _announce(args: argparse.Namespace, kafka: LocalKafka) -> None:
    nodes = "" if args.brokers == 1 else f" ({args.brokers} nodes)"
    say(f"Apache Kafka {args.kafka_version}{nodes} is ready in {kafka.startup_s:.1f} s")
    # rich flushes each print, so a script reading the address need not wait for the broker to end.
    out(kafka.bootstrap_servers)


def _broker_stop(args: argparse.Namespace) -> int:
    state = read_state(args.state_file)
    if state is None:
        say(f"no detached broker is recorded in {args.state_file}")
        return EXIT_FAILED
    running = our_pids(state)
    if running:
        stop_pids(running)
        pids = ", ".join(map(str, running))
        say(f"stopped the broker at {state['bootstrap_servers']} (pid {pids})")
    else:
        say(f"the broker recorded in {args.state_file} was no longer running")
    # The broker is stopped either way: the state file has nothing left to track.
    args.state_file.unlink(missing_ok=True)
    if state.get("owns_data_dir") and state.get("data_dir"):
        try:
            remove_data_dir(Path(state["data_dir"]))
        except BrokerError as error:
            say(str(error))
            return EXIT_FAILED
    return EXIT_OK


def _broker_status(args: argparse.Namespace) -> int:
    state = read_state(args.state_file)
    running = our_pids(state) if state is not None else []
    if state is None or not running:
        say("no broker is running" + ("" if state is None else " (stale state file)"))
        return EXIT_FAILED
    answers = admin.cluster_answers(state["bootstrap_servers"], timeout_s=5.0)
    if args.bootstrap:
        out(state["bootstrap_servers"])
    else:
        health = "answers metadata" if answers else "does NOT answer metadata"
        out(
            f"running at {state['bootstrap_servers']} (pid {', '.join(map(str, running))}), "
            f"{health}; log {state['log']}"
        )
    return EXIT_OK if answers else EXIT_FAILED


_ACTIONS: dict[str, Callable[[argparse.Namespace], int]] = {
    "fetch": _broker_fetch,
    "start": _broker_start,
    "stop": _broker_stop,
    "status": _broker_status,
}


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "broker": lambda args: _ACTIONS[args.action](args)
}
