"""A real Schema Registry for the deserializer tests: Apicurio Registry's Confluent API.

Apicurio Registry (Apache-2.0; a Java service published on Maven Central) serves the Confluent
Schema Registry REST API under ``/apis/ccompat/v7``, the API confluent-kafka's
``SchemaRegistryClient`` speaks. Confluent's own registry is not on Maven Central, and
Karapace is not on PyPI, so neither can be installed here.

Its ``all`` archive is fetched with Maven once into ``~/.cache/client-balance/apicurio-registry-
<version>/app`` (as the broker's jars are: a private folder renamed into place under a file
lock), and it runs as ``java -jar quarkus-run.jar`` bound to 127.0.0.1 on a free port. It keeps
its schemas in the session broker (``kafkasql`` storage: a journal topic of its own), so a
registry stopped and started again on the same port still knows every schema id it gave out.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from client_balance._kafka import wait_until
from client_balance.broker._jars import find_java

APICURIO_VERSION = "3.3.3"
"""The Apicurio Registry release the tests fetch."""

CCOMPAT_PATH = "/apis/ccompat/v7"
_POM = Path(__file__).with_name("schema_registry_pom.xml")
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


def ensure_registry_app(version: str = APICURIO_VERSION) -> Path:
    """The folder holding ``quarkus-run.jar``, fetched with Maven the first time."""
    home = registry_home(version)
    app = home / "app"
    if (app / "quarkus-run.jar").is_file():
        return app
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RegistryUnavailableError("'mvn' (Apache Maven) is not on PATH: cannot fetch it")
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (app / "quarkus-run.jar").is_file():  # another session fetched it meanwhile
            return app
        build = home / f"build-{os.getpid()}"
        partial = home / f"app.partial-{os.getpid()}"
        for folder in (build, partial):
            shutil.rmtree(folder, ignore_errors=True)
        build.mkdir()
        shutil.copyfile(_POM, build / "pom.xml")
        command = [
            mvn, "-B", "-q", "-f", str(build / "pom.xml"), "package",
            f"-Dapicurio.version={version}", f"-Dapp.dir={partial}",
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT_S, check=False
            )
        finally:
            shutil.rmtree(build, ignore_errors=True)
        if done.returncode != 0 or not (partial / "quarkus-run.jar").is_file():
            shutil.rmtree(partial, ignore_errors=True)
            raise RegistryUnavailableError(
                f"Maven could not fetch Apicurio Registry {version} (exit {done.returncode}):\n"
                + _tail(done.stdout + done.stderr)
            )
        partial.rename(app)
    return app


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
    def url(self) -> str:
        """What ``schema_registry_url`` and ``SchemaRegistryClient`` are given."""
        return f"http://127.0.0.1:{self._port}{CCOMPAT_PATH}"

    def start(self) -> LocalSchemaRegistry:
        """Start it (on the same port as before, if it ran already) and wait until it answers."""
        app = ensure_registry_app()
        java = find_java()
        properties = {
            "quarkus.http.host": "127.0.0.1",
            "quarkus.http.port": str(self._port),
            "quarkus.http.non-application-root-path": "/q",
            "apicurio.storage.kind": "kafkasql",
            "apicurio.kafkasql.bootstrap.servers": self._bootstrap_servers,
            "apicurio.kafkasql.topic": self._journal,
            "apicurio.kafkasql.snapshots.topic": f"{self._journal}-snapshots",
            "apicurio.events.kafka.topic": f"{self._journal}-events",
            "apicurio.storage.snapshot.location": str(self._log.parent),
        }
        command = [
            java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            *(f"-D{name}={value}" for name, value in properties.items()),
            "-jar", str(app / "quarkus-run.jar"),
        ]  # fmt: skip
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(
                command, cwd=app, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
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
        """Whether its Confluent API lists subjects."""
        try:
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as response:  # noqa: S310 - http on 127.0.0.1
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tail(text: str) -> str:
    return "\n".join(text.strip().splitlines()[-_LOG_TAIL_LINES:])
