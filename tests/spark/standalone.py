"""A standalone Spark cluster for the tests: one master and two workers on 127.0.0.1.

The daemons are started with PySpark's own launcher, ``bin/spark-class`` with ``SPARK_HOME`` the
pyspark package: it is what ``sbin/start-master.sh`` and ``sbin/start-worker.sh`` run in a Spark
distribution, and pip's pyspark ships ``bin/`` but not those ``sbin`` scripts. The processes are
this module's children, started by pid and stopped by pid (``stop``).

Each worker offers 2 cores; an application takes ``spark.cores.max=2`` with
``spark.executor.cores=1``, which the master spreads over the workers: one executor (its own JVM,
with its own Python workers) on each worker, and room for a second application (the pipeline
example run as a script) beside the tests' session.

Every JVM of the cluster runs the C1 compiler only, with the serial collector
(``JVM_OPTIONS``): the tests' jobs are short, and on a machine of two cores the C2 compiler's
and the parallel collector's threads cost more than they save (the pipeline example ran in
25 s without them, 18 s with them). A driver started with ``SPARK_CONF_DIR=cluster.conf_dir``
(the pipeline's) takes them from its ``spark-defaults.conf``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

HOST = "127.0.0.1"
WORKERS = 2
WORKER_CORES = 2
"""Cores each worker offers: one for the tests' session, one for a second application."""
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0
_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"


class ClusterError(RuntimeError):
    """The cluster or a session on it did not come up; the message says why, with the logs."""


def spark_home() -> Path:
    """PySpark's folder: its ``bin/``, ``jars/`` and ``conf`` layout is a Spark home's."""
    import pyspark

    return Path(pyspark.__file__).parent


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 (all held open while they are picked)."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind((HOST, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((HOST, port)) == 0


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        return f"({path} unreadable: {error})"
    return "\n".join(text.strip().splitlines()[-lines:])


@dataclass
class Daemon:
    """A master or worker JVM this module started, and its log."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        """Whether it is still running."""
        return self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM (a worker then stops its executors), SIGKILL after ``STOP_TIMEOUT_S``."""
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        # The group is this daemon's own (start_new_session): executors it left behind go too.
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


@dataclass
class StandaloneCluster:
    """One master and its workers on 127.0.0.1."""

    root: Path
    master_url: str
    ui_url: str
    master: Daemon
    workers: list[Daemon] = field(default_factory=list)
    work_dirs: list[Path] = field(default_factory=list)
    startup_s: float = 0.0
    """From launching the master to every worker registered with it."""

    @property
    def conf_dir(self) -> Path:
        """``SPARK_CONF_DIR`` of the daemons: only ``spark-defaults.conf`` with ``JVM_OPTIONS``."""
        return self.root / "conf"

    @property
    def worker_pids(self) -> list[int]:
        """The workers' JVM pids: every executor of an application is a child of one."""
        return [worker.process.pid for worker in self.workers]

    def state(self) -> dict[str, Any]:
        """The master's JSON view: workers, active and completed applications."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as answer:  # noqa: S310 - our own http URL
            state: dict[str, Any] = json.load(answer)
        return state

    def alive_workers(self) -> int:
        """How many workers the master has registered (0 while it cannot answer)."""
        try:
            return int(self.state().get("aliveworkers", 0))
        except (OSError, ValueError):
            # ValueError: an HTML page. The master's UI answers ``/json/`` with its HTML page
            # for a moment after Jetty starts and before its JSON handler is attached (a fresh
            # ``make test`` failed every standalone test on that once).
            return 0

    def logs(self) -> str:
        """The last lines of every daemon's log and of every executor's stderr."""
        parts = [f"--- {d.name} ({d.log}):\n{_tail(d.log)}" for d in [self.master, *self.workers]]
        for work in self.work_dirs:
            for stderr in sorted(work.glob("*/*/stderr")):
                parts.append(f"--- executor {stderr}:\n{_tail(stderr)}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Workers first (with their executors), then the master."""
        for daemon in [*self.workers, self.master]:
            daemon.stop()


def _environment(home: Path, root: Path) -> dict[str, str]:
    conf = root / "conf"  # no spark-env.sh or spark-defaults.conf from elsewhere
    conf.mkdir(exist_ok=True)
    (conf / "spark-defaults.conf").write_text(
        f"spark.driver.extraJavaOptions {JVM_OPTIONS}\n"
        f"spark.executor.extraJavaOptions {JVM_OPTIONS}\n"
    )
    return {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": HOST,  # every server socket of the daemons and executors: this host
        "SPARK_MASTER_HOST": HOST,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_DAEMON_JAVA_OPTS": JVM_OPTIONS,
        "PYSPARK_PYTHON": sys.executable,
    }


def _launch(name: str, argv: list[str], env: dict[str, str], root: Path) -> Daemon:
    log = root / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(Path(env["SPARK_HOME"]) / "bin" / "spark-class"), *argv],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
            cwd=root, start_new_session=True,
        )  # fmt: skip
    return Daemon(name, process, log)


