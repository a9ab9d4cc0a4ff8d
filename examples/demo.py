"""The README's main job (``make demo``): three client-balanced nodes share one group's work.

Starts a local Apache Kafka (or uses ``CLIENT_BALANCE_BOOTSTRAP_SERVERS``), creates the seeds'
topics ``orders`` (7 partitions) and ``stock`` (5), produces 40,000 order events, and consumes
them with three ``ClientBalanceConsumer`` nodes of the group ``demo``: three processes running
``examples/worker.py --source-count 3 --node-id I``. Nobody joins a Kafka group; each node
computes its own partitions (the ``modulo`` strategy) and commits what it confirmed.

While they run it shows the live group view (``client-balance status``: members, partitions,
lag). Once the group's committed offsets reach the end of every partition, the demo stops the
nodes with SIGTERM (each finishes its batch, commits and releases), reads the report each one
writes, and checks that every event was consumed exactly once: per partition, the offsets the
nodes consumed are exactly the partition's range, each offset by one node, once.

Then the data pipeline runs on Spark (``examples/spark_pipeline.py``): the same topics through
the ``client_balance`` data source, orders and revenue per product per minute and stock levels,
written as Parquet under ``OUTPUT`` and printed as a table.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from rich.console import Console
from rich.progress import track
from rich.table import Table

from client_balance import ClientBalanceSettings, admin
from client_balance.broker import LocalKafka

TOPICS = {"orders": 7, "stock": 5}
MESSAGES_PER_TOPIC = 20_000
NODES = 3
GROUP = "demo"
WORKER = Path(__file__).with_name("worker.py")
PIPELINE = Path(__file__).with_name("spark_pipeline.py")
OUTPUT = Path(tempfile.gettempdir()) / "client-balance-demo"
"""Where the pipeline's Parquet tables stay after the demo."""
CONSUME_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0

CONSOLE = Console()

Ranges = dict[str, tuple[int, int]]
"""``topic:partition`` -> ``[first, end)`` offsets."""


