"""A real Schema Registry for the deserializer tests: Apicurio Registry's Confluent API.

Apicurio Registry (Apache-2.0; a Java service published on Maven Central) serves the Confluent
Schema Registry REST API under ``/apis/ccompat/v7``, the API confluent-kafka's
``SchemaRegistryClient`` speaks. Confluent's own registry is not on Maven Central, and
Karapace is not on PyPI, so neither can be installed here.

Its runnable ``all`` archive (about 110 MB) is fetched with Maven once and unpacked into
``~/.cache/client-balance/apicurio-registry-<version>/app``, as the broker's jars are: into a
private folder renamed into place under a file lock. It runs as ``java -jar`` on 127.0.0.1 at a
free port, and keeps its schemas in the session broker (``kafkasql`` storage: topics of its
own), so a registry stopped and started again on the same port knows every id it gave out.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import tarfile
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from client_balance._kafka import wait_until
from client_balance.broker._jars import find_java

APICURIO_VERSION = "3.0.9"
"""The Apicurio Registry release the tests run: the newest whose archive Maven Central serves
that runs on Java 17 (3.3.x needs Java 21)."""

CCOMPAT_PATH = "/apis/ccompat/v7"
_ARCHIVE = "io.apicurio:apicurio-registry-app:{version}:tar.gz:all"
_MAVEN_TIMEOUT_S = 900
_START_TIMEOUT_S = 180.0
_STOP_TIMEOUT_S = 30.0
_LOG_TAIL_LINES = 40


class RegistryUnavailableError(RuntimeError):
    """The registry could not be fetched or started; the message says why."""


def registry_home(version: str = APICURIO_VERSION) -> Path:
    """Folder holding the unpacked registry ``app/`` of ``version``."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "client-balance" / f"apicurio-registry-{version}"


def runner_jar(app: Path) -> Path | None:
    """The jar ``java -jar`` starts (Quarkus' legacy layout: ``*-runner.jar`` beside ``lib/``)."""
    return next(iter(sorted(app.glob("*-runner.jar"))), None) if app.is_dir() else None


def ensure_registry_app(version: str = APICURIO_VERSION) -> Path:
    """The runner jar of ``version``, fetched with Maven and unpacked the first time."""
    home = registry_home(version)
    jar = runner_jar(home / "app")
    if jar is not None:
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RegistryUnavailableError("'mvn' (Apache Maven) is not on PATH: cannot fetch it")
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        jar = runner_jar(home / "app")
        if jar is not None:  # another session fetched it meanwhile
            return jar
        partial = home / f"app.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        try:
            with tarfile.open(_fetch_archive(mvn, version, home)) as archive:
                archive.extractall(partial, filter="data")
        except (OSError, tarfile.TarError) as error:
            shutil.rmtree(partial, ignore_errors=True)
            raise RegistryUnavailableError(f"its archive did not unpack: {error}") from error
        if runner_jar(partial) is None:
            shutil.rmtree(partial, ignore_errors=True)
            raise RegistryUnavailableError(f"no *-runner.jar in the archive of {version}")
        partial.rename(home / "app")
    jar = runner_jar(home / "app")
    assert jar is not None  # just renamed into place
    return jar


def _fetch_archive(mvn: str, version: str, home: Path) -> Path:
    """The archive in the local Maven repository, downloaded there if it is not yet.

    ``dependency:get`` without transitive resolution: the archive's parent pom is not on Maven
    Central for every release, and nothing but the archive itself is needed.
    """
    artifact = _ARCHIVE.format(version=version)
    answer = home / f"repository-{os.getpid()}.txt"
    for goal in (
        ["dependency:get", f"-Dartifact={artifact}", "-Dtransitive=false"],
        ["help:evaluate", "-Dexpression=settings.localRepository", f"-Doutput={answer}"],
    ):
        _maven(mvn, goal, version)
    try:
        repository = Path(answer.read_text().strip())
    finally:
        answer.unlink(missing_ok=True)
    name = f"apicurio-registry-app-{version}-all.tar.gz"
    archive = repository / "io" / "apicurio" / "apicurio-registry-app" / version / name
    if not archive.is_file():
        raise RegistryUnavailableError(f"Maven reported success, but {archive} is missing")
    return archive