def _wait(
    cluster: StandaloneCluster, ready: Callable[[], bool], what: str, deadline: float
) -> None:
    while not ready():
        for daemon in [cluster.master, *cluster.workers]:
            if not daemon.alive():
                raise ClusterError(
                    f"the Spark {daemon.name} exited with code {daemon.process.returncode} "
                    f"before {what}\n{cluster.logs()}"
                )
        if time.monotonic() > deadline:
            raise ClusterError(f"not within {START_TIMEOUT_S:.0f} s: {what}\n{cluster.logs()}")
        time.sleep(0.1)


def start_cluster(root: Path) -> StandaloneCluster:
    """Start a master and ``WORKERS`` workers under ``root``; raise ClusterError if they fail."""
    began = time.monotonic()
    deadline = began + START_TIMEOUT_S
    home = spark_home()
    if not (home / "bin" / "spark-class").is_file():
        raise ClusterError(f"{home} has no bin/spark-class: PySpark's launcher is missing")
    env = _environment(home, root)
    port, ui_port, *worker_ports = free_ports(2 + 2 * WORKERS)
    master = _launch(
        "master", [_MASTER, "--host", HOST, "--port", str(port), "--webui-port", str(ui_port)],
        env, root,
    )  # fmt: skip
    cluster = StandaloneCluster(root, f"spark://{HOST}:{port}", f"http://{HOST}:{ui_port}", master)
    try:
        # A worker that finds no master tries again only 5 to 15 s later: wait for its port.
        _wait(cluster, lambda: _port_open(port), f"the master listens on {port}", deadline)
        for number in range(WORKERS):
            work = root / f"worker-{number + 1}"
            work.mkdir()
            argv = [
                _WORKER, "--host", HOST, "--port", str(worker_ports[2 * number]),
                "--webui-port", str(worker_ports[2 * number + 1]),
                "--cores", str(WORKER_CORES), "--memory", "2g", "--work-dir", str(work),
                cluster.master_url,
            ]  # fmt: skip
            cluster.workers.append(_launch(f"worker-{number + 1}", argv, env, root))
            cluster.work_dirs.append(work)
        _wait(
            cluster, lambda: cluster.alive_workers() == WORKERS,
            f"{WORKERS} workers registered with the master", deadline,
        )  # fmt: skip
    except BaseException:
        cluster.stop()
        raise
    cluster.startup_s = time.monotonic() - began
    return cluster


def session_on(cluster: StandaloneCluster, app: str) -> Any:
    """A SparkSession on ``cluster`` with one executor per worker, the source registered."""
    # The driver's Python workers and the executors' run this interpreter, where
    # client_balance is installed; the driver binds to this host only.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = HOST
    from pyspark.sql import SparkSession

    from client_balance.spark import register

    session = (
        SparkSession.builder.master(cluster.master_url).appName(app)
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", HOST).config("spark.driver.host", HOST)
        .config("spark.cores.max", str(WORKERS)).config("spark.executor.cores", "1")
        .config("spark.executor.memory", "512m").config("spark.sql.shuffle.partitions", "2")
        .config("spark.executor.extraJavaOptions", JVM_OPTIONS)
        .getOrCreate()
    )  # fmt: skip
    context = session.sparkContext
    if context.master != cluster.master_url:
        master = context.master
        session.stop()
        raise ClusterError(f"a SparkContext on {master} was still running; stop it first")
    tracker = context._jsc.sc().statusTracker()
    deadline = time.monotonic() + START_TIMEOUT_S
    # Until both executors have joined, tasks would crowd onto one, and the default
    # parallelism that register() reads would be Spark's minimum of 2, not the cluster's cores.
    while len(tracker.getExecutorInfos()) < WORKERS + 1:  # the driver is listed too
        if time.monotonic() > deadline:
            session.stop()
            raise ClusterError(
                f"{WORKERS} executors did not join {app} within {START_TIMEOUT_S:.0f} s\n"
                f"{cluster.logs()}"
            )
        time.sleep(0.1)
    register(session)
    return session


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """The session's standalone cluster, started on first use; fails (never skips) if it cannot."""
    try:
        cluster = start_cluster(tmp_path_factory.mktemp("spark-cluster"))
    except ClusterError as error:
        pytest.fail(f"the standalone Spark cluster did not start: {error}", pytrace=False)
    _STARTED.append(cluster)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def standalone_spark(standalone_cluster: StandaloneCluster) -> Iterator[Any]:
    """A SparkSession on the standalone cluster with both executors joined, source registered."""
    try:
        session = session_on(standalone_cluster, "client-balance-cluster-tests")
    except ClusterError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield session
    finally:
        session.stop()


_STARTED: list[StandaloneCluster] = []
"""The clusters this session started, for the terminal summary."""


def summary() -> str | None:
    """Where the cluster tests ran, and how long the cluster took to start."""
    if not _STARTED:
        return None
    cluster = _STARTED[0]
    return (
        f"Spark cluster tests ran on a standalone cluster at {cluster.master_url} "
        f"({WORKERS} workers), ready in {cluster.startup_s:.1f} s"
    )
