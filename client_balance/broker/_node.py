"""One node of a :class:`~client_balance.broker.LocalKafka`: a combined KRaft broker+controller.

A node owns a folder (``server.properties``, ``broker.log``, ``kraft-logs/``), its ports
(PLAINTEXT and CONTROLLER; SASL_PLAINTEXT for the clients of a secured cluster) and its JVM.
The cluster decides the shared properties (``_config.py``); the node writes them with its own
id, listeners and log dir, formats its log dir, spawns ``kafka.Kafka`` and stops or kills it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from client_balance._timing import Deadline
from client_balance.broker._config import SASL_LISTENER, Sasl, cluster_config
from client_balance.broker._process import (
    KILLED_REAP_S,
    cds_archive_path,
    cluster_id,
    free_ports,
    read_cluster_id,
    read_ports,
    tail,
    tail_text,
    write_argfile,
)
from client_balance.errors import BrokerStartError

__all__ = [
    "LOG_NAME",
    "KafkaNode",
    "Launch",
    "NodePorts",
    "cleanup",
    "stop_nodes",
]

LOG_NAME = "broker.log"
_PROPERTIES_NAME = "server.properties"
_LOG4J_NAME = "log4j2.properties"
_CDS_DUMP_NAME = "classes.jsa"
_FORMAT_TIMEOUT_S = 120.0
_FORMAT_ARGS_NAME = ".format-args"
"""StorageTool's arguments for a secured cluster (``java @file``), removed once it ran."""


