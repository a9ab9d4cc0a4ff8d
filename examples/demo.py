"""The README's main job (``make demo``): a client-balanced group at work, a crash, a join, Spark.

Starts a local Apache Kafka (or uses ``CLIENT_BALANCE_BOOTSTRAP_SERVERS``), creates the seeds'
topics ``orders`` (7 partitions) and ``stock`` (5), and then, in about a minute and a half:

1. produces 120,000 order and stock events (a progress bar);
2. starts three ``examples/worker.py`` processes as nodes 0, 1, 2 of 3 of the group ``demo``.
   Nobody joins a Kafka group: each node computes its own partitions (``modulo``) and confirms
   its batches, each of which takes 0.1 s to "process", so the lag falls for half a minute
   under a live view of the group (``client-balance status``: members, partitions, owners, lag);
3. kills node 1 with SIGKILL and starts its replacement at once. The dead node's claims hold
   until its lease (5 s here) runs out; then the replacement takes its partitions from the
   committed offsets. Once the lag is 0 the demo stops the workers and checks from their
   reports that every event was consumed exactly once: per partition, the offsets consumed are
   exactly the partition's range, each once (the killed node's confirms after its last report
   are read from its commits: ``commit="sync"`` commits at every confirm);
4. grows an elastic group (``demo-elastic``) from 3 to 4 members and shows which partitions
   the ``sticky`` strategy moved to the newcomer; the moved ones too are consumed exactly once;
5. runs the data pipeline on Spark (``examples/spark_pipeline.py``) over the same topics and
   prints its table;
6. names where its outputs are: the Parquet tables, the workers' reports and logs.

On a terminal the group view is redrawn in place; in a log (stdout not a terminal) it becomes
one plain line every few seconds. ``--quick`` runs the same steps on less data, faster.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from _demo_check import GroupOffsets, add_committed_tail, check_exactly_once
from _demo_view import GroupWatch, holders, show_workers, stderr_into, verdict
from _demo_workers import Worker, start_worker, stop_workers
from confluent_kafka import Producer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from client_balance import ClientBalanceSettings, admin
from client_balance.admin import GroupView
from client_balance.broker import LocalKafka

TOPICS = {"orders": 7, "stock": 5}
NODES = 3
PIPELINE = Path(__file__).with_name("spark_pipeline.py")
OUTPUT = Path(tempfile.gettempdir()) / "client-balance-demo"
"""Where the pipeline's Parquet tables and the workers' reports and logs stay afterwards."""
LEASE_S = 5
WORKER_ENV = {
    "CLIENT_BALANCE_START_POSITION": "earliest",  # a new group reads from the beginning
    "CLIENT_BALANCE_COMMIT": "sync",  # a commit at every confirm: a crash repeats no confirm
    "CLIENT_BALANCE_LEASE_TIMEOUT_S": str(LEASE_S),  # 30 s by default; short to be watched
    "CLIENT_BALANCE_REPORT_INTERVAL_S": "1",
    "CLIENT_BALANCE_REQUEST_TIMEOUT_S": "2.5",  # at most half the lease
    "CLIENT_BALANCE_RECONCILE_INTERVAL_S": "1",
    "CLIENT_BALANCE_BATCH_MAX_MESSAGES": "250",
}
CONSUME_TIMEOUT_S = 120.0
SETTLE_TIMEOUT_S = 45.0

# A log gets each line whole, however long; rich would wrap it at 80 columns.
CONSOLE = Console(highlight=False, soft_wrap=not sys.stdout.isatty())


@dataclass(frozen=True)
class Pace:
    """How much data and how slowly: the demo's, or ``--quick``'s for a test."""

    events: int = 120_000
    pause_per_batch_s: float = 0.1
    kill_after_s: float = 8.0
    elastic_hold_s: float = 3.0


QUICK = Pace(events=30_000, kill_after_s=2.0, elastic_hold_s=1.0)


@dataclass
class Demo:
    """What every step needs: where the broker is, the names, the pace, where files go."""

    bootstrap: str
    prefix: str
    pace: Pace
    out: Path
    workdir: Path

    def topic(self, name: str) -> str:
        """A seed topic's name in this run."""
        return self.prefix + name

    @property
    def topics(self) -> dict[str, int]:
        """The run's topics -> partitions."""
        return {self.topic(name): count for name, count in TOPICS.items()}

    def settings(self, group: str) -> ClientBalanceSettings:
        """Settings to read ``group``'s view."""
        return ClientBalanceSettings(bootstrap_servers=self.bootstrap, group_id=group)

    def start(self, name: str, group: str, *mode: str) -> Worker:
        """Start one worker of ``group`` on the run's topics."""
        arguments = ["--bootstrap", self.bootstrap, "--group", group, "--topics",
                     ",".join(self.topics), *mode,
                     "--pause-per-batch-s", str(self.pace.pause_per_batch_s)]  # fmt: skip
        return start_worker(name, self.workdir, arguments, WORKER_ENV)


