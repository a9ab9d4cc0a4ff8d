"""The demo's worker processes: ``examples/worker.py``, each with its report and its log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WORKER = Path(__file__).with_name("worker.py")
STOP_TIMEOUT_S = 60.0


@dataclass
class Worker:
    """One worker process, the name the demo shows for it, its report and its log."""

    name: str
    process: subprocess.Popen[bytes]
    report_path: Path
    log: Path
    killed: bool = False

    @property
    def pid(self) -> int:
        """The process id, which its member report carries."""
        return self.process.pid

    def report(self) -> dict[str, Any]:
        """Its last report; an empty one if it wrote none."""
        if not self.report_path.exists():
            return {"node_id": -1, "partitions": {}}
        report: dict[str, Any] = json.loads(self.report_path.read_text())
        return report

    def kill(self) -> None:
        """SIGKILL: a crash; nothing is released, confirmed or committed any more."""
        self.killed = True
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def log_tail(self, lines: int = 20) -> list[str]:
        """The last lines it wrote."""
        return self.log.read_text(errors="replace").strip().splitlines()[-lines:]


def start_worker(
    name: str, workdir: Path, arguments: Sequence[str], env: Mapping[str, str]
) -> Worker:
    """Start ``examples/worker.py arguments``; its stdout and stderr go to ``<name>.log``."""
    stem = name.replace(" ", "-").replace("(", "").replace(")", "")
    report, log = workdir / f"{stem}.json", workdir / f"{stem}.log"
    command = [sys.executable, str(WORKER), *arguments, "--summary-every", "0.5",
               "--report", str(report)]  # fmt: skip
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, env={**os.environ, **env}, stdout=output, stderr=subprocess.STDOUT
        )
    return Worker(name, process, report, log)


def stop_workers(workers: Sequence[Worker]) -> list[str]:
    """SIGTERM the running ones (each confirms its batch, commits, releases); what went wrong."""
    for worker in workers:
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGTERM)
    problems = []
    for worker in workers:
        try:
            code = worker.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            code = worker.process.wait()
        if code and not worker.killed:
            problems.append(f"{worker.name} exited with {code}")
            problems += [f"  {line}" for line in worker.log_tail()]
    return problems
