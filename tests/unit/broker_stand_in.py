"""A stand-in for LocalKafka whose "broker" is a sleeping process, for the CLI's state-file logic.

The process's command line reads ``... kafka.Kafka <data_dir>/server.properties`` as a real
broker's does, so ``broker status`` and ``broker stop`` treat it as one; no JVM is started.
Run as a module it is ``client-balance`` with the stand-in in place (for tests that kill it):
``STAND_IN_READY_S`` is how long its start waits after the spawn.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from client_balance.broker._datadir import create_data_dir
from client_balance.cli import _broker as cli_broker
from client_balance.cli import main

PID_FILE = "stand-in.pid"
"""Written in the data dir once the "broker" runs (after ``on_spawned``), for the tests."""

_SLEEP_THEN_EXIT = "import sys, time; time.sleep(float(sys.argv[1])); sys.exit(3)"


def spawn_stand_in(properties: Path, lives_s: float = 60.0) -> subprocess.Popen[bytes]:
    """A process whose command line names ``kafka.Kafka properties``; it exits 3 after lives_s."""
    return subprocess.Popen(
        [sys.executable, "-c", _SLEEP_THEN_EXIT, str(lives_s), "kafka.Kafka", str(properties)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


class StandInKafka:
    """What the CLI uses of LocalKafka; the class attributes set how each start goes."""

    ready_s = 0.0
    lives_s = 60.0
    made: list[StandInKafka] = []  # noqa: RUF012 - shared on purpose: tests stop every one made

    def __init__(self, *, data_dir: Path | None = None, **_options: object) -> None:
        self._data_dir = data_dir
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_s = 0.0
        StandInKafka.made.append(self)

    @property
    def data_dir(self) -> Path:
        """The data dir the CLI gave."""
        assert self._data_dir is not None
        return self._data_dir

    @property
    def log_path(self) -> Path:
        """Where a real broker's log would be; the stand-in writes one line there."""
        return self.data_dir / "broker.log"

    @property
    def bootstrap_servers(self) -> str:
        """An address nothing answers at."""
        return "127.0.0.1:1"

    def start(self, *, on_spawned: Callable[[dict[int, int]], None] | None = None) -> StandInKafka:
        """Spawn the "broker", tell ``on_spawned``, then take ``ready_s`` to be ready."""
        self._data_dir = create_data_dir(self.data_dir)
        self.log_path.write_text("the stand-in broker's log\n")
        self.process = spawn_stand_in(self.data_dir / "server.properties", self.lives_s)
        if on_spawned is not None:
            on_spawned(self.broker_pids())
        (self.data_dir / PID_FILE).write_text(str(self.process.pid))
        time.sleep(self.ready_s)  # a JVM that takes its time to answer
        return self

    def is_running(self) -> bool:
        """Whether the "broker" process runs."""
        return self.process is not None and self.process.poll() is None

    def broker_pids(self) -> dict[int, int]:
        """Node 1's pid, once spawned."""
        return {1: self.process.pid} if self.process is not None else {}

    def detach(self) -> int:
        """The pid; the process runs on in a session of its own."""
        assert self.process is not None
        return self.process.pid

    def stop(self) -> None:
        """Kill the "broker" and reap it."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()


if __name__ == "__main__":
    StandInKafka.ready_s = float(os.environ.get("STAND_IN_READY_S", "0"))
    cli_broker.LocalKafka = StandInKafka  # type: ignore[attr-defined,assignment]
    sys.exit(main(sys.argv[1:]))