def produce(demo: Demo) -> int:
    """Write order and stock events with a progress bar (plain lines in a log); how many."""
    producer = Producer({"bootstrap.servers": demo.bootstrap, "linger.ms": 20})
    rng = random.Random(7)
    total, step = demo.pace.events, 1000
    columns = (TextColumn("producing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=CONSOLE, disable=not CONSOLE.is_terminal) as progress:
        task = progress.add_task("producing", total=total)
        for i in range(total):
            topic = demo.topic("orders" if i % 2 == 0 else "stock")
            product = f"p{rng.randrange(50)}"
            event: dict[str, object] = {
                "product": product,
                "qty": rng.randrange(1, 5),
                "ts": time.time(),
            }
            if topic == demo.topic("orders"):
                event["price"] = round(rng.uniform(1.0, 50.0), 2)
            producer.produce(topic, json.dumps(event).encode(), key=product.encode())
            if (i + 1) % step == 0:
                producer.poll(0)
                progress.advance(task, step)
                if not CONSOLE.is_terminal and (i + 1) % (total // 4) < step:
                    CONSOLE.print(f"produced {i + 1:,} of {total:,}")
        producer.flush(60)
        progress.update(task, completed=total)
    return total


def holding(view: GroupView, count: int, each: int | None = None) -> bool:
    """``count`` live members hold every partition, each ``each`` of them if given."""
    live = view.live_members
    return (
        len(live) == count
        and not view.orphaned
        and not view.conflicts
        and (each is None or all(len(m.holds) == each for m in live))
    )


def nodes_step(demo: Demo, labels: dict[int, str], group: str) -> list[str]:
    """Steps 2 and 3: three nodes, one SIGKILLed and replaced; the exactly-once check."""
    offsets = GroupOffsets(demo.bootstrap, group, demo.topics)
    try:
        expected = offsets.expected()
        total = sum(end - first for first, end in expected.values())
        workers = [demo.start(f"node {i}", group, "--source-count", str(NODES), "--node-id",
                              str(i)) for i in range(NODES)]  # fmt: skip
        labels.update({w.pid: w.name for w in workers})
        title = f"group {group!r}: {NODES} node-mode workers (modulo), {total:,} events to consume"
        watch = GroupWatch(CONSOLE, demo.settings(group), title, expected, labels)
        try:
            with watch:
                watch.note(
                    f"started {NODES} workers as nodes 0..{NODES - 1} of {NODES}; each "
                    "computes its own partitions, none joins a Kafka group"
                )
                view = watch.wait_for(lambda v: holding(v, NODES), SETTLE_TIMEOUT_S, "3 nodes")
                shares = ", ".join(f"{m.consumer_id} {len(m.holds)}" for m in view.live_members)
                watch.note(
                    f"every partition held ({shares}); a batch of 250 takes "
                    f"{demo.pace.pause_per_batch_s:g} s, so the lag falls slowly"
                )
                time.sleep(demo.pace.kill_after_s)
                victim = workers[1]
                kept = [key for key, who in holders(watch.view or view).items() if who == "node 1"]
                victim.kill()
                watch.note(
                    f"SIGKILL node 1 (pid {victim.pid}), a crash: it releases nothing; "
                    f"its {len(kept)} partitions stay claimed until its {LEASE_S} s "
                    "lease runs out, and their lag stops falling"
                )
                time.sleep(0.5)  # a commit on the wire when it died has landed by now
                at_kill = {key: offsets.committed()[key] for key in kept}
                replacement = demo.start(
                    "node 1 (new)", group, "--source-count", str(NODES), "--node-id", "1"
                )
                labels[replacement.pid] = replacement.name
                workers.append(replacement)
                watch.note(
                    f"started a replacement node 1 (pid {replacement.pid}): the dead pid does "
                    "not block it; it waits for the lease (the view shows two live node 1s)"
                )
                killed_at = time.monotonic()
                watch.wait_for(
                    lambda v: all(holders(v)[key] == "node 1 (new)" for key in kept),
                    SETTLE_TIMEOUT_S,
                    "the replacement takes node 1's partitions",
                )
                watch.note(
                    f"{time.monotonic() - killed_at:.1f} s after the kill the "
                    f"replacement holds {', '.join(kept)}: it resumes from node 1's "
                    "committed offsets"
                )
                watch.wait_for(lambda v: v.total_lag == 0, CONSUME_TIMEOUT_S, "lag 0")
                watch.note(
                    f"lag 0: the group committed the end of all {len(expected)} "
                    "partitions; SIGTERM the workers (confirm, commit, release)"
                )
        finally:
            problems = stop_workers(workers)
    finally:
        offsets.close()
    completed, tail, problems_at_kill = add_committed_tail(victim.report(), at_kill, expected)
    reports = [completed if w.killed else w.report() for w in workers]
    problems += problems_at_kill + check_exactly_once(reports, expected)
    rows = [(w.name, w.pid, r) for w, r in zip(workers, reports, strict=True)]
    show_workers(CONSOLE, rows, f"group {group!r}: what each worker consumed")
    CONSOLE.print(
        f"node 1's last report, written before the kill, lacked {tail:,} events it "
        "had confirmed and committed: they are counted from its commits"
    )
    verdict(
        CONSOLE,
        problems,
        f"all {total:,} events consumed exactly once across the group, the "
        "crash and the replacement included",
    )
    return problems


def elastic_step(demo: Demo, labels: dict[int, str], group: str) -> list[str]:
    """Step 4: an elastic group grows from 3 to 4; the moved partitions, counted and checked."""
    offsets = GroupOffsets(demo.bootstrap, group, demo.topics)
    partitions = sum(TOPICS.values())
    try:
        before = offsets.expected()
        workers: list[Worker] = []
        title = f"group {group!r}: elastic members (sticky) share {partitions} partitions"
        watch = GroupWatch(CONSOLE, demo.settings(group), title, before, labels)
        try:
            with watch:
                for number in range(1, 4):
                    workers.append(demo.start(f"member {number}", group, "--mode", "elastic"))
                    labels[workers[-1].pid] = workers[-1].name
                watch.note(
                    "started 3 elastic members: each counts the live members and "
                    "computes the sticky assignment over them"
                )
                share = partitions // 3
                three = watch.wait_for(lambda v: holding(v, 3, share), SETTLE_TIMEOUT_S, "3")
                watch.note(f"3 members hold {share} partitions each")
                time.sleep(demo.pace.elastic_hold_s)
                workers.append(demo.start("member 4", group, "--mode", "elastic"))
                labels[workers[-1].pid] = workers[-1].name
                watch.note(f"member 4 joins (pid {workers[-1].pid})")
                four = watch.wait_for(
                    lambda v: holding(v, 4, partitions // 4), SETTLE_TIMEOUT_S, "4 members"
                )
                old, new = holders(three), holders(four)
                moved = [f"{key} {old[key]} -> {new[key]}" for key in old if old[key] != new[key]]
                watch.note(
                    f"the group grew to 4: sticky moved {len(moved)} of {partitions} "
                    f"partitions, each released (and committed) by its holder before "
                    f"member 4 claimed it; the other {partitions - len(moved)} never "
                    "stopped"
                )
                for line in moved:
                    watch.note(f"  moved {line}")
                time.sleep(demo.pace.elastic_hold_s)
                watch.note("SIGTERM the 4 members")
        finally:
            problems = stop_workers(workers)
        ends = offsets.committed()  # where the members stopped
        expected = {key: (first, ends[key] or first) for key, (first, _) in before.items()}
    finally:
        offsets.close()
    reports = [w.report() for w in workers]
    show_workers(
        CONSOLE,
        [(w.name, w.pid, r) for w, r in zip(workers, reports, strict=True)],
        f"group {group!r}: what each member consumed before it stopped",
    )
    problems += check_exactly_once(reports, expected)
    done = sum(end - first for first, end in expected.values())
    verdict(
        CONSOLE,
        problems,
        f"{len(moved)} partitions moved and {done:,} events consumed exactly "
        "once: every offset up to the group's committed one, by one member, once",
    )
    return problems


def run_pipeline(demo: Demo) -> int:
    """Step 5: the Spark pipeline over the same topics; its exit code."""
    command = [sys.executable, str(PIPELINE), "--bootstrap", demo.bootstrap,
               "--out", str(demo.out), "--group", f"{demo.prefix}demo-pipeline",
               "--orders", demo.topic("orders"), "--stock", demo.topic("stock"),
               "--starting", "earliest"]  # fmt: skip
    with (demo.workdir / "spark.log").open("wb") as log:  # Spark's and the JVM's own noise
        return subprocess.run(command, check=False, stderr=log).returncode


def run(demo: Demo) -> int:
    """The six steps; 0 when every check passed."""
    admin.create_topics(demo.bootstrap, demo.topics, exist_ok=True)
    labels: dict[int, str] = {}
    group = f"{demo.prefix}demo"
    steps: list[tuple[str, Callable[[], list[str]]]] = [
        ("2-3. three nodes, one crash", lambda: nodes_step(demo, labels, group)),
        ("4. an elastic group grows", lambda: elastic_step(demo, labels, f"{group}-elastic")),
    ]
    CONSOLE.rule(f"1. produce {demo.pace.events:,} events to {', '.join(demo.topics)}")
    began = time.monotonic()
    produce(demo)
    CONSOLE.print(f"produced {demo.pace.events:,} events in {time.monotonic() - began:.1f} s")
    failed = False
    with stderr_into(demo.workdir / "demo-kafka.log"):  # librdkafka notices would tear the view
        for title, step in steps:
            CONSOLE.rule(title)
            try:
                failed = bool(step()) or failed
            except TimeoutError as error:  # the workers are stopped; their logs tell why
                CONSOLE.print(Text(f"FAILED: {error}; see {demo.workdir}", style="bold red"))
                failed = True
    CONSOLE.rule(f"5. the Spark pipeline ({PIPELINE.name}) over the same topics")
    began = time.monotonic()
    if run_pipeline(demo) != 0:
        CONSOLE.print(Text(f"FAILED: the Spark pipeline; see {demo.workdir / 'spark.log'}"))
        failed = True
    else:
        CONSOLE.print(
            f"Spark read both topics and aggregated them in {time.monotonic() - began:.1f} s"
        )
    CONSOLE.rule("6. where the outputs are")
    outputs = {
        "Parquet tables": f"{demo.out / 'orders_per_minute'}, {demo.out / 'stock_levels'}",
        "worker reports and logs": f"{demo.workdir}/ (*.json, *.log, spark.log)",
        "committed offsets": f"groups {group}, {group}-elastic at {demo.bootstrap} "
        f"(client-balance status --group {group})",
    }
    for what, where in outputs.items():  # lines, not a table: a path is never folded
        CONSOLE.print(Text.assemble((f"{what + ':':25}", "bold"), where))
    return 1 if failed else 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="less data, faster (for tests)")
    parser.add_argument("--prefix", default="", help="prefix of the topics' and groups' names")
    parser.add_argument("--out", type=Path, default=OUTPUT, help=f"outputs (default: {OUTPUT})")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run against CLIENT_BALANCE_BOOTSTRAP_SERVERS, else a LocalKafka started here."""
    args = parse_args(argv)
    workdir = args.out / "workers"
    shutil.rmtree(workdir, ignore_errors=True)  # the last run's reports
    workdir.mkdir(parents=True)
    with ExitStack() as stack:
        bootstrap = os.environ.get("CLIENT_BALANCE_BOOTSTRAP_SERVERS")
        if not bootstrap:
            kafka = stack.enter_context(LocalKafka(progress=CONSOLE.print))
            bootstrap = kafka.bootstrap_servers
            CONSOLE.print(f"its log and data: {kafka.data_dir} (removed when the demo ends)")
        pace = QUICK if args.quick else Pace()
        return run(Demo(bootstrap, args.prefix, pace, args.out, workdir))


if __name__ == "__main__":
    sys.exit(main())
