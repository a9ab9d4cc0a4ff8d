"""The broker's process: ports, ids, CDS archives, log tails, stopping by pid."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import signal
import socket
import uuid
from collections.abc import Iterable
from pathlib import Path

from client_balance._kafka import BROKER_POLL_S, METADATA_POLL_S, wait_until

__all__ = [
    "KILLED_REAP_S",
    "alive",
    "cds_archive_path",
    "cluster_id",
    "command_line",
    "free_ports",
    "read_cluster_id",
    "read_ports",
    "start_time",
    "stop_pid",
    "stop_pids",
    "tail",
    "tail_text",
    "write_argfile",
]

KILLED_REAP_S = 60.0
"""How long to wait for a SIGKILLed broker to be reaped: at once, unless the kernel is still
finishing its I/O (a JVM with hundreds of MB on a machine at load 25 took over a second)."""


def free_ports(count: int) -> list[int]:
    # Every probe stays bound until all are taken, so the ports are distinct.
    with contextlib.ExitStack() as stack:
        probes = [
            stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            for _ in range(count)
        ]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]


def cluster_id() -> str:
    # Kafka's Uuid text form: 16 random bytes, base64url, no padding; a leading '-' would be
    # read as an option by the storage tool.
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def cds_archive_path(java: str, libs: Path) -> Path:
    # An archive only fits the JVM build and the exact jars it was dumped with.
    real_java = Path(java).resolve()
    identity = (
        f"{real_java}:{real_java.stat().st_mtime_ns}:{sorted(p.name for p in libs.iterdir())}"
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return libs.parent / "cds" / f"broker-{digest}.jsa"


def read_ports(properties: Path) -> dict[str, int]:
    """Listener name -> port, from a node's ``server.properties``."""
    ports: dict[str, int] = {}
    for line in properties.read_text().splitlines():
        if line.startswith("listeners="):
            for listener in line.removeprefix("listeners=").split(","):
                name, _, address = listener.partition("://")
                ports[name] = int(address.rsplit(":", 1)[1])
    return ports


def read_cluster_id(meta_properties: Path) -> str | None:
    for line in meta_properties.read_text().splitlines():
        if line.startswith("cluster.id="):
            return line.removeprefix("cluster.id=").strip()
    return None


def tail_text(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def tail(path: Path, lines: int = 40) -> str:
    try:
        return tail_text(path.read_text(errors="replace"), lines)
    except OSError:
        return "(no broker log was written)"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) still answers kill(pid, 0).
    fields = _stat_fields(pid)
    return fields is None or fields[0] != "Z"


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), or None if there is no such pid.

    A pid is reused once its process is gone; the pid with its start time names one process.
    """
    fields = _stat_fields(pid)
    try:
        return None if fields is None else int(fields[19])  # field 22 of the file
    except (IndexError, ValueError):
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the name (field 3 on), or None if unreadable."""
    try:
        # The name (field 2) is in parentheses and may hold spaces or ") ": split after its last.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None


def command_line(pid: int) -> list[str] | None:
    """The arguments process ``pid`` was started with, or None if it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.decode(errors="surrogateescape").split("\0")[:-1]


def stop_pid(pid: int, *, timeout_s: float = 20.0) -> bool:
    """Stop a detached broker by pid: SIGTERM, wait, then SIGKILL. False if it was not running."""
    return bool(stop_pids([pid], timeout_s=timeout_s))


def stop_pids(pids: list[int], *, timeout_s: float = 20.0) -> list[int]:
    """Stop a detached cluster's brokers together: SIGTERM to all, wait, then SIGKILL.

    Returns the pids that were running. (One by one, the last brokers' controlled shutdowns
    would wait for a controller quorum that is gone.)
    """
    running = [pid for pid in pids if alive(pid)]
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)

    def all_gone() -> bool:
        return not any(alive(pid) for pid in running)

    if wait_until(all_gone, timeout_s=timeout_s, interval_s=BROKER_POLL_S):
        return running
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    # SIGKILL cannot be refused: the wait is for the kernel to reap it, which it always does.
    wait_until(all_gone, timeout_s=KILLED_REAP_S, interval_s=METADATA_POLL_S)
    return running


def write_argfile(path: Path, arguments: Iterable[str]) -> Path:
    """Write a java launcher argument file (``java @path``) that only its owner can read.

    One quoted argument a line, so that a path with spaces stays one argument. What it holds
    is not on the process's command line, which every local user can read.
    """
    path.unlink(missing_ok=True)  # an old one keeps its mode through O_CREAT
    quoted = ('"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"' for part in arguments)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write("\n".join(quoted) + "\n")
    return path
