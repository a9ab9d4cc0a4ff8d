"""Worker processes of usecase_worker.py: spawn, watch and read them for the use-case tests."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.integration.usecase_worker import read_held, read_hooks, read_lines
from tests.integration.workers import REPO, wait_until

_groups = itertools.count(1)

Line = tuple[str, int, int]


@dataclass
class UseCaseWorker:
    """A started worker process and its files."""

    name: str
    out: Path
    log: Path
    process: subprocess.Popen[bytes]

    def lines(self) -> list[Line]:
        """``(topic, partition, offset)`` of what it consumed so far."""
        return read_lines(self.out)

    def held(self) -> set[str]:
        """``"topic:partition"`` of what it holds now."""
        return read_held(self.out)

    def hooks(self) -> list[tuple[str, dict[str, int]]]:
        """The hook calls it logged."""
        return read_hooks(self.out)

    def log_tail(self) -> str:
        """The end of its stdout/stderr."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def alive_or_fail(self) -> None:
        """Fail the test with the worker's log if it exited with an error."""
        if self.process.poll() not in (None, 0):
            pytest.fail(f"worker {self.name} exited with {self.process.returncode}:\n"
                        f"{self.log_tail()}")  # fmt: skip


@dataclass
class UseCaseGroup:
    """Workers of one group on some topics; every worker it started is killed at teardown."""

    bootstrap: str
    topics: list[str]
    folder: Path
    group: str = field(default_factory=lambda: f"cb-usecase-{os.getpid()}-{next(_groups)}")
    started: list[UseCaseWorker] = field(default_factory=list)
    killed: list[UseCaseWorker] = field(default_factory=list)

    def spawn(self, name: str, source_count: int, node_id: int, *options: str) -> UseCaseWorker:
        """Start a worker; its files are ``<name>.*`` in ``folder``."""
        out, log = self.folder / f"{name}.out", self.folder / f"{name}.log"
        command = [
            sys.executable, "-m", "tests.integration.usecase_worker",
            "--bootstrap", self.bootstrap, "--group", self.group,
            "--topics", ",".join(self.topics), "--source-count", str(source_count),
            "--node-id", str(node_id), "--out", str(out), *options,
        ]  # fmt: skip
        with log.open("wb") as sink:
            process = subprocess.Popen(
                command, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        worker = UseCaseWorker(name, out, log, process)
        self.started.append(worker)
        return worker

    def wait_for(self, condition: object, timeout_s: float, what: str) -> None:
        """Wait for ``condition()``; fail at once if a worker dies meanwhile."""

        def check() -> bool:
            for worker in self.started:
                if worker not in self.killed:
                    worker.alive_or_fail()
            return bool(condition())  # type: ignore[operator]

        wait_until(check, timeout_s, what)

    def consumed(self) -> Counter[Line]:
        """How often each ``(topic, partition, offset)`` was consumed, over every worker."""
        return Counter(line for worker in self.started for line in worker.lines())

    def stop(self, workers: list[UseCaseWorker], timeout_s: float = 30.0) -> None:
        """SIGTERM and wait for exit 0 (the consumer shuts down, committing)."""
        for worker in workers:
            worker.process.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                pytest.fail(f"worker {worker.name} did not exit:\n{worker.log_tail()}")
            assert worker.process.returncode == 0, worker.log_tail()

    def kill(self, worker: UseCaseWorker) -> None:
        """SIGKILL ``worker`` (a crash: nothing released, nothing committed) and reap it."""
        self.killed.append(worker)
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait()

    def kill_leftovers(self) -> None:
        """SIGKILL every worker still running."""
        for worker in self.started:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()