@dataclass(frozen=True, slots=True)
class Launch:
    """How every node's JVM is started: the same Java, jars, heap and options for all."""

    java: str
    libs: Path
    version: str
    heap_mb: int
    die_with_parent: bool
    class_data_sharing: bool
    progress: Callable[[str], None] | None
    sasl: Sasl | None = None
    """A secured cluster's SASL setup (format adds its admin), or None for PLAINTEXT only."""

    def jvm(self, directory: Path) -> list[str]:
        """``java`` and the options every Kafka tool of a node runs with (no main class)."""
        return [
            self.java, f"-Dlog4j2.configurationFile={directory / _LOG4J_NAME}",
            f"-Dkafka.logs.dir={directory}", "-Djava.awt.headless=true", "-cp", f"{self.libs}/*",
        ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class NodePorts:
    """A node's listeners on 127.0.0.1."""

    broker: int
    controller: int
    proxied: tuple[int, int] | None = None
    """(port, advertised port) of a third listener, for clients a test proxy can cut off."""
    sasl: int | None = None
    """The SASL_PLAINTEXT listener of a secured cluster: the clients' port."""


class KafkaNode:
    """One Kafka JVM (``process.roles=broker,controller``) and its folder."""

    def __init__(self, node_id: int, directory: Path, launch: Launch, *, dumps_cds: bool) -> None:
        self.node_id = node_id
        self.directory = directory
        self.launch = launch
        self.dumps_cds = dumps_cds
        """Whether this node writes the CDS archive when there is none yet (one node does)."""
        self.ports: NodePorts | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._cds_archive: Path | None = None

    @property
    def properties_path(self) -> Path:
        return self.directory / _PROPERTIES_NAME

    @property
    def log_path(self) -> Path:
        return self.directory / LOG_NAME

    @property
    def _meta_properties(self) -> Path:
        return self.directory / "kraft-logs" / "meta.properties"

    @property
    def formatted(self) -> bool:
        """Whether the log dir was formatted (by an earlier start on this folder)."""
        return self._meta_properties.is_file()

    @property
    def cluster_id(self) -> str | None:
        """The cluster id of a formatted log dir."""
        return read_cluster_id(self._meta_properties) if self.formatted else None

    @property
    def address(self) -> str:
        """``127.0.0.1:<PLAINTEXT port>``."""
        if self.ports is None:
            raise BrokerStartError(f"node {self.node_id} has no ports yet", log_tail="")
        return f"127.0.0.1:{self.ports.broker}"

    @property
    def client_address(self) -> str:
        """Where clients connect: the SASL_PLAINTEXT listener if there is one, else PLAINTEXT."""
        if self.ports is not None and self.ports.sasl is not None:
            return f"127.0.0.1:{self.ports.sasl}"
        return self.address

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def previous_ports(self) -> NodePorts | None:
        """The ports of an earlier start on this folder, which a restart keeps."""
        if not (self.formatted and self.properties_path.is_file()):
            return None
        found = read_ports(self.properties_path)
        if "PLAINTEXT" not in found or "CONTROLLER" not in found:
            return None
        return NodePorts(found["PLAINTEXT"], found["CONTROLLER"], sasl=found.get(SASL_LISTENER))

    # -- setup ------------------------------------------------------------------------------

    def write_config(self, cluster: Mapping[str, str], extra: Mapping[str, str]) -> None:
        """Write ``server.properties`` (``cluster``'s, the node's own, ``extra``) and log4j2's."""
        self.directory.mkdir(parents=True, exist_ok=True)
        assert self.ports is not None  # noqa: S101 - the cluster sets the ports first
        listeners = (
            f"PLAINTEXT://127.0.0.1:{self.ports.broker},"
            f"CONTROLLER://127.0.0.1:{self.ports.controller}"
        )
        advertised, protocols = listeners, cluster["listener.security.protocol.map"]
        if self.ports.proxied is not None:
            # Clients that bootstrap here are told the advertised port: whatever listens there
            # (a test's proxy) carries all their traffic, so cutting it cuts them alone.
            port, advertised_port = self.ports.proxied
            listeners += f",PROXIED://127.0.0.1:{port}"
            advertised += f",PROXIED://127.0.0.1:{advertised_port}"
            protocols += ",PROXIED:PLAINTEXT"
        if self.ports.sasl is not None:
            listeners += f",{SASL_LISTENER}://127.0.0.1:{self.ports.sasl}"
            advertised += f",{SASL_LISTENER}://127.0.0.1:{self.ports.sasl}"
            protocols += f",{SASL_LISTENER}:{SASL_LISTENER}"
        values = {
            **cluster,
            "node.id": str(self.node_id),
            "listeners": listeners,
            "advertised.listeners": advertised,
            "listener.security.protocol.map": protocols,
            "log.dirs": str(self.directory / "kraft-logs"),
            **extra,
        }
        self.properties_path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        log4j = resources.files("client_balance.broker").joinpath(_LOG4J_NAME).read_text()
        (self.directory / _LOG4J_NAME).write_text(log4j)

    def start_format(self, cluster_id: str, *, standalone: bool) -> subprocess.Popen[str]:
        """Start ``kafka.tools.StorageTool format`` on the log dir; see :meth:`check_format`.

        ``standalone`` for a node alone in its quorum (``controller.quorum.bootstrap.servers``);
        the nodes of a static quorum (``controller.quorum.voters``) are formatted without it.
        """
        jvm = self.launch.jvm(self.directory)
        sasl = self.launch.sasl.format_args() if self.launch.sasl is not None else []
        tool = [
            "kafka.tools.StorageTool", "format", *(["--standalone"] if standalone else []),
            "-t", cluster_id, "-c", str(self.properties_path), *sasl,
        ]  # fmt: skip
        if sasl:  # the admin's password: in a file of the owner's, not on a command line
            tool = [f"@{write_argfile(self.directory / _FORMAT_ARGS_NAME, tool)}"]
        # A short-lived tool: the client compiler and serial GC start it faster.
        command = [
            jvm[0], "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", *jvm[1:], *tool
        ]  # fmt: skip
        return subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip

    def check_format(self, tool: subprocess.Popen[str]) -> None:
        """Wait for :meth:`start_format`'s tool; raise with its output if it failed."""
        try:
            stdout, stderr = tool.communicate(timeout=_FORMAT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            tool.kill()
            stdout, stderr = tool.communicate()
        finally:
            (self.directory / _FORMAT_ARGS_NAME).unlink(missing_ok=True)
        if tool.returncode != 0:
            output = tail_text(stdout + stderr)
            if self.launch.sasl is not None:
                output = self.launch.sasl.mask(output)
            raise BrokerStartError(
                f"Apache Kafka {self.launch.version} did not start: formatting the log dir with "
                f"kafka.tools.StorageTool failed (exit {tool.returncode}). Last lines of its "
                f"output:\n{output}",
                log_tail=output,
            )

    # -- the JVM ----------------------------------------------------------------------------

    def spawn(self, name: str) -> None:
        """Start ``kafka.Kafka`` on ``server.properties``; ``name`` is what the progress says."""
        jvm = self.launch.jvm(self.directory)
        command = [
            jvm[0], f"-Xms{self.launch.heap_mb}m", f"-Xmx{self.launch.heap_mb}m",
            "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", *self._cds_flags(), *jvm[1:],
            "kafka.Kafka", str(self.properties_path),
        ]  # fmt: skip
        setpriv = shutil.which("setpriv") if self.launch.die_with_parent else None
        if setpriv is not None:
            # setpriv sets the parent-death signal and then execs java, so the pid is the JVM's.
            command = [setpriv, "--pdeathsig", "TERM", "--", *command]
        if self.launch.progress is not None:
            self.launch.progress(f"starting {name} (log: {self.log_path})")
        # A session of its own, so a Ctrl-C meant for the caller reaches the broker only
        # through stop(), which shuts it down cleanly.
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip

    def _cds_flags(self) -> list[str]:
        self._cds_archive = None
        if not self.launch.class_data_sharing:
            return []
        archive = cds_archive_path(self.launch.java, self.launch.libs)
        if archive.is_file():
            return [f"-XX:SharedArchiveFile={archive}"]
        if not self.dumps_cds:
            return []
        # No archive yet: this JVM writes one when it exits; stop() moves it into the cache.
        self._cds_archive = archive
        return [f"-XX:ArchiveClassesAtExit={self.directory / _CDS_DUMP_NAME}"]

    def keep_cds_archive(self) -> None:
        """Move the archive a cleanly stopped JVM dumped into the jar cache."""
        archive, self._cds_archive = self._cds_archive, None
        dumped = self.directory / _CDS_DUMP_NAME
        if archive is not None and dumped.is_file():
            # The data dir may be on another filesystem: copy next to the archive, then rename.
            partial = archive.with_suffix(f".partial-{os.getpid()}")
            archive.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(dumped, partial)
            partial.replace(archive)

    def log_tail(self) -> str:
        return tail(self.log_path)

    def kill(self, timeout_s: float) -> None:
        """SIGKILL the JVM and wait until it is reaped (a SIGKILL cannot be refused)."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(timeout=timeout_s)
        self.process = None
        self._cds_archive = None

    def terminate(self) -> None:
        """Ask the JVM for a graceful shutdown (SIGTERM) without waiting; see :meth:`reap`."""
        if self.alive():
            assert self.process is not None  # noqa: S101 - alive() says so
            self.process.send_signal(signal.SIGTERM)

    def reap(self, timeout_s: float) -> None:
        """Wait for the JVM to exit, SIGKILL it after ``timeout_s``; keep a dumped CDS archive."""
        if self.process is None:
            return
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=KILLED_REAP_S)  # not timeout_s: that ran out already
        self.process = None
        self.keep_cds_archive()

    def stop(self, timeout_s: float) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s``."""
        self.terminate()
        self.reap(timeout_s)


def stop_nodes(nodes: Iterable[KafkaNode], timeout_s: float) -> None:
    """Stop nodes together (SIGTERM to all, SIGKILL at ``timeout_s``).

    One by one, the last brokers' controlled shutdowns would wait for a controller quorum
    that is gone.
    """
    nodes = list(nodes)
    for node in nodes:
        node.terminate()
    deadline = Deadline(timeout_s)
    for node in nodes:
        node.reap(max(deadline.left_s(), 1.0))


def prepare_nodes(
    nodes: list[KafkaNode],
    *,
    first_port: int | None,
    extra: Mapping[str, str],
    proxied: bool = False,
) -> None:
    """Give ``nodes`` ports, write their properties, format their log dirs with one cluster id.

    A node keeps the ports of an earlier start on its folder, else gets free ones (the first
    node's PLAINTEXT port is ``first_port`` when given). Formatted log dirs stay as they are.
    """
    secured = nodes[0].launch.sasl is not None
    fresh = iter(free_ports((2 + 2 * proxied + secured) * len(nodes)))
    for node in nodes:
        broker, controller = next(fresh), next(fresh)
        if node.node_id == 1 and first_port is not None:
            broker = first_port
        extra_listener = (next(fresh), next(fresh)) if proxied else None
        sasl = next(fresh) if secured else None
        node.ports = node.previous_ports() or NodePorts(broker, controller, extra_listener, sasl)
        if secured and node.ports.sasl is None:  # a data dir first started without SASL
            node.ports = replace(node.ports, sasl=sasl)
    config = cluster_config({n.node_id: n.ports.controller for n in nodes if n.ports})
    for node in nodes:
        node.write_config(config, extra)
    unformatted = [node for node in nodes if not node.formatted]
    if unformatted:
        # Every node of a cluster carries the same id; a kept data dir already has one.
        known = next((node.cluster_id for node in nodes if node.cluster_id is not None), None)
        shared = known or cluster_id()
        tools = [node.start_format(shared, standalone=len(nodes) == 1) for node in unformatted]
        for node, tool in zip(unformatted, tools, strict=True):
            node.check_format(tool)


def cleanup(nodes: list[KafkaNode], timeout_s: float, data_dir: Path | None) -> None:
    """The finalizer of a cluster that was never stopped: stop its nodes, drop a temp dir."""
    stop_nodes(nodes, timeout_s)
    if data_dir is not None:
        shutil.rmtree(data_dir, ignore_errors=True)
