"""``client-balance broker``: a local Apache Kafka broker for trying things out.

``start`` detaches the broker unless ``--foreground``; a state file records its pid, address and
data directory so that ``status`` and ``stop`` (in another process, later) can find it. With
``--brokers N`` it is a cluster of N nodes, and the state file records every node's pid
(``"pids"``; ``"pid"`` is the first node's, so state files of single brokers read the same).
``stop`` deletes the recorded data directory only if LocalKafka created it (its marker file):
the state file is plain JSON, and its word alone must never delete a folder.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from client_balance import admin
from client_balance.broker import (
    DEFAULT_KAFKA_VERSION,
    LocalKafka,
    ensure_kafka_jars,
    kafka_home,
)
from client_balance.broker._config import MIN_HEAP_MB
from client_balance.broker._datadir import remove_data_dir
from client_balance.broker._process import stop_pids
from client_balance.cli._render import EXIT_FAILED, EXIT_OK, out, say
from client_balance.errors import BrokerError

__all__ = ["COMMANDS", "add_parsers", "running_broker_address"]

_MAX_PORT = 65_535


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
    state = _read_state(_default_state_file())
    return state["bootstrap_servers"] if state and _our_pids(state) else None


def _read_state(path: Path) -> dict[str, Any] | None:
    """The state ``broker start`` wrote, or None: missing, or not of its shape.

    It is plain JSON that anyone can edit: a wrong one is no broker, not a traceback.
    """
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(state, dict) or not all(
        isinstance(state.get(key), str) for key in ("bootstrap_servers", "data_dir", "log")
    ):
        return None
    pids = state.get("pids")
    if pids is not None and not isinstance(pids, list):
        return None
    return state


def _our_pids(state: dict[str, Any]) -> list[int]:
    """The recorded pids that are still our brokers (a cluster's ``pids``, else ``pid``)."""
    data_dir = state.get("data_dir")
    if data_dir is None:
        return []
    found = []
    for recorded in state.get("pids") or [state.get("pid")]:
        try:
            pid = int(recorded)
        except (TypeError, ValueError):
            continue
        if _is_our_broker(pid, str(data_dir)):
            found.append(pid)
    return found


def _is_our_broker(pid: int, data_dir: str) -> bool:
    # The pid may have been reused by an unrelated process since the broker died.
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"kafka.Kafka" in command_line and data_dir.encode() in command_line


def _broker_fetch(args: argparse.Namespace) -> int:
    libs = ensure_kafka_jars(args.kafka_version, progress=say)
    out(str(libs))
    return EXIT_OK


def _broker_start(args: argparse.Namespace) -> int:
    state = _read_state(args.state_file)
    running = _our_pids(state) if state is not None else []
    if not args.foreground and state is not None and running:
        say(
            f"a broker is already running at {state['bootstrap_servers']} "
            f"(pid {', '.join(map(str, running))}); stop it first with 'client-balance broker stop'"
        )
        return EXIT_FAILED
    data_dir = args.data_dir
    if data_dir is None and not args.foreground:
        # A detached broker outlives this process, so its data dir must be one we can find.
        data_dir = kafka_home(args.kafka_version).parent / f"broker-data-{int(time.time())}"
    kafka = LocalKafka(
        version=args.kafka_version,
        data_dir=data_dir,
        brokers=args.brokers,
        port=args.port,
        heap_mb=args.heap_mb,
        die_with_parent=args.foreground,
        progress=say,
    )
    kafka.start()
    nodes = "" if args.brokers == 1 else f" ({args.brokers} nodes)"
    say(f"Apache Kafka {args.kafka_version}{nodes} is ready in {kafka.startup_s:.1f} s")
    # rich flushes each print, so a script reading the address need not wait for the broker to end.
    out(kafka.bootstrap_servers)
    if args.foreground:
        try:
            while kafka.is_running():
                time.sleep(0.5)
        except KeyboardInterrupt:
            say("stopping the broker" if args.brokers == 1 else "stopping the cluster")
        finally:
            kafka.stop()
        return EXIT_OK
    pids = [pid for _, pid in sorted(kafka.broker_pids().items())]
    try:  # writable before the broker is let go: else nothing could find it to stop it
        args.state_file.parent.mkdir(parents=True, exist_ok=True)
        args.state_file.touch()
    except OSError as error:
        kafka.stop()
        say(f"cannot write the state file {args.state_file} ({error}); the broker was stopped")
        return EXIT_FAILED
    record = {
        "pid": kafka.detach(),
        "pids": pids,
        "bootstrap_servers": kafka.bootstrap_servers,
        "data_dir": str(kafka.data_dir),
        "log": str(kafka.log_path),
        "owns_data_dir": args.data_dir is None,
    }
    args.state_file.write_text(json.dumps(record, indent=2) + "\n")
    say(
        f"detached (pid {', '.join(map(str, pids))}, log {record['log']}); "
        "stop it with 'client-balance broker stop'"
    )
    return EXIT_OK


def _broker_stop(args: argparse.Namespace) -> int:
    state = _read_state(args.state_file)
    if state is None:
        say(f"no detached broker is recorded in {args.state_file}")
        return EXIT_FAILED
    running = _our_pids(state)
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
    state = _read_state(args.state_file)
    running = _our_pids(state) if state is not None else []
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