def produce(bootstrap: str) -> int:
    """Write order and stock events with a progress bar; return how many."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    rng = random.Random(7)
    total = MESSAGES_PER_TOPIC * len(TOPICS)
    for i in track(range(total), description="producing", console=CONSOLE):
        topic = "orders" if i % 2 == 0 else "stock"
        product = f"p{rng.randrange(50)}"
        event: dict[str, object] = {
            "product": product,
            "qty": rng.randrange(1, 5),
            "ts": time.time(),
        }
        if topic == "orders":
            event["price"] = round(rng.uniform(1.0, 50.0), 2)
        producer.produce(topic, json.dumps(event).encode(), key=product.encode())
        if i % 5000 == 0:
            producer.poll(0)
    producer.flush(60)
    return total


class GroupOffsets:
    """The group's committed offsets and the partitions' watermarks, read without joining."""

    def __init__(self, bootstrap: str) -> None:
        # committed() only reads the group's offsets; this consumer never joins the group.
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False}
        )
        self._partitions = [
            KafkaTopicPartition(topic, number)
            for topic, count in TOPICS.items()
            for number in range(count)
        ]

    def committed(self) -> dict[str, int | None]:
        """``topic:partition`` -> committed offset, or None when nothing is committed."""
        answers = self._consumer.committed(self._partitions, timeout=10)
        return {
            f"{tp.topic}:{tp.partition}": tp.offset if tp.offset >= 0 else None for tp in answers
        }

    def watermarks(self) -> Ranges:
        """``topic:partition`` -> (low, high) watermarks."""
        ranges = {}
        for tp in self._partitions:
            low, high = self._consumer.get_watermark_offsets(tp, timeout=10)
            ranges[f"{tp.topic}:{tp.partition}"] = (low, high)
        return ranges

    def close(self) -> None:
        """Close the client."""
        self._consumer.close()


@dataclass
class Node:
    """One worker process and where it writes its report and its stderr."""

    node_id: int
    process: subprocess.Popen[bytes]
    report: Path
    stderr: Path


def start_nodes(bootstrap: str, workdir: Path) -> list[Node]:
    """Start the three worker processes; they read their other settings from the env."""
    env = {
        **os.environ,
        "CLIENT_BALANCE_START_POSITION": "earliest",  # a new group reads from the beginning
        "CLIENT_BALANCE_COMMIT_INTERVAL_S": "0.5",
    }
    nodes = []
    for node_id in range(NODES):
        report = workdir / f"node{node_id}.json"
        stderr = workdir / f"node{node_id}.stderr"
        command = [
            sys.executable, str(WORKER), "--bootstrap", bootstrap, "--group", GROUP,
            "--topics", ",".join(TOPICS), "--source-count", str(NODES),
            "--node-id", str(node_id), "--summary-every", "0.5", "--report", str(report),
        ]  # fmt: skip
        with stderr.open("wb") as errors:
            process = subprocess.Popen(command, env=env, stderr=errors)
        nodes.append(Node(node_id, process, report, stderr))
    return nodes


def show_group(bootstrap: str) -> None:
    """The live group view, as ``client-balance status --group demo`` prints it."""
    command = [sys.executable, "-m", "client_balance", "status", "--group", GROUP,
               "--bootstrap-servers", bootstrap]  # fmt: skip
    print(f"\n$ client-balance status --group {GROUP}")
    subprocess.run(command, check=False, stderr=subprocess.DEVNULL)


def wait_for_members(bootstrap: str, count: int, timeout_s: float = 30.0) -> None:
    """Wait until ``count`` members are live and hold every partition."""
    settings = ClientBalanceSettings(bootstrap_servers=bootstrap, group_id=GROUP)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = admin.GroupView.load(settings)
        if len(view.live_members) == count and not view.orphaned:
            return
        time.sleep(0.2)


def run_pipeline(bootstrap: str) -> int:
    """The Spark pipeline over the same topics; its exit code."""
    print(f"\nrunning the Spark pipeline ({PIPELINE.name}) over {', '.join(TOPICS)}")
    command = [sys.executable, str(PIPELINE), "--bootstrap", bootstrap, "--out", str(OUTPUT),
               "--group", f"{GROUP}-pipeline", "--starting", "earliest"]  # fmt: skip
    return subprocess.run(command, check=False).returncode


def wait_until_committed(offsets: GroupOffsets, ends: Ranges, nodes: list[Node]) -> bool:
    """Wait until the group has committed every partition's end; False at the timeout."""
    deadline = time.monotonic() + CONSUME_TIMEOUT_S
    while time.monotonic() < deadline:
        committed = offsets.committed()
        if all(committed[key] == end for key, (_, end) in ends.items()):
            return True
        if any(node.process.poll() is not None for node in nodes):
            print("a node exited before the work was done")
            return False
        time.sleep(0.2)
    print(f"the group did not commit every partition's end within {CONSUME_TIMEOUT_S:.0f} s")
    return False


def stop_nodes(nodes: list[Node]) -> list[int]:
    """SIGTERM each node (a clean stop: confirm, commit, release) and wait for it."""
    for node in nodes:
        if node.process.poll() is None:
            node.process.send_signal(signal.SIGTERM)
    codes = []
    for node in nodes:
        try:
            codes.append(node.process.wait(STOP_TIMEOUT_S))
        except subprocess.TimeoutExpired:
            node.process.kill()
            codes.append(node.process.wait())
    return codes


def check_exactly_once(reports: list[Mapping[str, Any]], expected: Ranges) -> list[str]:
    """Problems with "each offset of each expected range consumed by exactly one node, once"."""
    problems = []
    seen: dict[str, list[tuple[int, int, int]]] = {key: [] for key in expected}
    for report in reports:
        for key, partition in report["partitions"].items():
            runs = seen.setdefault(key, [])
            runs.extend((start, end, report["node_id"]) for start, end in partition["runs"])
    for key, runs in sorted(seen.items()):
        first, end = expected.get(key, (0, 0))
        position = first
        for start, stop, _ in sorted(runs):
            if start < position:
                problems.append(f"{key}: offsets {start}..{min(stop, position) - 1} came twice")
            elif start > position:
                problems.append(f"{key}: offsets {position}..{start - 1} were never consumed")
            position = max(position, stop)
        if position < end:
            problems.append(f"{key}: offsets {position}..{end - 1} were never consumed")
        if position > end:
            problems.append(f"{key}: offsets beyond the end {end} were consumed")
        if len({node_id for _, _, node_id in runs}) > 1:
            problems.append(f"{key}: consumed by more than one node")
    return problems


