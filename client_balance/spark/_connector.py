"""Spark's own Kafka connector, to compare the ``client_balance`` source with ``format("kafka")``.

For the equivalence tests (``tests/spark/test_equivalence.py``) and the Spark bench
(``bench/spark.py``), not for reading: ``spark-sql-kafka-0-10_2.13`` and its runtime
dependencies (``spark-token-provider-kafka-0-10_2.13``, ``kafka-clients``, ``commons-pool2``...)
are fetched with Maven, from Maven Central only, once into
``~/.cache/client-balance/spark-kafka-<version>`` (``$XDG_CACHE_HOME`` if set). Maven writes
into a private folder renamed into place when complete, under a file lock, so parallel test
sessions and benches neither fetch twice nor see half a classpath. Imports no pyspark.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from client_balance.errors import ClientBalanceError, ConfigError

__all__ = ["DEFAULT_CONNECTOR_VERSION", "kafka_connector_jars"]

DEFAULT_CONNECTOR_VERSION = "4.2.0"
"""The newest ``spark-sql-kafka-0-10_2.13`` on Maven Central that runs on PySpark 4.3."""

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>bench</groupId><artifactId>spark-kafka</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>spark-sql-kafka-0-10_2.13</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""
# Spark's poms name a Google Cloud mirror of Maven Central first; send everything to Central.
_CENTRAL_ONLY = """<settings><mirrors><mirror>
  <id>central-only</id><mirrorOf>*</mirrorOf><url>https://repo.maven.apache.org/maven2</url>
</mirror></mirrors></settings>
"""
# Spark itself and what it already ships stay out of the extra classpath.
_SHIPPED = ("spark-core", "spark-sql_", "spark-catalyst", "scala-", "slf4j", "hadoop", "jackson")
_VERSION = re.compile(r"[0-9][0-9A-Za-z.\-]*")
_MAVEN_TIMEOUT_S = 900


def _folder(version: str) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "client-balance" / f"spark-kafka-{version}"


def _fetched(folder: Path) -> bool:
    return any(folder.glob("spark-sql-kafka-*.jar"))


def kafka_connector_jars(version: str = DEFAULT_CONNECTOR_VERSION) -> list[str]:
    """Spark's Kafka connector ``version`` and its runtime dependencies: jar paths, sorted.

    For comparing the ``client_balance`` source with Spark's own ``format("kafka")`` (the tests'
    equivalence checks and the Spark bench): give them to a session as ``spark.jars``. The jars
    Spark already ships (Spark itself, Scala, Hadoop, Jackson, SLF4J) are left out. Fetched with
    Maven from Maven Central the first time; raises :class:`ClientBalanceError` saying why if
    Maven is missing or cannot fetch them.
    """
    if not _VERSION.fullmatch(version):
        raise ConfigError(f"version={version!r} is not allowed; use a Maven version like 4.2.0")
    folder = _folder(version)
    if not _fetched(folder):
        folder.parent.mkdir(parents=True, exist_ok=True)
        with folder.with_name(folder.name + ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not _fetched(folder):  # or another process fetched it while we waited
                _fetch(version, folder)
    return sorted(str(jar) for jar in folder.glob("*.jar") if not jar.name.startswith(_SHIPPED))


def _fetch(version: str, folder: Path) -> None:
    """``mvn dependency:copy-dependencies`` into a private folder, renamed to ``folder``."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ClientBalanceError(
            f"cannot fetch Spark's Kafka connector {version}: 'mvn' (Apache Maven) is not on "
            "PATH; install Maven (e.g. 'apt-get install maven')"
        )
    build = Path(tempfile.mkdtemp(prefix="spark-kafka-pom-"))
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        (build / "pom.xml").write_text(_POM.format(version=version))
        (build / "settings.xml").write_text(_CENTRAL_ONLY)
        done = subprocess.run(
            [mvn, "-B", "-q", "-U", "-s", str(build / "settings.xml"), "-f", str(build / "pom.xml"),
             "dependency:copy-dependencies",
             "-DincludeScope=runtime", f"-DoutputDirectory={partial}"],
            capture_output=True, text=True, timeout=_MAVEN_TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        shutil.rmtree(partial, ignore_errors=True)
        raise ClientBalanceError(
            f"Maven did not fetch Spark's Kafka connector {version} within {_MAVEN_TIMEOUT_S} s; "
            "check that Maven Central (https://repo.maven.apache.org/maven2) is reachable"
        ) from None
    finally:
        shutil.rmtree(build, ignore_errors=True)
    if done.returncode != 0 or not _fetched(partial):
        shutil.rmtree(partial, ignore_errors=True)
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
        raise ClientBalanceError(
            f"Maven could not fetch Spark's Kafka connector {version} (exit {done.returncode}) "
            f"from Maven Central; is the version published and Central reachable?\n{tail}"
        )
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
