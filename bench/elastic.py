"""Elastic group: a group of 8 absorbs a leave and a join, ours against a subscribe() group.

Both groups read the same topic (``--partitions`` partitions, a backlog that outlasts the run)
with 8 member processes that take a batch, work on it for ``--work-s``, and take the next.
Ours: ``ClientBalanceConsumer`` members with ``start([topic], mode="elastic")`` (sticky). Peer:
confluent-kafka consumers that ``subscribe()`` with ``partition.assignment.strategy=
cooperative-sticky`` (Kafka's incremental protocol) and Kafka's default session settings.

Each member writes what it holds whenever that changes, and every gap between two batches that
is longer than ``PAUSE_S``. The parent waits until the 8 hold every partition once, balanced
(at most one apart), lets them run ``--steady-s``, then:

- **leave**: one member shuts down cleanly (``shutdown()`` / ``close()``); the time from the
  call to every partition held by the 7 again, and the partitions that changed holder;
- **join**: a new member starts; the time from its start to every partition held by the 8
  again, the new one included, and the partitions that changed holder.

``pause_s`` is the longest gap in consumption, during an event, of a member that kept at least
one partition through it (0 when none was longer than ``PAUSE_S``): the stop-the-world cost the
aim is to avoid. One JSON line per case, in the format of every bench script: ``ours``,
``peer`` = seconds to absorb (median of ``--runs``), ``ratio`` = peer / ours (above 1: we are
faster), and the moves and pauses of both sides beside them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaException
from consumer import broker, produce  # bench/consumer.py: the benches' broker and data

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, NoMessageError

BENCH = "elastic"
MEMBERS = 8
PAUSE_S = 0.5
SETTLE_TIMEOUT_S = 120.0


# ------------------------------------------------------------------------------ members
class _Journal:
    """A member's file: one JSON line per change of what it holds, and per long gap."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a")
        self._held: set[int] | None = None
        self._last_batch = 0.0

    def held(self, partitions: set[int]) -> None:
        """Note what the member holds, if it changed."""
        if partitions != self._held:
            self._held = set(partitions)
            self.note({"held": sorted(partitions)})

    def batch(self) -> None:
        """Note a batch done; a gap before it longer than PAUSE_S is written down."""
        now = time.time()
        if self._last_batch and now - self._last_batch > PAUSE_S:
            self.note({"gap": [self._last_batch, now]})
        self._last_batch = now

    def note(self, entry: dict[str, Any]) -> None:
        """Append one timestamped line."""
        self._file.write(json.dumps({"t": time.time(), **entry}) + "\n")
        self._file.flush()


def _stop_on_term() -> list[bool]:
    stop = [False]

    def handler(signum: int, frame: object) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, handler)
    return stop


def our_member(bootstrap: str, group: str, topic: str, journal: str, work_s: float) -> None:
    """An elastic ClientBalanceConsumer member."""
    stop = _stop_on_term()
    log = _Journal(Path(journal))
    log.note({"started": True})
    settings = ClientBalanceSettings(
        bootstrap_servers=bootstrap, group_id=group, start_position="earliest",
        reconcile_interval_s=1.0, report_interval_s=1.0, lease_timeout_s=10.0,
        request_timeout_s=4.0, batch_max_messages=200,
    )  # fmt: skip
    consumer = ClientBalanceConsumer(settings)
    consumer.start([topic], mode="elastic")
    while not stop[0]:
        log.held({int(key.rsplit(":", 1)[1]) for key in consumer.registered_partitions()})
        try:
            batch = consumer.get_message(timeout_s=0.1)
        except NoMessageError:
            continue
        time.sleep(work_s)
        consumer.confirm(batch.confirm_context)
        log.batch()
    log.note({"leaving": True})
    consumer.shutdown()
    log.held(set())


def peer_member(bootstrap: str, group: str, topic: str, journal: str, work_s: float) -> None:
    """A subscribe() member with cooperative-sticky."""
    stop = _stop_on_term()
    log = _Journal(Path(journal))
    log.note({"started": True})
    held: set[int] = set()

    def assigned(consumer: Consumer, partitions: list[Any]) -> None:
        held.update(p.partition for p in partitions)

    def revoked(consumer: Consumer, partitions: list[Any]) -> None:
        held.difference_update(p.partition for p in partitions)

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
    })  # fmt: skip
    consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    while not stop[0]:
        messages = consumer.consume(num_messages=200, timeout=0.1)
        log.held(held)
        if any(m.error() is None for m in messages):
            time.sleep(work_s)
            log.batch()
    log.note({"leaving": True})
    consumer.close()
    log.held(set())


