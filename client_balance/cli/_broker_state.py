"""The state file of ``client-balance broker``: what a detached broker is, and who may start one.

``start`` records each node as its pid, the pid's start time (field 22 of /proc/<pid>/stat)
and the exact ``server.properties`` argument its JVM was started with, under the resolved
data dir. ``status`` and ``stop`` act on a pid only while all three still match: a pid is
reused once its process is gone, by any process, and a stale state file must never name a
stranger to be stopped. The file is replaced whole (a temp file and ``os.replace``), so a
reader never sees half of one, and a lock next to it lets one ``start`` at a time check it
and write it.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from client_balance.broker._process import command_line, start_time
from client_balance.errors import BrokerError

__all__ = ["node_records", "our_pids", "read_state", "start_lock", "write_state"]

_MAIN_CLASS = "kafka.Kafka"
_PROPERTIES_NAME = "server.properties"


def read_state(path: Path) -> dict[str, Any] | None:
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
    for key in ("pids", "nodes"):
        if state.get(key) is not None and not isinstance(state[key], list):
            return None
    return state


def write_state(path: Path, record: Mapping[str, Any]) -> None:
    """Replace the state file with ``record`` at once (mode 0600); OSError if it cannot be."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(json.dumps(record, indent=2) + "\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def node_records(pids: Mapping[int, int], data_dir: Path, brokers: int) -> list[dict[str, Any]]:
    """What identifies each node's JVM (by node id ``pids``) for :func:`our_pids` to check."""
    records = []
    for node_id, pid in sorted(pids.items()):
        # LocalKafka's layout: one node runs in the data dir, a cluster's in node-<id>/.
        folder = data_dir if brokers == 1 else data_dir / f"node-{node_id}"
        records.append({
            "pid": pid, "start_time": start_time(pid), "properties": str(folder / _PROPERTIES_NAME)
        })  # fmt: skip
    return records


def our_pids(state: Mapping[str, Any]) -> list[int]:
    """The recorded nodes' pids that are still those very processes.

    A record without start times (an older client-balance's) cannot tell its broker from a
    process that took its pid since, so none of its pids count.
    """
    found = []
    for node in state.get("nodes") or []:
        if not isinstance(node, dict):
            continue
        pid, started, properties = node.get("pid"), node.get("start_time"), node.get("properties")
        if not (isinstance(pid, int) and isinstance(started, int) and isinstance(properties, str)):
            continue
        if _is_our_broker(pid, started, properties):
            found.append(pid)
    return found


def _is_our_broker(pid: int, started: int, properties: str) -> bool:
    arguments = command_line(pid)
    if arguments is None or start_time(pid) != started:
        return False
    return any(
        argument == _MAIN_CLASS and following == properties
        for argument, following in itertools.pairwise(arguments)
    )


@contextlib.contextmanager
def start_lock(state_file: Path) -> Iterator[None]:
    """Hold ``<state_file>.lock`` while one ``broker start`` checks and writes ``state_file``.

    Raises :class:`BrokerError` at once when another holds it: two starts that both found no
    broker would each start one, and the file could keep only one of them.
    """
    lock = state_file.with_name(state_file.name + ".lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as error:
        raise BrokerError(f"cannot lock the state file {state_file} ({error})") from error
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BrokerError(
                f"another 'client-balance broker start' is starting a broker for the state "
                f"file {state_file}; wait for it, or give this one another --state-file"
            ) from None
        yield
    finally:
        os.close(descriptor)
