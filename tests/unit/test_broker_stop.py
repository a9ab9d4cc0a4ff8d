"""Stopping brokers: a JVM that needs a moment to die after SIGKILL is waited for, not raised."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, cast

from client_balance.broker._node import KafkaNode, stop_nodes

_EXITS_AFTER_KILL_S = 1.5  # what a killed 768 MB JVM took at load 25 in a `make bench` run


class _SlowToDie:
    """A process that ignores SIGTERM and is reaped 1.5 s after SIGKILL (judged by timeouts)."""

    args = ("java",)

    def __init__(self) -> None:
        self.killed = False
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, signal: int) -> None:
        return None  # still in its controlled shutdown

    def kill(self) -> None:
        self.killed = True

    def wait(self, timeout: float | None = None) -> int:
        if not self.killed or (timeout is not None and timeout < _EXITS_AFTER_KILL_S):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        self.returncode = -9
        return self.returncode


def test_a_broker_slow_to_be_reaped_after_sigkill_is_waited_for(tmp_path: Path) -> None:
    """Its SIGTERM deadline spent, the killed JVM gets its own wait instead of a 1 s one."""
    node = KafkaNode(1, tmp_path, cast(Any, None), dumps_cds=False)
    process = _SlowToDie()
    node.process = cast(Any, process)
    stop_nodes([node], timeout_s=0.0)
    assert process.killed
    assert process.returncode == -9
    assert node.process is None