# ------------------------------------------------------------------------------ the parent
class Run:
    """One side's group of member processes and their journals."""

    def __init__(self, side: str, args: argparse.Namespace, bootstrap: str, folder: Path) -> None:
        self.side, self.args, self.bootstrap, self.folder = side, args, bootstrap, folder
        self.group = f"bench-elastic-{side}-{uuid.uuid4().hex[:8]}"
        self.members: dict[int, multiprocessing.Process] = {}
        self.target = our_member if side == "ours" else peer_member

    def journal(self, index: int) -> Path:
        """Member ``index``'s journal file."""
        return self.folder / f"{self.side}-{self.group}-{index}.jsonl"

    def spawn(self, index: int) -> None:
        """Start member ``index``."""
        process = multiprocessing.Process(
            target=self.target,
            args=(self.bootstrap, self.group, self.args.topic, str(self.journal(index)),
                  self.args.work_s),
            daemon=True,
        )  # fmt: skip
        process.start()
        self.members[index] = process

    def entries(self, index: int) -> list[dict[str, Any]]:
        """Member ``index``'s journal so far."""
        path = self.journal(index)
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def holders(self, live: set[int]) -> dict[int, int] | None:
        """Partition -> member, if the live members hold each partition once, balanced."""
        owner: dict[int, int] = {}
        counts = []
        for index in live:
            held = [e["held"] for e in self.entries(index) if "held" in e]
            counts.append(len(held[-1]) if held else 0)
            for partition in held[-1] if held else []:
                if partition in owner:
                    return None
                owner[partition] = index
        if len(owner) != self.args.partitions or max(counts) - min(counts) > 1:
            return None
        return owner

    def wait_settled(self, live: set[int], must_hold: int | None = None) -> dict[int, int]:
        """Wait until ``live`` hold every partition once (``must_hold`` among them)."""
        deadline = time.time() + SETTLE_TIMEOUT_S
        while time.time() < deadline:
            owner = self.holders(live)
            if owner is not None and (must_hold is None or must_hold in owner.values()):
                return owner
            time.sleep(0.02)
        raise RuntimeError(f"{self.side}: the group did not settle within {SETTLE_TIMEOUT_S} s")

    def pause(self, live: set[int], began: float, ended: float, kept: set[int]) -> float:
        """The longest gap of a member in ``kept`` that overlaps [began, ended]."""
        longest = 0.0
        for index in live & kept:
            for entry in self.entries(index):
                if "gap" in entry:
                    start, end = entry["gap"]
                    if end >= began and start <= ended:
                        longest = max(longest, end - start)
        return longest

    def stop_all(self) -> None:
        """SIGTERM every member and wait for it."""
        for process in self.members.values():
            if process.is_alive():
                process.terminate()
        for process in self.members.values():
            process.join(30)

    def measure(self) -> dict[str, Any]:
        """Settle 8, take one away, add one; the absorb times, moves and pauses."""
        for index in range(MEMBERS):
            self.spawn(index)
        live = set(range(MEMBERS))
        self.wait_settled(live)
        time.sleep(self.args.steady_s)
        before = self.wait_settled(live)  # as it stands at the event

        leaving = min(live)
        left_at = time.time()
        self.members[leaving].terminate()
        live.discard(leaving)
        after = self.wait_settled(live)
        leave_s = time.time() - left_at
        kept = {i for i in live if any(after.get(p) == i for p, o in before.items() if o == i)}
        leave = {
            "s": leave_s,
            "moved": sum(1 for p in before if after[p] != before[p]),
            "pause_s": self.pause(live, left_at, time.time(), kept),
        }
        time.sleep(self.args.steady_s)
        after = self.wait_settled(live)

        joining = MEMBERS
        self.spawn(joining)
        live.add(joining)
        started = self._started_at(joining)
        final = self.wait_settled(live, must_hold=joining)
        join_s = time.time() - started
        kept = {i for i in live if any(final.get(p) == i for p, o in after.items() if o == i)}
        join = {
            "s": join_s,
            "moved": sum(1 for p in after if final[p] != after[p]),
            "pause_s": self.pause(live, started, time.time(), kept),
        }
        self.stop_all()
        return {"leave": leave, "join": join}

    def _started_at(self, index: int) -> float:
        deadline = time.time() + 30
        while time.time() < deadline:
            for entry in self.entries(index):
                if entry.get("started"):
                    return float(entry["t"])
            time.sleep(0.01)
        raise RuntimeError(f"{self.side}: member {index} did not start")


def main(argv: list[str] | None = None) -> int:
    """Run both sides ``--runs`` times, alternating; print one JSON line per event."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=48)
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--work-s", type=float, default=0.02, help="work per batch of 200")
    parser.add_argument("--steady-s", type=float, default=3.0, help="wait between events")
    parser.add_argument("--folder", type=Path, default=None, help="keep the journals here")
    args = parser.parse_args(argv)
    if args.folder is None:
        args.folder = Path(tempfile.mkdtemp(prefix="client-balance-bench-elastic-"))
    args.folder.mkdir(parents=True, exist_ok=True)
    with broker() as (bootstrap, broker_name):
        print(json.dumps({"bench": BENCH, "broker": broker_name, "cores": os.cpu_count()}))
        args.topic = f"bench-elastic-{args.partitions}p-{uuid.uuid4().hex[:6]}"
        produce(bootstrap, args.topic, args.partitions, args.messages, 100)
        results: dict[str, list[dict[str, Any]]] = {"ours": [], "peer": []}
        for _ in range(args.runs):
            for side in ("peer", "ours"):
                run = Run(side, args, bootstrap, args.folder)
                try:
                    results[side].append(run.measure())
                except (RuntimeError, KafkaException) as error:
                    run.stop_all()
                    print(f"{side} run failed: {error}", file=sys.stderr)
                    return 1
        for event in ("leave", "join"):
            ours = [r[event] for r in results["ours"]]
            peer = [r[event] for r in results["peer"]]
            ours_s = statistics.median(e["s"] for e in ours)
            peer_s = statistics.median(e["s"] for e in peer)
            print(json.dumps({
                "bench": BENCH, "case": f"group-of-{MEMBERS}-{event}",
                "ours": round(ours_s, 3), "peer": round(peer_s, 3),
                "peer_name": f"confluent-kafka-{confluent_kafka.__version__} subscribe() "
                             "cooperative-sticky",
                "unit": "s", "ratio": round(peer_s / ours_s, 2),
                "ours_moved": [e["moved"] for e in ours], "peer_moved": [e["moved"] for e in peer],
                "ours_pause_s": [round(e["pause_s"], 2) for e in ours],
                "peer_pause_s": [round(e["pause_s"], 2) for e in peer],
                "ours_runs": [round(e["s"], 3) for e in ours],
                "peer_runs": [round(e["s"], 3) for e in peer],
                "partitions": args.partitions, "runs": args.runs,
            }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
