"""Fetch the official Apache Kafka jars from Maven Central once, and find Java.

The jars land in ``~/.cache/client-balance/kafka-<version>/libs`` (or ``$CLIENT_BALANCE_KAFKA_HOME
/libs``, which may also be the ``libs`` of an unpacked Kafka release). Maven writes into a
private folder that is renamed into place only when complete, under a file lock, so parallel
test sessions neither download twice nor see half a classpath.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from client_balance.errors import BrokerFetchError, BrokerToolMissingError

DEFAULT_KAFKA_VERSION = "4.3.1"
"""The Apache Kafka release the launcher fetches unless told otherwise."""

MIN_JAVA_MAJOR = 17
_MAVEN_TIMEOUT_S = 900
_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def kafka_home(version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """Folder holding ``libs/`` for ``version`` (``$CLIENT_BALANCE_KAFKA_HOME`` wins)."""
    configured = os.environ.get("CLIENT_BALANCE_KAFKA_HOME")
    if configured:
        return Path(configured).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "client-balance" / f"kafka-{version}"


def _has_broker_jar(libs: Path) -> bool:
    return libs.is_dir() and any(libs.glob("kafka_2.13-*.jar"))


def ensure_kafka_jars(
    version: str = DEFAULT_KAFKA_VERSION,
    *,
    home: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Return the ``libs`` folder of Kafka ``version``, fetching it with Maven the first time."""
    home = home or kafka_home(version)
    libs = home / "libs"
    if _has_broker_jar(libs):
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerToolMissingError(
            f"cannot fetch Apache Kafka {version}: 'mvn' (Apache Maven) is not on PATH. Install "
            "Maven (e.g. 'apt-get install maven'), or set CLIENT_BALANCE_KAFKA_HOME to a Kafka "
            "release folder that has libs/",
            tool="mvn",
        )
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _has_broker_jar(libs):  # another process fetched it while we waited
            return libs
        if progress is not None:
            progress(f"fetching Apache Kafka {version} jars from Maven Central into {libs}")
        build = home / f"build-{os.getpid()}"
        partial = home / f"libs.partial-{os.getpid()}"
        shutil.rmtree(build, ignore_errors=True)
        shutil.rmtree(partial, ignore_errors=True)
        build.mkdir()
        pom = resources.files("client_balance.broker").joinpath("pom.xml").read_text()
        (build / "pom.xml").write_text(pom)
        command = [
            mvn, "-B", "-q", "-f", str(build / "pom.xml"), "package",
            f"-Dkafka.version={version}", f"-Dlibs.dir={partial}",
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired as error:
            raise BrokerFetchError(
                f"Maven did not finish fetching Apache Kafka {version} within "
                f"{_MAVEN_TIMEOUT_S} s; check that Maven Central is reachable",
                output_tail=_tail(str(error.stdout or "")),
            ) from None
        finally:
            shutil.rmtree(build, ignore_errors=True)
        if done.returncode != 0 or not _has_broker_jar(partial):
            shutil.rmtree(partial, ignore_errors=True)
            tail = _tail(done.stdout + done.stderr)
            raise BrokerFetchError(
                f"Maven could not fetch Apache Kafka {version} (exit {done.returncode}); is the "
                f"version published and Maven Central reachable? Last output:\n{tail}",
                output_tail=tail,
            )
        partial.rename(libs)
    return libs


def find_java() -> str:
    """Path of a Java 17+ ``java``, from ``$JAVA_HOME`` or ``PATH``."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    java = str(candidate) if candidate and candidate.is_file() else shutil.which("java")
    if java is None:
        raise BrokerToolMissingError(
            "cannot start Apache Kafka: 'java' is not on PATH and JAVA_HOME is not set. Install "
            f"a Java {MIN_JAVA_MAJOR}+ runtime (e.g. 'apt-get install openjdk-17-jre-headless')",
            tool="java",
        )
    try:
        shown = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as error:  # not executable, or a binary of another architecture
        raise BrokerToolMissingError(
            f"cannot start Apache Kafka: {java} does not run ({error}); point JAVA_HOME at a "
            f"Java {MIN_JAVA_MAJOR}+ runtime",
            tool="java",
        ) from error
    match = _JAVA_VERSION.search(shown.stderr + shown.stdout)
    if match is not None:
        major = int(match.group(1))
        if major == 1 and match.group(2):  # "1.8.0_392" style
            major = int(match.group(2))
        if major < MIN_JAVA_MAJOR:
            raise BrokerToolMissingError(
                f"Apache Kafka 4 needs Java {MIN_JAVA_MAJOR}+, but {java} is Java {major}; "
                "install a newer JDK or point JAVA_HOME at one",
                tool="java",
            )
    return java


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
