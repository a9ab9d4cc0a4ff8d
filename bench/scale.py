"""How cost grows: one member's start-up, steady CPU and reconcile rounds as its group grows.

No peer: these lines measure us against ourselves at growing sizes (``"peer": null``).

- ``members-*``: one topic of ``--member-topic-partitions`` partitions, and 10, 100, 1,000
  (``--members``) other members in the group, simulated by a producer process that writes
  valid, live member reports (``member_key``, ``MemberReport.encode``, each carrying its first
  report's offset as ``join_offset``) every ``--sim-refresh-s`` (within their 30 s lease) for
  the whole run. They join before the measured member, so it replays them at start and checks
  each of them in every round. ``--mode elastic`` (default): they are elastic members, the
  measured one too, so each round runs the sticky strategy over all of them. ``--mode node``:
  they are nodes 1..N of ``N + 1`` with the same topics and strategy, the measured one node 0.
- ``history-*``: one topic as in ``members-*``, ``--history-members`` (100) other members, and
  a status partition that holds 1, 6, 60 (``--history-rounds``) rounds of their reports, as a
  group that has run for that many report intervals leaves it: compaction never cleans the
  active segment, so it holds every report written since the segment rolled (``segment.ms``).
  The simulator writes the rounds at once before the measured member starts; each report
  lists ``--history-held`` (8) partitions whose positions move every round, so no report
  repeats the one before it (a quiet member's report does, and costs a reader less).
- ``partitions-*``: one member alone in node mode, node 0 of ``--nodes`` (it holds a
  ``1/nodes`` share), over 100 .. 100,000 (``--partitions``) partitions with one message each.
  KRaft refuses a CreateTopics of 10,000+ records ("excessively large batch"), so sizes from
  5,000 on are topics of 5,000 partitions, shared between sizes. A broker keeps one open file
  and two mmaps per partition: with ``ulimit -n`` 20,000 (a hard limit here) one broker stops
  near 19,000 partitions, and ``vm.max_map_count`` 65,530 would stop it near 32,000. Both are
  limits per process, so the series runs on a LocalKafka cluster of ``--brokers`` nodes
  (default: one per ``BROKER_PARTITIONS`` of the largest point, 8 for 100,000), every node a
  combined KRaft broker and controller, replication factor 1: the partitions are spread over
  the nodes, each under its own limits. The members series always runs on one broker.

Each run is its own Python process with a fresh group and a fresh status topic (created
before the run, so start-up does not include it). Measured in the process: ``startup``
(constructing the settings to the first reconcile round finished; ``first_message_s`` too
where it holds data), ``cpu`` (process CPU seconds per wall second over ``--steady-s`` while
the application idles in ``get_message``), ``round`` (median wall time of the reconcile rounds
in that window; ``first_round_s`` and the rounds' thread CPU beside it). Rounds are timed by
wrapping ``PartitionKeeper.round`` in the run's own process (the library has no hook). One
line per metric and point, medians of ``--runs`` with the single runs and the load averages;
then a ``*-growth`` line per series and metric: log-log slopes between the points (1: linear)
and the marginal cost per member or partition. ``--reconcile-s`` is 2 s (the SDK's default is
10 s) so a window holds several rounds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from progress_bar import advance, emit, progress  # bench/progress_bar.py

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, NoMessageError, admin
from client_balance.broker import DEFAULT_KAFKA_VERSION, LocalKafka
from client_balance.consumer._keeper import PartitionKeeper
from client_balance.consumer._setup import CLIENT_VERSION
from client_balance.membership._keys import member_key
from client_balance.membership._log import ensure_status_topic, status_partition
from client_balance.membership._records import HeldPartition, MemberReport

BENCH = "scale"
TOPIC_MAX = 5_000
"""Partitions per topic: KRaft caps one CreateTopics at 10,000 metadata records."""
BROKER_PARTITIONS = 13_000
"""Partitions per local broker: one open file each, under this container's ``ulimit -n`` 20,000
(one broker stopped creating near 19,000), and two mmaps each, under ``vm.max_map_count``."""
SPARE_PARTITIONS = 1_000  # the members topic, status topics, __consumer_offsets
CLUSTER_HEAP_MB = 768
"""Heap of each node of a cluster: 8 of them stay well under half of a 23 GB machine."""
REPLICATION_ONE = {"default.replication.factor": "1", "min.insync.replicas": "1"}
LEASE_S = 30.0
UNITS = {"startup": "s", "cpu": "cpu_s/s", "round": "s"}
PER = {"members": "member", "history": "round", "partitions": "partition"}
"""What one step of each series adds (the growth lines' marginal cost is per one of these)."""


def _load() -> float:
    return round(os.getloadavg()[0], 2)


# ------------------------------------------------------------------------------ simulator
def simulate(spec: dict[str, Any]) -> None:
    """Write ``count`` live member reports, again every ``refresh_s``, until SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    bootstrap, topic, group = spec["bootstrap"], spec["status_topic"], spec["group"]
    ensure_status_topic(bootstrap, topic, kafka={}, timeout_s=30.0)
    partition = status_partition(group, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    count, node = spec["count"], spec["mode"] == "node"
    joined: dict[str, int] = {}

    def delivered(member: str) -> Any:
        def note(error: object, message: Any) -> None:
            if error is None:
                joined.setdefault(member, message.offset())

        return note

    written, history, held = 0, spec.get("history_rounds", 1), spec.get("held", 0)
    while not stop.is_set():
        for index in range(count):
            member = f"sim-{index:05d}"
            positions = {  # where it stands in what it holds: moved on every round
                f"{spec['topics'][0]}:{(index * held + number) % 100}": HeldPartition(
                    confirmed=written * 1_000 + number,
                    committed=written * 1_000,
                    high=written * 1_000 + 500,
                )
                for number in range(held)
            }
            report = MemberReport(
                consumer_id=member, host="scale-sim", pid=100_000 + index,
                node_id=index + 1 if node else -1, source_count=count + 1 if node else -1,
                topics=tuple(spec["topics"]), strategy=spec["strategy"], version=CLIENT_VERSION,
                lease_timeout_s=LEASE_S, join_offset=joined.get(member),
                mode=spec["mode"], status_partitions=1, held=positions,
            )  # fmt: skip
            producer.produce(
                topic, report.encode(), member_key(group, member), partition=partition,
                on_delivery=delivered(member),
            )  # fmt: skip
            producer.poll(0)
        if producer.flush(30) or len(joined) < count:
            raise RuntimeError("the simulator's reports were not all delivered")
        written += 1
        if written == history:
            print("ready", flush=True)
        if written >= history:  # the history is written at once, then refreshed on time
            stop.wait(spec["refresh_s"])


# ------------------------------------------------------------------------------ the member
class _Warnings(logging.Handler):
    """The library's warnings and errors, to show in the line (a round failing, say)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record.getMessage()[:160])


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Start one member, time its first round (and message), then its steady CPU and rounds."""
    rounds: list[tuple[float, float]] = []  # (wall s, thread CPU s) per round
    first = threading.Event()
    original = PartitionKeeper.round

    def timed_round(keeper: PartitionKeeper, full: bool = True) -> None:
        began, cpu = time.perf_counter(), time.thread_time()
        try:
            original(keeper, full)
        finally:
            rounds.append((time.perf_counter() - began, time.thread_time() - cpu))
            first.set()

    PartitionKeeper.round = timed_round  # type: ignore[method-assign,assignment]
    warnings = _Warnings()
    logging.getLogger("client_balance").addHandler(warnings)

    began = time.perf_counter()
    settings = ClientBalanceSettings(
        bootstrap_servers=spec["bootstrap"], group_id=spec["group"],
        status_topic=spec["status_topic"], start_position="earliest",
        reconcile_interval_s=spec["reconcile_s"], lease_timeout_s=LEASE_S,
    )  # fmt: skip
    consumer = ClientBalanceConsumer(settings)
    if spec["mode"] == "node":
        consumer.start(spec["topics"], source_count=spec["nodes"], node_id=0)
    else:
        consumer.start(spec["topics"], mode="elastic")
    start_s = time.perf_counter() - began
    if not first.wait(300):
        raise RuntimeError("no reconcile round within 300 s")
    first_round_s = time.perf_counter() - began
    first_message_s = None
    drained = 0
    while True:  # what it holds, read once, so the window below is idle
        try:
            batch = consumer.get_message(timeout_s=2.0 if drained else 10.0)
        except NoMessageError:
            break
        if not drained:
            first_message_s = time.perf_counter() - began
        drained += len(batch.messages)
        consumer.confirm(batch.confirm_context)

    done = len(rounds)
    cpu, wall = time.process_time(), time.perf_counter()
    while (left := spec["steady_s"] - (time.perf_counter() - wall)) > 0:
        with suppress(NoMessageError):
            consumer.confirm(consumer.get_message(timeout_s=min(1.0, left)).confirm_context)
    cpu_per_s = (time.process_time() - cpu) / (time.perf_counter() - wall)
    steady = rounds[done:]
    held = len(consumer.registered_partitions())
    consumer.shutdown()
    return {
        "start_s": start_s, "first_round_s": first_round_s, "first_message_s": first_message_s,
        "first_round_wall_s": rounds[0][0], "cpu_per_s": cpu_per_s, "held": held,
        "drained": drained, "round_s": [r[0] for r in steady],
        "round_cpu_s": [r[1] for r in steady], "warnings": warnings.seen[:5],
    }  # fmt: skip


# ------------------------------------------------------------------------------ the parent
def _child(role: str, spec: dict[str, Any]) -> subprocess.Popen[str]:
    command = [sys.executable, __file__, f"--{role}", json.dumps(spec)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def run_once(args: argparse.Namespace, spec: dict[str, Any], sim: int) -> dict[str, Any]:
    """One measured run (and its simulator, for ``sim`` members) with a fresh status topic."""
    spec = {**spec, "group": f"bench-scale-{uuid.uuid4().hex[:8]}"}
    spec["status_topic"] = f"bench-scale-status-{uuid.uuid4().hex[:8]}"
    ensure_status_topic(args.bootstrap, spec["status_topic"], kafka={}, timeout_s=30.0)
    simulator = None
    if sim:
        strategy = "sticky" if spec["mode"] == "elastic" else "modulo"
        simulator = _child("simulate", {**spec, "count": sim, "strategy": strategy,
                                        "refresh_s": args.sim_refresh_s})  # fmt: skip
        assert simulator.stdout is not None  # noqa: S101 - a pipe was asked for
        if simulator.stdout.readline().strip() != "ready":
            simulator.wait(30)
            raise RuntimeError("the simulator did not start")
    load_before = _load()
    try:
        worker = _child("measure", spec)
        output, _ = worker.communicate(timeout=600)
        if worker.returncode:
            raise RuntimeError(f"the measured member failed ({worker.returncode})")
        result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    finally:
        if simulator is not None:
            simulator.send_signal(signal.SIGTERM)
            simulator.wait(60)
        AdminClient({"bootstrap.servers": args.bootstrap}).delete_topics([spec["status_topic"]])
    result["load"] = [load_before, _load()]
    return result


def runs_of(args: argparse.Namespace, spec: dict[str, Any], sim: int, point: str) -> list[Any]:
    """``--runs`` measured runs of one point, each a step of the progress bar."""
    runs = []
    for number in range(1, args.runs + 1):
        runs.append(run_once(args, spec, sim))
        advance(f"{point} run {number}")
    return runs


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def point_lines(series: str, size: int, runs: list[dict[str, Any]], extra: dict[str, Any]) -> None:
    """Print the three lines of one point (startup, cpu, round)."""
    figures = {
        "startup": [r["first_round_s"] for r in runs],
        "cpu": [r["cpu_per_s"] for r in runs],
        "round": [_median(r["round_s"]) if r["round_s"] else math.nan for r in runs],
    }
    details: dict[str, dict[str, Any]] = {
        "startup": {"start_s": [round(r["start_s"], 3) for r in runs],
                    "first_round_wall_s": [round(r["first_round_wall_s"], 3) for r in runs],
                    "first_message_s": [r["first_message_s"] and round(r["first_message_s"], 3)
                                        for r in runs]},
        "cpu": {"held": [r["held"] for r in runs]},
        "round": {"rounds": [len(r["round_s"]) for r in runs],
                  "round_cpu_s": [round(_median(r["round_cpu_s"]), 4) if r["round_cpu_s"]
                                  else None for r in runs],
                  "max_round_s": [round(max(r["round_s"], default=0.0), 3) for r in runs]},
    }  # fmt: skip
    for metric, values in figures.items():
        # A run without a figure (no round in its window) is null, never NaN: JSON has no NaN.
        measured = [v for v in values if not math.isnan(v)]
        median = _median(measured) if measured else math.nan
        emit(json.dumps({
            "bench": BENCH, "case": f"{series}-{metric}", series: size,
            "ours": round(median, 4) if measured else None, "peer": None, "peer_name": None,
            "ratio": None, "unit": UNITS[metric],
            "runs": [None if math.isnan(v) else round(v, 4) for v in values],
            "load": [r["load"] for r in runs], **details[metric], **extra,
            "warnings": sorted({w for r in runs for w in r["warnings"]}),
        }))  # fmt: skip
        GROWTH.setdefault((series, metric), []).append((size, median))


GROWTH: dict[tuple[str, str], list[tuple[int, float]]] = {}


def growth_lines() -> None:
    """Per series and metric: log-log slopes between points, and the marginal cost per unit."""
    for (series, metric), points in GROWTH.items():
        pairs = list(itertools.pairwise(points))
        slopes = [math.log(b / a) / math.log(m / n) if a > 0 and b > 0 else None
                  for (n, a), (m, b) in pairs]  # fmt: skip
        marginal = [(b - a) / (m - n) for (n, a), (m, b) in pairs]
        worst = max((s for s in slopes if s is not None), default=0.0)
        verdict = "super-linear" if worst > 1.15 else "linear" if worst > 0.85 else "sub-linear"
        verdict = verdict if pairs else "one point"
        missing = [n for n, v in points if math.isnan(v)]
        if missing:  # a slope skipped for want of a figure must not read as sub-linear
            verdict = f"incomplete: no figure at {', '.join(map(str, missing))}"
        emit(json.dumps({
            "bench": BENCH, "case": f"{series}-{metric}-growth", "unit": "log-log slope",
            "ours": round(worst, 2), "peer": None, "peer_name": None, "ratio": None,
            "points": [[n, None if math.isnan(v) else round(v, 4)] for n, v in points],
            "slopes": [s if s is None else round(s, 2) for s in slopes],
            f"per_{PER[series]}": [f"{d:.3g}" for d in marginal], "verdict": verdict,
        }))  # fmt: skip


def partition_topics(args: argparse.Namespace, size: int, made: set[str]) -> list[str]:
    """The topics of ``size`` partitions (created, one message per partition, once)."""
    if size < TOPIC_MAX:  # from 5,000 on, shared: the larger sizes add topics to the smaller
        wanted = {f"bench-scale-{size}p": size}
    else:
        wanted = {f"bench-scale-{TOPIC_MAX}p-{i}": TOPIC_MAX for i in range(size // TOPIC_MAX)}
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 20})
    for topic, count in sorted(wanted.items()):
        if topic in made:
            continue
        admin.create_topics(args.bootstrap, {topic: count}, exist_ok=True, timeout_s=300.0)
        for partition in range(count):
            producer.produce(topic, b"x" * 100, partition=partition)
            producer.poll(0)
        if producer.flush(300):
            raise RuntimeError(f"could not write a message to each partition of {topic}")
        made.add(topic)
    return sorted(wanted)


def cluster_partitions(sizes: list[int]) -> int:
    """Partitions a partitions series creates: the small sizes' topics and the largest's."""
    small = sum(size for size in sizes if size < TOPIC_MAX)
    return small + max((size // TOPIC_MAX * TOPIC_MAX for size in sizes), default=0)


def brokers_for(args: argparse.Namespace, partitions: int) -> int:
    """``--brokers``, or enough nodes to hold ``partitions`` at ``BROKER_PARTITIONS`` each."""
    if args.brokers:
        return int(args.brokers)
    return max(1, math.ceil((partitions + SPARE_PARTITIONS) / BROKER_PARTITIONS))


@contextmanager
def broker(args: argparse.Namespace, brokers: int) -> Iterator[dict[str, Any]]:
    """The env's cluster, or a fresh LocalKafka of ``brokers`` nodes (replication factor 1)."""
    given = os.environ.get("CLIENT_BALANCE_BOOTSTRAP_SERVERS")
    if given:
        yield {"bootstrap": given, "broker": "CLIENT_BALANCE_BOOTSTRAP_SERVERS", "pids": []}
        return
    heap_mb = args.heap_mb or (1024 if brokers == 1 else CLUSTER_HEAP_MB)
    config = REPLICATION_ONE if brokers > 1 else None
    # Eight JVMs starting together on two cores take longer than LocalKafka's 90 s default.
    with LocalKafka(brokers=brokers, heap_mb=heap_mb, config=config,
                    startup_timeout_s=120.0 + 30.0 * brokers) as kafka:  # fmt: skip
        pids = sorted(kafka.broker_pids().values())
        nofile = []
        for pid in pids:
            with suppress(OSError, ValueError):  # not allowed: the broker keeps its limit
                resource.prlimit(pid, resource.RLIMIT_NOFILE, (args.broker_nofile,) * 2)
            nofile.append(resource.prlimit(pid, resource.RLIMIT_NOFILE)[0])
        nodes = f"{brokers} nodes, replication factor 1, " if brokers > 1 else ""
        name = f"LocalKafka kafka-{DEFAULT_KAFKA_VERSION} {nodes}heap {heap_mb} MiB each"
        yield {"bootstrap": kafka.bootstrap_servers, "broker": name, "brokers": brokers,
               "pids": pids, "broker_nofile": min(nofile), "broker_start_s": round(
               kafka.startup_s or 0.0, 1)}  # fmt: skip


def _rss_mb(pids: list[int]) -> list[int]:
    """Each broker's resident memory (MiB)."""
    sizes = []
    for pid in pids:
        with open(f"/proc/{pid}/status") as status:
            sizes += [int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS")]
    return sizes


def _open_files(pids: list[int]) -> list[int]:
    """Each broker's open files (its partitions' logs among them)."""
    counts = []
    for pid in pids:
        with suppress(OSError):
            counts.append(len(os.listdir(f"/proc/{pid}/fd")))
    return counts


def main(argv: list[str] | None = None) -> int:
    """Run the series and print their lines (or, with --measure/--simulate, be a child)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--series", action="append", choices=("members", "history", "partitions"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--members", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--history-members", type=int, default=100)
    parser.add_argument("--history-rounds", type=int, nargs="+", default=[1, 6, 60])
    parser.add_argument("--history-held", type=int, default=8)
    parser.add_argument("--partitions", type=int, nargs="+", default=[100, 1000, 10_000, 100_000])
    parser.add_argument("--mode", choices=("elastic", "node"), default="elastic")
    parser.add_argument("--member-topic-partitions", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=10, help="partitions series: source_count")
    parser.add_argument("--steady-s", type=float, default=10.0)
    parser.add_argument("--reconcile-s", type=float, default=2.0)
    parser.add_argument("--sim-refresh-s", type=float, default=10.0)
    parser.add_argument("--brokers", type=int, default=0, help="partitions series (0: auto)")
    parser.add_argument("--heap-mb", type=int, default=0, help="per node (0: 1024, 768 each)")
    parser.add_argument("--broker-nofile", type=int, default=100_000)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--simulate", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(json.loads(args.measure))), flush=True)
        return 0
    if args.simulate:
        simulate(json.loads(args.simulate))
        return 0
    series = args.series or ["members", "history", "partitions"]
    points = len(args.members) * ("members" in series)
    points += len(args.history_rounds) * ("history" in series)
    points += len(args.partitions) * ("partitions" in series)
    with progress("scale", points * args.runs):
        if "members" in series:
            members_series(args)
        if "history" in series:
            history_series(args)
        if "partitions" in series:
            partitions_series(args)
        growth_lines()
    return 0


def _header(args: argparse.Namespace, series: str, cluster: dict[str, Any]) -> dict[str, Any]:
    args.bootstrap = cluster["bootstrap"]
    header = {k: v for k, v in cluster.items() if k not in ("bootstrap", "pids")}
    emit(json.dumps({"bench": BENCH, "series": series, **header, "cores": os.cpu_count(),
                     "load": _load(), "mode": args.mode, "reconcile_s": args.reconcile_s,
                     "steady_s": args.steady_s, "runs": args.runs}))  # fmt: skip
    return {"bootstrap": args.bootstrap, "reconcile_s": args.reconcile_s,
            "steady_s": args.steady_s}  # fmt: skip


def _members_topic(args: argparse.Namespace) -> str:
    """The topic of the members and history series, made once on their broker."""
    topic = f"bench-scale-members-{args.member_topic_partitions}p"
    admin.create_topics(args.bootstrap, {topic: args.member_topic_partitions}, exist_ok=True)
    return topic


def members_series(args: argparse.Namespace) -> None:
    """The members points, on one broker (its own, unless the env names a cluster)."""
    with broker(args, 1) as cluster:
        base = _header(args, "members", cluster)
        topic = _members_topic(args)
        for count in args.members:
            spec = {**base, "topics": [topic], "mode": args.mode, "nodes": count + 1}
            runs = runs_of(args, spec, count, f"{count} members")
            point_lines("members", count, runs, {"mode": args.mode,
                        "partitions": args.member_topic_partitions})  # fmt: skip


def history_series(args: argparse.Namespace) -> None:
    """The history points: one group, its status partition holding more and more report rounds."""
    with broker(args, 1) as cluster:
        base = _header(args, "history", cluster)
        topic = _members_topic(args)
        count = args.history_members
        for rounds in args.history_rounds:
            spec = {**base, "topics": [topic], "mode": args.mode, "nodes": count + 1,
                    "history_rounds": rounds, "held": args.history_held}  # fmt: skip
            runs = runs_of(args, spec, count, f"{rounds} report rounds")
            point_lines("history", rounds, runs, {"mode": args.mode, "members": count,
                        "records": count * rounds,
                        "held_per_member": args.history_held})  # fmt: skip


def partitions_series(args: argparse.Namespace) -> None:
    """The partitions points, on a cluster big enough for the largest (``brokers_for``)."""
    with broker(args, brokers_for(args, cluster_partitions(args.partitions))) as cluster:
        base = _header(args, "partitions", cluster)
        made: set[str] = set()
        for size in args.partitions:
            began = time.perf_counter()
            topics = partition_topics(args, size, made)
            setup_s = round(time.perf_counter() - began, 1)
            spec = {**base, "topics": topics, "mode": "node", "nodes": args.nodes}
            runs = runs_of(args, spec, 0, f"{size} partitions")
            point_lines("partitions", size, runs, {"topics": len(topics), "nodes": args.nodes,
                        "setup_s": setup_s, "broker_rss_mb": _rss_mb(cluster["pids"]),
                        "broker_files": _open_files(cluster["pids"])})  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
