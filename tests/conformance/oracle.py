"""Run Apache Kafka's own Java assignors on JSON cases, as the reference for ours.

:class:`JavaOracle` compiles ``AssignorOracle.java`` (next to this file) against the official
``kafka-clients`` jar once, caching the classes under
``ensure_kafka_jars().parent / "oracle-classes" / <hash of the source>``, and keeps one ``java``
process that answers case after case, so the JVM starts once per oracle, not once per case::

    with JavaOracle() as oracle:
        [answer] = oracle.assign([{
            "id": "c1", "strategy": "range", "topics": {"t0": 3},
            "members": [{"id": "C0", "topics": ["t0"]}, {"id": "C1", "topics": ["t0"]}],
        }])
    answer == {"id": "c1", "assignment": {"C0": [["t0", 0], ["t0", 1]], "C1": [["t0", 2]]}}

A case the Java side rejects comes back as ``{"id": ..., "error": "<class>: <message>"}``; the
process carries on with the next case. ``JavaOracle(repeat=N)`` times each case N times after a
warm-up and adds ``"nanos"`` (the median time of ``assign()``) and ``"stable"`` to each answer.
The case format is described at the top of ``AssignorOracle.java``.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from client_balance.broker import ensure_kafka_jars

JAVA_SOURCE = Path(__file__).with_name("AssignorOracle.java")
"""The oracle's Java source; its hash names the folder of compiled classes."""

MAIN_CLASS = "AssignorOracle"

_JAR_PREFIXES = (
    "kafka-clients-",
    "jackson-databind-",
    "jackson-core-",
    "jackson-annotations-",
    "slf4j-api-",
)
_JAVAC_TIMEOUT_S = 300
_STDERR_LINES = 200


class OracleError(RuntimeError):
    """The Java oracle could not be built, died, or answered out of turn."""


def _find_jdk_tool(name: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / name
        if candidate.is_file():
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise OracleError(
            f"the Java assignor oracle needs '{name}' from a JDK 17+, but it is not on PATH and "
            "JAVA_HOME/bin has none; install a JDK (e.g. 'apt-get install openjdk-17-jdk-headless')"
        )
    return found


def oracle_classpath(libs: Path) -> list[Path]:
    """The jars the oracle compiles and runs against: kafka-clients, Jackson and the slf4j API.

    The broker's logging jars are left out on purpose: without a binding slf4j logs nothing, so
    the assignors run as quietly and as fast as they can.
    """
    jars: list[Path] = []
    for prefix in _JAR_PREFIXES:
        matches = sorted(
            jar for jar in libs.glob(f"{prefix}*.jar") if jar.name[len(prefix)].isdigit()
        )
        if not matches:
            raise OracleError(f"no {prefix}*.jar in {libs}; the Kafka jar cache is incomplete")
        jars.append(matches[-1])
    return jars


def compile_oracle(libs: Path | None = None) -> Path:
    """Folder with the compiled oracle classes, compiling only if the source changed.

    javac writes into a private folder that is renamed into place when complete, so parallel
    sessions never see half a compilation.
    """
    libs = libs if libs is not None else ensure_kafka_jars()
    jars = oracle_classpath(libs)
    digest = hashlib.sha256(JAVA_SOURCE.read_bytes())
    for jar in jars:
        digest.update(jar.name.encode())
    cache = libs.parent / "oracle-classes"
    target = cache / digest.hexdigest()[:20]
    if (target / f"{MAIN_CLASS}.class").is_file():
        return target
    javac = _find_jdk_tool("javac")
    cache.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".build-", dir=cache))
    try:
        command = [
            javac, "-nowarn", "-encoding", "UTF-8", "-d", str(build),
            "-cp", os.pathsep.join(map(str, jars)), str(JAVA_SOURCE),
        ]  # fmt: skip
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_JAVAC_TIMEOUT_S, check=False
        )
        if done.returncode != 0:
            raise OracleError(
                f"javac failed (exit {done.returncode}) on {JAVA_SOURCE}:\n"
                f"{done.stdout}{done.stderr}".rstrip()
            )
        try:
            build.rename(target)
        except OSError:
            if not (target / f"{MAIN_CLASS}.class").is_file():
                raise  # not a parallel session that finished first: a real failure
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return target


