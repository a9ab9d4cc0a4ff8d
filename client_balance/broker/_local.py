"""``LocalKafka``: one Apache Kafka 4.x node (KRaft broker + controller) on 127.0.0.1.

It formats a fresh log dir with ``kafka.tools.StorageTool format --standalone``, starts
``kafka.Kafka`` from the cached Maven jars with a small heap, and polls until the broker answers
metadata and the group coordinator serves offsets (never a fixed sleep). ``stop()`` asks for a
graceful shutdown (SIGTERM) and kills the JVM when it does not exit in time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from client_balance import admin
from client_balance._kafka import retry_immediately
from client_balance._timing import Deadline
from client_balance.broker._jars import DEFAULT_KAFKA_VERSION, ensure_kafka_jars, find_java
from client_balance.broker._process import (
    cds_archive_path,
    cleanup,
    cluster_id,
    free_port,
    read_ports,
    stop_pid,
    tail,
    tail_text,
    terminate,
)
from client_balance.errors import BrokerStartError, ClientBalanceError

__all__ = ["LocalKafka", "stop_pid"]

_LOG_NAME = "broker.log"
_PROPERTIES_NAME = "server.properties"
_CDS_DUMP_NAME = "classes.jsa"
_BIND_FAILURE = "Address already in use"
_START_ATTEMPTS = 3  # a free port can be taken by someone else before the JVM binds it

# One node: every replication factor 1, tiny internal topics, few threads for 2 cores.
# group.initial.rebalance.delay.ms keeps Kafka's default on purpose: benchmarks compare
# against a real subscribe() group join.
_BASE_CONFIG = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "inter.broker.listener.name": "PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "auto.create.topics.enable": "false",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "log.retention.check.interval.ms": "300000",
}


class LocalKafka:
    """A local single-node Apache Kafka 4.x cluster, for tests, benchmarks, demos and users.

    >>> with LocalKafka() as kafka:                                 # doctest: +SKIP
    ...     print(kafka.bootstrap_servers)
    127.0.0.1:40123

    ``data_dir=None`` uses a fresh temporary folder that ``stop()`` deletes; a given ``data_dir``
    is kept, and a second start on it reuses its data, cluster id and ports. ``config`` adds or
    overrides broker properties. ``port=None`` picks a free port.

    With ``die_with_parent`` (the default) the JVM gets SIGTERM when the thread that started it
    ends, even if this process is killed outright, so a crashed test run leaves no broker behind
    (Linux ``setpriv --pdeathsig``; skipped where setpriv is missing). Start it from a
    long-lived thread, or pass False for a broker meant to outlive its starter.
    """

    def __init__(
        self,
        *,
        version: str = DEFAULT_KAFKA_VERSION,
        data_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        heap_mb: int = 512,
        config: Mapping[str, str] | None = None,
        startup_timeout_s: float = 90.0,
        stop_timeout_s: float = 20.0,
        die_with_parent: bool = True,
        class_data_sharing: bool = True,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.version = version
        self.die_with_parent = die_with_parent
        self.class_data_sharing = class_data_sharing
        self._cds_archive: Path | None = None
        self.heap_mb = heap_mb
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._requested_port = port
        self._extra_config = dict(config or {})
        self._progress = progress
        self._owns_data_dir = data_dir is None
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[..., LocalKafka] | None = None
        self._port: int | None = None
        self.startup_s: float | None = None
        """Seconds from ``start()`` to a broker that serves metadata and offsets."""

    # -- properties -------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:<port>"`` of the running broker."""
        if self._port is None or not self.is_running():
            raise ClientBalanceError("LocalKafka is not running; call start() first")
        return f"127.0.0.1:{self._port}"

    @property
    def data_dir(self) -> Path:
        """Folder with the broker's config, log (``broker.log``) and data."""
        if self._data_dir is None:
            raise ClientBalanceError("LocalKafka has no data dir before start()")
        return self._data_dir

    @property
    def log_path(self) -> Path:
        """The broker's stdout/stderr log."""
        return self.data_dir / _LOG_NAME

    @property
    def pid(self) -> int | None:
        """Process id of the broker's JVM while it runs."""
        return self._process.pid if self._process is not None else None

    def is_running(self) -> bool:
        """True while the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Fetch jars if needed, format, start the JVM and wait until the broker is ready."""
        if self.is_running():
            return self
        began = time.monotonic()
        java = find_java()
        libs = ensure_kafka_jars(self.version, progress=self._progress)
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="client-balance-kafka-"))
        self._data_dir.mkdir(parents=True, exist_ok=True)
        data_dir = self._data_dir

        def port_was_taken(error: BaseException) -> bool:
            # Someone took a port between our probe and the JVM's bind: start afresh.
            taken = (
                isinstance(error, BrokerStartError)
                and _BIND_FAILURE in error.log_tail
                and self._requested_port is None
                and self._owns_data_dir
            )
            if taken:
                shutil.rmtree(data_dir, ignore_errors=True)
                data_dir.mkdir(parents=True)
            return taken

        retry_immediately(
            lambda: self._start_once(java, libs, began),
            attempts=_START_ATTEMPTS,
            retry_if=port_was_taken,
        )
        self.startup_s = time.monotonic() - began
        return self

    def _start_once(self, java: str, libs: Path, began: float) -> None:
        data_dir = self.data_dir
        properties = data_dir / _PROPERTIES_NAME
        logs = data_dir / "kraft-logs"
        formatted = (logs / "meta.properties").is_file()
        previous = read_ports(properties) if formatted and properties.is_file() else None
        if previous is not None:
            port, controller_port = previous
        else:
            port = self._requested_port or free_port()
            controller_port = free_port()
        self._write_properties(properties, logs, port, controller_port)
        log4j = data_dir / "log4j2.properties"
        log4j.write_text(
            resources.files("client_balance.broker").joinpath("log4j2.properties").read_text()
        )
        jvm = [
            java, f"-Dlog4j2.configurationFile={log4j}", f"-Dkafka.logs.dir={data_dir}",
            "-Djava.awt.headless=true", "-cp", f"{libs}/*",
        ]  # fmt: skip
        if not formatted:
            self._format(jvm, properties)
        with self.log_path.open("ab") as log:
            self._process = self._spawn(jvm, libs, properties, log)
        self._port = port
        owned = data_dir if self._owns_data_dir else None
        self._finalizer = weakref.finalize(self, cleanup, self._process, self.stop_timeout_s, owned)
        self._wait_until_ready(began)

    def _write_properties(
        self, properties: Path, logs: Path, port: int, controller_port: int
    ) -> None:
        values = {
            **_BASE_CONFIG,
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": (
                f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"
            ),
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
            "log.dirs": str(logs),
            **self._extra_config,
        }
        properties.write_text("".join(f"{key}={value}\n" for key, value in values.items()))

    def _format(self, jvm: list[str], properties: Path) -> None:
        # A short-lived tool: the client compiler and serial GC start it faster.
        command = [
            jvm[0], "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", *jvm[1:],
            "kafka.tools.StorageTool", "format", "--standalone",
            "-t", cluster_id(), "-c", str(properties),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            output = tail_text(done.stdout + done.stderr)
            raise BrokerStartError(
                f"Apache Kafka {self.version} did not start: formatting the log dir with "
                f"kafka.tools.StorageTool failed (exit {done.returncode}). Last lines of its "
                f"output:\n{output}",
                log_tail=output,
            )

    def _spawn(
        self, jvm: list[str], libs: Path, properties: Path, log: IO[bytes]
    ) -> subprocess.Popen[bytes]:
        command = [
            jvm[0], f"-Xms{self.heap_mb}m", f"-Xmx{self.heap_mb}m", "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20", *self._cds_flags(jvm[0], libs, properties.parent), *jvm[1:],
            "kafka.Kafka", str(properties),
        ]  # fmt: skip
        setpriv = shutil.which("setpriv") if self.die_with_parent else None
        if setpriv is not None:
            # setpriv sets the parent-death signal and then execs java, so the pid is the JVM's.
            command = [setpriv, "--pdeathsig", "TERM", "--", *command]
        if self._progress is not None:
            self._progress(f"starting Apache Kafka {self.version} (log: {self.log_path})")
        # A session of its own, so a Ctrl-C meant for the caller reaches the broker only
        # through stop(), which shuts it down cleanly.
        return subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip

    def _cds_flags(self, java: str, libs: Path, data_dir: Path) -> list[str]:
        self._cds_archive = None
        if not self.class_data_sharing:
            return []
        archive = cds_archive_path(java, libs)
        if archive.is_file():
            return [f"-XX:SharedArchiveFile={archive}"]
        # No archive yet: this JVM writes one when it exits; stop() moves it into the cache.
        self._cds_archive = archive
        return [f"-XX:ArchiveClassesAtExit={data_dir / _CDS_DUMP_NAME}"]

    def _keep_cds_archive(self) -> None:
        archive, self._cds_archive = self._cds_archive, None
        dumped = self._data_dir / _CDS_DUMP_NAME if self._data_dir is not None else None
        if archive is not None and dumped is not None and dumped.is_file():
            # The data dir may be on another filesystem: copy next to the archive, then rename.
            partial = archive.with_suffix(f".partial-{os.getpid()}")
            archive.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(dumped, partial)
            partial.replace(archive)

    def _wait_until_ready(self, began: float) -> None:
        assert self._process is not None  # noqa: S101 - set by the caller just before
        deadline = Deadline(self.startup_timeout_s - (time.monotonic() - began))
        bootstrap = f"127.0.0.1:{self._port}"
        process = self._process
        answered = admin.cluster_answers(
            bootstrap,
            timeout_s=deadline.left_s(),
            keep_waiting=lambda: process.poll() is None,
        )
        if process.poll() is not None:
            raise self._failed(f"the broker exited with code {process.returncode}")
        if not answered:
            self._kill()
            raise self._failed(
                f"the broker did not answer metadata on {bootstrap} within "
                f"{self.startup_timeout_s:.0f} s"
            )
        try:
            admin.wait_for_group_coordinator(bootstrap, timeout_s=max(deadline.left_s(), 5.0))
        except ClientBalanceError as error:
            self._kill()
            raise self._failed(f"the group coordinator did not come up: {error}") from None

    def _failed(self, what: str) -> BrokerStartError:
        last_lines = tail(self.log_path)
        self._process = None
        return BrokerStartError(
            f"Apache Kafka {self.version} did not start: {what}. Last lines of "
            f"{self.log_path}:\n{last_lines}",
            log_tail=last_lines,
            log_path=str(self.log_path),
        )

    def _kill(self) -> None:
        if self._process is not None:
            terminate(self._process, timeout_s=5.0)

    def detach(self) -> int:
        """Leave the broker running after this object and this interpreter are gone.

        Returns its pid; stop it later with :func:`stop_pid`. The data dir is then kept.
        """
        if self._process is None or self._finalizer is None:
            raise ClientBalanceError("LocalKafka is not running; nothing to detach")
        self._finalizer.detach()
        self._owns_data_dir = False
        return self._process.pid

    def stop(self) -> None:
        """Shut the broker down (SIGTERM, then SIGKILL after ``stop_timeout_s``). Idempotent."""
        if self._process is not None:
            terminate(self._process, self.stop_timeout_s)
            self._process = None
            self._keep_cds_archive()
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._owns_data_dir and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None
        self._port = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"running at 127.0.0.1:{self._port}" if self.is_running() else "stopped"
        return f"<LocalKafka {self.version} {state}>"
