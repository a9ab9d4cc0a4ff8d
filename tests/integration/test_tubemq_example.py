"""examples/tubemq_example.py as processes: two nodes of 2 on a real broker, exactly once.

Each node's output file is what it processed (``<topic> <partition> <offset> <value>`` lines)
and its offsets file the application's offset map; together they are the ground truth. Tests
wait on conditions (lines written, processes gone), never on fixed sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer

from client_balance.strategies import java_string_hash
from tests.integration.workers import REPO, all_records, committed, highs, wait_until

pytestmark = pytest.mark.integration

EXAMPLE = REPO / "examples" / "tubemq_example.py"
PARTITIONS = 6
NODES = 2
MESSAGES = 6_000
SMALL_BATCHES = {"CLIENT_BALANCE_BATCH_MAX_MESSAGES": "50"}
SLOW_WORK = ("--work-per-batch-s", "0.1")  # with SMALL_BATCHES on 3 partitions: 1,500/s at most
STOP_WHEN_IDLE = ("--stop-after-idle-s", "4")
# A killed node's claims last until its lease lapses; short leases keep the test short.
SHORT_LEASES = {
    "CLIENT_BALANCE_LEASE_TIMEOUT_S": "6",
    "CLIENT_BALANCE_REPORT_INTERVAL_S": "1",
    "CLIENT_BALANCE_REQUEST_TIMEOUT_S": "2",
}

Line = tuple[int, int, str]
"""``(partition, offset, value)`` of one output line."""


def produce_keyed(bootstrap: str, topic: str, count: int) -> None:
    """Write ``count`` keyed messages, value = their number, round robin over the partitions."""
    failures: list[object] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "on_delivery": delivered})
    for number in range(count):
        producer.produce(
            topic, str(number).encode(), key=f"key-{number}".encode(), partition=number % PARTITIONS
        )
    assert producer.flush(30) == 0
    assert failures == []


def tubemq_share(topic: str, node_id: int) -> set[int]:
    """The partitions TubeMQ's example rule gives ``node_id`` of ``NODES``."""
    return {
        p
        for p in range(PARTITIONS)
        if (java_string_hash(f"{topic}:{p}") & 0xFFFFFFFF) % NODES == node_id
    }


def read_lines(output: Path) -> list[Line]:
    """The complete lines of an output file."""
    if not output.exists():
        return []
    lines = []
    for text in output.read_text().splitlines(keepends=True):
        if text.endswith("\n"):
            _topic, partition, offset, value = text.split(" ", 3)
            lines.append((int(partition), int(offset), json.loads(value)))
    return lines


def count_lines(output: Path) -> int:
    """How many lines an output file has (cheap, for polling)."""
    try:
        return output.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def read_offset_map(offsets: Path) -> tuple[dict[int, int], int]:
    """The offset map (partition -> next offset) and the output length it matches."""
    checkpoint = json.loads(offsets.read_text())
    by_partition = {
        int(key.rsplit(":", 1)[1]): value for key, value in checkpoint["offsets"].items()
    }
    return by_partition, checkpoint["output_bytes"]


@dataclass
class ExampleNode:
    """One node's files; ``process`` is its latest run."""

    node_id: int
    offsets: Path
    output: Path
    log: Path
    process: subprocess.Popen[bytes]

    def log_text(self) -> str:
        """Its stdout and stderr so far."""
        return self.log.read_text(errors="replace")

    def wait_exit(self, timeout_s: float = 30.0) -> None:
        """Wait until it has exited with code 0."""
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"node {self.node_id} did not exit:\n{self.log_text()}")
        assert self.process.returncode == 0, self.log_text()


@dataclass
class ExampleGroup:
    """Runs the example as nodes of one group on one topic; every process is killed at the end."""

    bootstrap: str
    topic: str
    group: str
    folder: Path
    started: list[subprocess.Popen[bytes]]

    def spawn(
        self, node_id: int, *options: str, run: int = 0, env: dict[str, str] | None = None
    ) -> ExampleNode:
        """Start node ``node_id`` on its files (the same ones for every run of the node)."""
        offsets = self.folder / f"node{node_id}.offsets.json"
        output = self.folder / f"node{node_id}.out"
        log = self.folder / f"node{node_id}-run{run}.log"
        command = [
            sys.executable, str(EXAMPLE), "--bootstrap", self.bootstrap, "--group", self.group,
            "--topics", self.topic, "--source-count", str(NODES), "--node-id", str(node_id),
            "--offsets", str(offsets), "--output", str(output),
            "--start-position", "earliest", "--assign-every-s", "1", *options,
        ]  # fmt: skip
        with log.open("wb") as sink:
            process = subprocess.Popen(
                command,
                cwd=REPO,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
            )
        self.started.append(process)
        return ExampleNode(node_id, offsets, output, log, process)

    def wait_for_lines(self, node: ExampleNode, count: int, timeout_s: float = 30.0) -> None:
        """Wait until ``node`` has processed ``count`` messages; fail if it exits first."""

        def written() -> bool:
            if node.process.poll() is not None:
                pytest.fail(f"node {node.node_id} exited early:\n{node.log_text()}")
            return count_lines(node.output) >= count

        wait_until(written, timeout_s, f"{count} lines from node {node.node_id}")