class JavaOracle:
    """One long-lived JVM that runs Kafka's Java assignors on cases (see the module docstring).

    ``repeat`` > 0 times every case that many times after ``warmup`` untimed runs (default: as
    many as ``repeat``); ``timeout`` bounds one :meth:`assign` call, after which the JVM is killed.
    ``java_options`` go to ``java`` before the class path, e.g. ``["-Xmx4g"]`` for a heap that
    holds a million partitions.
    """

    def __init__(
        self,
        *,
        repeat: int = 0,
        warmup: int | None = None,
        libs: Path | None = None,
        timeout: float = 600.0,
        java_options: Sequence[str] = (),
    ) -> None:
        libs = libs if libs is not None else ensure_kafka_jars()
        classes = compile_oracle(libs)
        java = _find_jdk_tool("java")
        classpath = os.pathsep.join([str(classes), *map(str, oracle_classpath(libs))])
        command = [java, *java_options, "-cp", classpath, MAIN_CLASS]
        if repeat > 0:
            command += ["--repeat", str(repeat)]
            if warmup is not None:
                command += ["--warmup", str(warmup)]
        self._timeout = timeout
        self._lock = threading.Lock()
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self._stderr_reader = threading.Thread(
            target=self._drain, args=(self._process.stderr,), daemon=True, name="oracle-stderr"
        )
        self._stderr_reader.start()

    def _drain(self, stream: IO[str] | None) -> None:
        if stream is None:
            return
        for line in stream:
            self._stderr.append(line.rstrip("\n"))

    def _stderr_tail(self) -> str:
        return "\n".join(self._stderr) or "(nothing on stderr)"

    def assign(self, cases: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Kafka's answers to ``cases``, in order: ``assignment`` or ``error`` for each."""
        lines = [json.dumps(case, separators=(",", ":")) + "\n" for case in cases]
        with self._lock:
            process = self._process
            if process.poll() is not None or process.stdin is None or process.stdout is None:
                raise OracleError(
                    f"the Java oracle is not running (exit {process.returncode}):\n"
                    f"{self._stderr_tail()}"
                )
            stdin, stdout = process.stdin, process.stdout

            def write() -> None:
                try:
                    stdin.writelines(lines)
                    stdin.flush()
                except (OSError, ValueError):  # the JVM died; the reader reports how
                    return

            timed_out = threading.Event()

            def expire() -> None:
                timed_out.set()
                process.kill()

            writer = threading.Thread(target=write, daemon=True, name="oracle-stdin")
            watchdog = threading.Timer(self._timeout, expire)
            watchdog.daemon = True
            writer.start()
            watchdog.start()
            try:
                answers = [self._read_answer(stdout, case, timed_out) for case in cases]
            finally:
                watchdog.cancel()
                writer.join()
            return answers

    def _read_answer(
        self, stdout: IO[str], case: Mapping[str, Any], timed_out: threading.Event
    ) -> dict[str, Any]:
        line = stdout.readline()
        if not line:
            self._process.wait()
            reason = (
                f"timed out after {self._timeout:g} s"
                if timed_out.is_set()
                else f"exited with {self._process.returncode}"
            )
            raise OracleError(
                f"the Java oracle {reason} before answering case {case.get('id')!r}:\n"
                f"{self._stderr_tail()}"
            )
        answer: dict[str, Any] = json.loads(line)
        if "id" in case and answer.get("id") != case["id"]:
            raise OracleError(f"the Java oracle answered {answer!r} to case {case['id']!r}")
        return answer

    def assign_one(self, case: Mapping[str, Any]) -> dict[str, Any]:
        """Kafka's answer to one case."""
        [answer] = self.assign([case])
        return answer

    def close(self) -> None:
        """Stop the JVM (it ends by itself when its input closes); idempotent."""
        process = self._process
        if process.stdin is not None and not process.stdin.closed:
            with contextlib.suppress(OSError):  # a JVM that already died broke the pipe
                process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self._stderr_reader.join(timeout=5)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
