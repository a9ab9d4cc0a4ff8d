"""Stopping brokers: a JVM that needs a moment to die after SIGKILL is waited for, not raised.

And letting them go: detach() only what may outlive its starter.
"""

from __future__ import annotations

import subprocess
import weakref
from pathlib import Path
from typing import Any, cast

import pytest

from client_balance.broker import LocalKafka
from client_balance.broker._node import KafkaNode, stop_nodes
from client_balance.errors import ConfigError

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


class _Running:
    """A node's process that runs (as far as LocalKafka can tell)."""

    pid = 4242

    def poll(self) -> int | None:
        return None


@pytest.mark.parametrize("die_with_parent", [True, False])
def test_detach_refuses_a_broker_that_dies_with_its_starter(
    tmp_path: Path, die_with_parent: bool
) -> None:
    """detach() of a die_with_parent=True LocalKafka raises, naming the setting to use.

    It returned a pid, and the JVM got SIGTERM when the starting thread ended (review r6).
    """
    kafka = LocalKafka(die_with_parent=die_with_parent, data_dir=tmp_path)
    node = KafkaNode(1, tmp_path, cast(Any, None), dumps_cds=False)
    node.process = cast(Any, _Running())
    # A started cluster without a JVM: its nodes and its finalizer are all detach() reads.
    kafka._nodes = [node]
    kafka._finalizer = weakref.finalize(kafka, lambda: None)
    if die_with_parent:
        with pytest.raises(ConfigError, match="die_with_parent=False"):
            kafka.detach()
    else:
        assert kafka.detach() == _Running.pid