def print_table(reports: list[Mapping[str, Any]]) -> None:
    """Node, its partitions and its messages."""
    table = Table(title="what each node consumed")
    table.add_column("node", justify="right")
    table.add_column("partitions")
    table.add_column("messages", justify="right")
    for report in sorted(reports, key=lambda r: int(r["node_id"])):
        partitions = report["partitions"]
        messages = sum(p["messages"] for p in partitions.values())
        table.add_row(str(report["node_id"]), ", ".join(partitions), f"{messages:,}")
    CONSOLE.print(table)


def run(bootstrap: str) -> int:
    """Create topics, produce, consume with three client-balanced nodes, check, summarize."""
    admin.create_topics(bootstrap, TOPICS, exist_ok=True)
    offsets = GroupOffsets(bootstrap)
    with ExitStack() as stack:
        stack.callback(offsets.close)
        began = time.monotonic()
        produced = produce(bootstrap)
        produce_s = time.monotonic() - began
        ranges = offsets.watermarks()
        committed = offsets.committed()
        # What the group reads: from its committed offset (a demo run before), else from the
        # beginning; either way through the end of what was just produced.
        expected: Ranges = {}
        for key, (low, high) in ranges.items():
            first = committed[key]
            expected[key] = (low if first is None else first, high)
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cb-demo-")))
        print(
            f"\nstarting {NODES} ClientBalanceConsumer nodes (examples/worker.py), group {GROUP!r}"
        )
        began = time.monotonic()
        nodes = start_nodes(bootstrap, workdir)
        try:
            wait_for_members(bootstrap, NODES)
            show_group(bootstrap)
            done = wait_until_committed(offsets, expected, nodes)
            consume_s = time.monotonic() - began
            show_group(bootstrap)
        finally:
            stopping = time.monotonic()
            codes = stop_nodes(nodes)
            stop_s = time.monotonic() - stopping
        reports = [json.loads(n.report.read_text()) for n in nodes if n.report.exists()]
        problems = [] if done else ["the group did not commit every partition's end"]
        problems += [
            f"node {n.node_id} exited with {c}" for n, c in zip(nodes, codes, strict=True) if c
        ]
        problems += [f"node {n.node_id} wrote no report" for n in nodes if not n.report.exists()]
        problems += check_exactly_once(reports, expected)
        print_table(reports)
        consumed = sum(p["messages"] for r in reports for p in r["partitions"].values())
        print(
            f"\nproduced {produced:,} events in {produce_s:.1f} s; {NODES} nodes consumed "
            f"{consumed:,} messages and committed the end of all {len(expected)} partitions "
            f"in {consume_s:.1f} s (process start included), then stopped in {stop_s:.1f} s"
        )
        if problems:
            for node in nodes:
                tail = node.stderr.read_text(errors="replace").strip().splitlines()[-20:]
                if tail:
                    print(f"--- node {node.node_id} stderr ---", *tail, sep="\n")
            print("FAILED:", *problems, sep="\n  ")
            return 1
        print(
            f"every event was consumed exactly once: each offset of each of the "
            f"{len(expected)} partitions by one node, once; offsets committed to group {GROUP!r}"
        )
        if run_pipeline(bootstrap) != 0:
            print("FAILED: the Spark pipeline")
            return 1
        return 0


def main() -> int:
    """Run against CLIENT_BALANCE_BOOTSTRAP_SERVERS, else a LocalKafka started here."""
    with ExitStack() as stack:
        bootstrap = os.environ.get("CLIENT_BALANCE_BOOTSTRAP_SERVERS")
        if not bootstrap:
            kafka = stack.enter_context(LocalKafka(progress=print))
            bootstrap = kafka.bootstrap_servers
            print(f"local Apache Kafka at {bootstrap} ready in {kafka.startup_s:.1f} s")
            print(f"its log and data: {kafka.data_dir} (removed when the demo ends)")
        return run(bootstrap)


if __name__ == "__main__":
    sys.exit(main())