def _maven(mvn: str, goal: list[str], version: str) -> None:
    try:
        done = subprocess.run(
            [mvn, "-B", "-q", *goal], capture_output=True, text=True,
            timeout=_MAVEN_TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise RegistryUnavailableError(
            f"Maven did not finish {goal[0]} for Apicurio Registry {version} within "
            f"{_MAVEN_TIMEOUT_S} s"
        ) from None
    if done.returncode != 0:
        raise RegistryUnavailableError(
            f"Maven could not {goal[0]} Apicurio Registry {version} (exit {done.returncode}):\n"
            + _tail(done.stdout + done.stderr)
        )


class LocalSchemaRegistry:
    """One Apicurio Registry process on 127.0.0.1, storing its schemas in a Kafka topic."""

    def __init__(self, bootstrap_servers: str, log_dir: Path) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._log = log_dir / "schema-registry.log"
        self._port = _free_port()
        # A journal of its own: registries of other sessions on the same broker stay apart.
        self._journal = f"schema-registry-journal-{uuid.uuid4().hex[:12]}"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def topics(self) -> list[str]:
        """The Kafka topics it keeps its state in (its journal, snapshots and events)."""
        return [self._journal, f"{self._journal}-snapshots", f"{self._journal}-events"]

    @property
    def url(self) -> str:
        """What ``schema_registry_url`` and ``SchemaRegistryClient`` are given."""
        return f"http://127.0.0.1:{self._port}{CCOMPAT_PATH}"

    def start(self) -> LocalSchemaRegistry:
        """Start it (on the same port as before, if it ran already) and wait until it answers."""
        jar = ensure_registry_app()
        java = find_java()
        properties = {
            "quarkus.http.host": "127.0.0.1",
            "quarkus.http.port": str(self._port),
            "apicurio.storage.kind": "kafkasql",
            "apicurio.kafkasql.bootstrap.servers": self._bootstrap_servers,
            "apicurio.kafkasql.topic": self.topics[0],
            "apicurio.kafkasql.snapshots.topic": self.topics[1],
            "apicurio.events.kafka.topic": self.topics[2],
            "apicurio.storage.snapshot.location": str(self._log.parent),
        }
        command = [
            java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            *(f"-D{name}={value}" for name, value in properties.items()),
            "-jar", str(jar),
        ]  # fmt: skip
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(
                command,
                cwd=jar.parent,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        process = self._process

        def answers() -> bool:
            if process.poll() is not None:
                raise RegistryUnavailableError(
                    f"it exited with {process.returncode}:\n{self.log_tail()}"
                )
            return self.answers()

        if not wait_until(answers, timeout_s=_START_TIMEOUT_S, interval_s=0.2):
            self.stop()
            raise RegistryUnavailableError(
                f"it did not answer within {_START_TIMEOUT_S} s:\n{self.log_tail()}"
            )
        return self

    def answers(self) -> bool:
        """Whether it is ready: its storage has read its journal, and its Confluent API answers.

        (Its HTTP port opens before the journal is read: schemas it knew would be missing.)
        """
        root = f"http://127.0.0.1:{self._port}"
        return all(_ok(address) for address in (f"{root}/health/ready", f"{self.url}/subjects"))

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not gone within the stop timeout."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def log_tail(self) -> str:
        """The last lines of its log."""
        with contextlib.suppress(OSError):
            return _tail(self._log.read_text(errors="replace"))
        return "(no log)"


def _ok(address: str) -> bool:
    try:
        with urllib.request.urlopen(address, timeout=2) as response:  # noqa: S310 - http on 127.0.0.1
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):  # refused while starting; 503 until ready
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tail(text: str) -> str:
    return "\n".join(text.strip().splitlines()[-_LOG_TAIL_LINES:])
