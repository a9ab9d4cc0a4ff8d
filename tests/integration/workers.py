"""Worker processes of one group (consumer_worker.py) and the data helpers their tests share.

Each worker appends ``"<partition> <offset>"`` per consumed message to its own file before it
confirms the batch, so the files are the ground truth of what the group delivered.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from tests.integration.consumer_worker import count_records, read_records

REPO = Path(__file__).resolve().parents[2]
_groups = itertools.count(1)

Record = tuple[int, int]


# ---------------------------------------------------------------------------------- helpers
def produce(bootstrap: str, topic: str, count: int, partitions: int, first: int = 0) -> None:
    """Write ``count`` messages (value = unique id) round robin over ``partitions``."""
    failures: list[object] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10_000,
        "queue.buffering.max.messages": 1_000_000, "enable.idempotence": True,
        "on_delivery": delivered,
    })  # fmt: skip
    for number in range(first, first + count):
        producer.produce(topic, str(number).encode(), partition=number % partitions)
        if number % 50_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert failures == []


def highs(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """High watermark per partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return {
            p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (-1001 = none), asked without joining."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        answers = consumer.committed(
            [KafkaTopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
        return {tp.partition: tp.offset for tp in answers}
    finally:
        consumer.close()


def all_records(high: dict[int, int], low: dict[int, int] | None = None) -> set[Record]:
    """Every ``(partition, offset)`` from ``low`` (default 0) up to ``high``."""
    return {(p, o) for p, end in high.items() for o in range((low or {}).get(p, 0), end)}


def wait_until(
    condition: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.02
) -> float:
    """Poll ``condition`` every ``poll_s``; the seconds it took, or fail naming ``what``."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout_s:
            pytest.fail(f"not within {timeout_s} s: {what}")
        time.sleep(poll_s)
    return time.monotonic() - began


@dataclass
class Node:
    """A started worker process and its files."""

    node_id: int
    out: Path
    log: Path
    process: subprocess.Popen[bytes]

    def records(self) -> list[Record]:
        """What it consumed so far."""
        return read_records(self.out)

    def log_tail(self) -> str:
        """The end of its stdout/stderr."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


@dataclass
class Group:
    """Spawns worker processes of one group on one topic and keeps every one it started."""

    bootstrap: str
    topic: str
    source_count: int
    folder: Path
    mode: str | None = None
    """``--mode`` of the workers (None: what ``source_count`` means)."""
    group: str = field(default_factory=lambda: f"cb-group-{os.getpid()}-{next(_groups)}")
    status_topic: str | None = None
    """``--status-topic`` of the workers (None: the SDK's default)."""
    started: list[Node] = field(default_factory=list)

    def spawn(self, node_id: int, *options: str, run: int = 0) -> Node:
        """Start worker ``node_id``; its files are ``node<id>-run<run>.*`` in ``folder``."""
        out = self.folder / f"node{node_id}-run{run}.out"
        log = self.folder / f"node{node_id}-run{run}.log"
        command = [
            sys.executable, "-m", "tests.integration.consumer_worker",
            "--bootstrap", self.bootstrap, "--group", self.group, "--topic", self.topic,
            "--source-count", str(self.source_count), "--node-id", str(node_id),
            "--out", str(out), *(("--mode", self.mode) if self.mode else ()),
            *(("--status-topic", self.status_topic) if self.status_topic else ()), *options,
        ]  # fmt: skip
        with log.open("wb") as sink:
            process = subprocess.Popen(
                command, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        node = Node(node_id, out, log, process)
        self.started.append(node)
        return node

    def spawn_all(self, *options: str, run: int = 0) -> list[Node]:
        """Start nodes ``0 .. source_count - 1``."""
        return [self.spawn(node_id, *options, run=run) for node_id in range(self.source_count)]

    def wait_for_lines(self, nodes: list[Node], total: int, timeout_s: float) -> float:
        """Wait until ``nodes`` wrote ``total`` lines together; fail if one dies meanwhile."""

        def done() -> bool:
            for node in nodes:
                if node.process.poll() not in (None, 0):
                    pytest.fail(f"worker {node.node_id} exited with {node.process.returncode}:\n"
                                f"{node.log_tail()}")  # fmt: skip
            return sum(count_records(node.out) for node in nodes) >= total

        return wait_until(done, timeout_s, f"{total} lines from {len(nodes)} workers")

    def wait_exit(self, nodes: list[Node], timeout_s: float = 30.0) -> None:
        """Wait until every node has exited, each with code 0."""
        deadline = time.monotonic() + timeout_s
        for node in nodes:
            try:
                node.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pytest.fail(f"worker {node.node_id} did not exit:\n{node.log_tail()}")
            assert node.process.returncode == 0, node.log_tail()

    def stop(self, nodes: list[Node]) -> None:
        """SIGTERM (the worker shuts its consumer down, committing) and wait for exit 0."""
        for node in nodes:
            node.process.send_signal(signal.SIGTERM)
        self.wait_exit(nodes)

    def kill_leftovers(self) -> None:
        """SIGKILL every process this group started that still runs."""
        for node in self.started:
            if node.process.poll() is None:
                node.process.kill()
                node.process.wait()


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """Only what references keep alive stays: nothing is left to the cyclic collector."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