@pytest.fixture
def example_group(
    kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> Iterator[ExampleGroup]:
    """A fresh topic of ``MESSAGES`` keyed messages and a group to run the example on it."""
    topic = new_topic(partitions=PARTITIONS)
    produce_keyed(kafka_bootstrap, topic, MESSAGES)
    group = ExampleGroup(kafka_bootstrap, topic, f"tubemq-{tmp_path.name}", tmp_path, [])
    yield group
    for process in group.started:
        if process.poll() is None:
            process.kill()
            process.wait()


def assert_exactly_once(group: ExampleGroup, nodes: list[ExampleNode]) -> None:
    """Every message in exactly one output, each node on its TubeMQ share, offsets committed."""
    high = highs(group.bootstrap, group.topic, PARTITIONS)
    assert sum(high.values()) == MESSAGES
    lines = {node.node_id: read_lines(node.output) for node in nodes}
    counts = Counter((p, o) for node_lines in lines.values() for p, o, _ in node_lines)
    assert {record for record, n in counts.items() if n > 1} == set(), "duplicates"
    assert set(counts) == all_records(high), "messages were lost"
    values = sorted(int(value) for node_lines in lines.values() for _, _, value in node_lines)
    assert values == list(range(MESSAGES))
    for node in nodes:
        share = tubemq_share(group.topic, node.node_id)
        assert {p for p, _, _ in lines[node.node_id]} == share
        offsets, output_bytes = read_offset_map(node.offsets)
        assert offsets == {p: high[p] for p in share}
        assert output_bytes == node.output.stat().st_size
    assert committed(group.bootstrap, group.group, group.topic, PARTITIONS) == high


# ------------------------------------------------------------------------------------ tests
@pytest.mark.timeout(90)
def test_two_example_nodes_consume_every_message_exactly_once(
    example_group: ExampleGroup,
) -> None:
    """Nodes 0 and 1 of 2 split the partitions by TubeMQ's hash rule and read each message once."""
    assert all(tubemq_share(example_group.topic, node_id) for node_id in range(NODES))
    nodes = [example_group.spawn(node_id, *STOP_WHEN_IDLE) for node_id in range(NODES)]
    for node in nodes:
        node.wait_exit(timeout_s=45)
    assert_exactly_once(example_group, nodes)


@pytest.mark.timeout(90)
def test_a_node_stopped_by_sigterm_resumes_from_its_offset_map(
    example_group: ExampleGroup,
) -> None:
    """SIGTERM mid-way and a restart on the same files: nothing lost, nothing twice."""
    other = example_group.spawn(0, *STOP_WHEN_IDLE)
    node = example_group.spawn(1, *SLOW_WORK, env=SMALL_BATCHES)
    example_group.wait_for_lines(node, 300)
    node.process.send_signal(signal.SIGTERM)
    node.wait_exit()
    share = MESSAGES // NODES
    processed = read_lines(node.output)
    assert len(processed) < share, "the node was not stopped mid-way"
    # A clean stop finishes and records the batches in hand: the map is exactly the output.
    offsets, output_bytes = read_offset_map(node.offsets)
    assert output_bytes == node.output.stat().st_size
    ends = {p: max(o for q, o, _ in processed if q == p) + 1 for p, _, _ in processed}
    assert offsets == {p: ends.get(p, 0) for p in tubemq_share(example_group.topic, 1)}

    again = example_group.spawn(1, *STOP_WHEN_IDLE, run=1)
    again.wait_exit(timeout_s=45)
    other.wait_exit()
    for partition, offset in offsets.items():
        assert f"connected {example_group.topic}:{partition} from {offset}\n" in again.log_text()
    assert_exactly_once(example_group, [other, again])


@pytest.mark.timeout(90)
def test_a_node_killed_by_sigkill_resumes_from_its_offset_map_not_the_group(
    example_group: ExampleGroup,
) -> None:
    """SIGKILL mid-way: the restart cuts unrecorded output and resumes from the map, exactly."""
    other = example_group.spawn(0, *STOP_WHEN_IDLE, env=SHORT_LEASES)
    # No interval commit during the run: the group's offsets stay where the node began.
    lagging_commits = {**SHORT_LEASES, **SMALL_BATCHES, "CLIENT_BALANCE_COMMIT_INTERVAL_S": "600"}
    node = example_group.spawn(1, *SLOW_WORK, env=lagging_commits)
    example_group.wait_for_lines(node, 300)
    node.process.send_signal(signal.SIGKILL)
    node.process.wait()
    offsets, output_bytes = read_offset_map(node.offsets)
    assert output_bytes <= node.output.stat().st_size
    group_offsets = committed(
        example_group.bootstrap, example_group.group, example_group.topic, PARTITIONS
    )
    assert any(group_offsets[p] < offset for p, offset in offsets.items()), (
        f"the group's offsets {group_offsets} do not lag the map {offsets}: the test proves nothing"
    )
    # As if killed after appending a batch, before the map was replaced: output it does not cover.
    partition, offset = min(offsets.items())
    with node.output.open("a") as output:
        output.write(f'{example_group.topic} {partition} {offset} "unrecorded"\n')

    again = example_group.spawn(1, *STOP_WHEN_IDLE, run=1, env=SHORT_LEASES)
    again.wait_exit(timeout_s=45)
    other.wait_exit()
    assert "bytes of output processed after the map" in again.log_text()
    for partition, offset in offsets.items():
        assert f"connected {example_group.topic}:{partition} from {offset}\n" in again.log_text()
    assert_exactly_once(example_group, [other, again])
