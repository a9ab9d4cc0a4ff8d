"""Elastic group: a group of 8 absorbs a leave, a join and a crash, ours against Kafka's groups.

Every side reads the same topic (``--partitions`` partitions, a backlog that outlasts the run)
with 8 member processes that take a batch, work on it for ``--work-s``, and take the next.
Ours: ``ClientBalanceConsumer`` members with ``start([topic], mode="elastic")`` (sticky). Two
peers, each in its own group on the same broker:

- ``kip848``: confluent-kafka consumers that ``subscribe()`` with ``group.protocol=consumer``
  (KIP-848, the broker assigns with its default ``uniform`` assignor): the peer's strongest mode;
- ``classic``: ``subscribe()`` with ``partition.assignment.strategy=cooperative-sticky``
  (Kafka's incremental protocol on the classic group).

Equal liveness on every side: our ``lease_timeout_s`` and both peers' session timeouts are
``--lease-s``; our ``report_interval_s`` and both peers' heartbeat intervals are ``--beat-s``.
KIP-848 takes both from the broker (``group.consumer.session.timeout.ms``,
``group.consumer.heartbeat.interval.ms`` and their minimums), so the bench starts its own
``LocalKafka`` with them; against ``CLIENT_BALANCE_BOOTSTRAP_SERVERS`` it reads what that broker
has and reports it. The classic peer sets them in its client config.

Each member writes what it holds whenever that changes, and every gap between two batches that
is longer than ``PAUSE_S``. The parent waits until the 8 hold every partition once, balanced
(at most one apart), lets them run ``--steady-s``, then:

- **leave**: one member shuts down cleanly (``shutdown()`` / ``close()``); the time from the
  call to every partition held by the 7 again, and the partitions that changed holder;
- **join**: a new member starts; the time from its start to every partition held by the 8
  again, the new one included, and the partitions that changed holder;
- **crash**: one member is killed (SIGKILL); the time from the kill to every partition held by
  the 7 survivors again (the lease or session timeout is most of it), and the partitions that
  changed holder (the dead member's share included).

``pause_s`` is the longest gap in consumption, during an event, of a member that kept at least
one partition through it (0 when none was longer than ``PAUSE_S``): the stop-the-world cost the
aim is to avoid. One JSON line per case and peer mode (``peer_mode``), in the format of every
bench script: ``ours``, ``peer`` = seconds to absorb (median of ``--runs``), ``ratio`` = peer /
ours (above 1: we are faster), and the moves, pauses and single runs of both sides beside them.
The sides run alternately within each run; the load averages before and after each side's run
are listed (``load``).
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
    AdminClient,
    ConfigResource,
    ResourceType,
)
from consumer import produce  # bench/consumer.py: the benches' data
from progress_bar import advance, emit, progress, say  # bench/progress_bar.py

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, NoMessageError
from client_balance.broker import DEFAULT_KAFKA_VERSION, LocalKafka

BENCH = "elastic"
MEMBERS = 8
PAUSE_S = 0.5
SETTLE_TIMEOUT_S = 120.0
SIDES = ("kip848", "ours", "classic")
PEERS = {
    "kip848": "subscribe() group.protocol=consumer (KIP-848, broker assignor uniform)",
    "classic": "subscribe() cooperative-sticky (classic protocol)",
}
EVENTS = ("leave", "join", "crash")


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


def our_member(bootstrap: str, group: str, journal: str, args: argparse.Namespace) -> None:
    """An elastic ClientBalanceConsumer member."""
    stop = _stop_on_term()
    log = _Journal(Path(journal))
    log.note({"started": True})
    settings = ClientBalanceSettings(
        bootstrap_servers=bootstrap, group_id=group, start_position="earliest",
        reconcile_interval_s=args.beat_s, report_interval_s=args.beat_s,
        lease_timeout_s=args.lease_s, request_timeout_s=min(4.0, args.lease_s / 2),
        batch_max_messages=200,
    )  # fmt: skip
    consumer = ClientBalanceConsumer(settings)
    consumer.start([args.topic], mode="elastic")
    while not stop[0]:
        log.held({int(key.rsplit(":", 1)[1]) for key in consumer.registered_partitions()})
        try:
            batch = consumer.get_message(timeout_s=0.1)
        except NoMessageError:
            continue
        time.sleep(args.work_s)
        consumer.confirm(batch.confirm_context)
        log.batch()
    log.note({"leaving": True})
    consumer.shutdown()
    log.held(set())


def _peer_config(side: str, bootstrap: str, group: str, args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
    }  # fmt: skip
    if side == "kip848":
        # Session and heartbeat are the broker's (group.consumer.*): see broker_config().
        config["group.protocol"] = "consumer"
    else:
        config["partition.assignment.strategy"] = "cooperative-sticky"
        config["session.timeout.ms"] = int(args.lease_s * 1000)
        config["heartbeat.interval.ms"] = int(args.beat_s * 1000)
    return config


def peer_member(
    side: str, bootstrap: str, group: str, journal: str, args: argparse.Namespace
) -> None:
    """A subscribe() member: KIP-848 (``kip848``) or classic cooperative-sticky."""
    stop = _stop_on_term()
    log = _Journal(Path(journal))
    log.note({"started": True})
    held: set[int] = set()

    def assigned(consumer: Consumer, partitions: list[Any]) -> None:
        held.update(p.partition for p in partitions)

    def revoked(consumer: Consumer, partitions: list[Any]) -> None:
        held.difference_update(p.partition for p in partitions)

    consumer = Consumer(_peer_config(side, bootstrap, group, args))
    consumer.subscribe([args.topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    while not stop[0]:
        messages = consumer.consume(num_messages=200, timeout=0.1)
        log.held(held)
        if any(m.error() is None for m in messages):
            time.sleep(args.work_s)
            log.batch()
    log.note({"leaving": True})
    consumer.close()
    log.held(set())


def _member(side: str, bootstrap: str, group: str, journal: str, args: argparse.Namespace) -> None:
    if side == "ours":
        our_member(bootstrap, group, journal, args)
    else:
        peer_member(side, bootstrap, group, journal, args)


# ------------------------------------------------------------------------------ the parent
class Run:
    """One side's group of member processes and their journals."""

    def __init__(self, side: str, args: argparse.Namespace, bootstrap: str, folder: Path) -> None:
        self.side, self.args, self.bootstrap, self.folder = side, args, bootstrap, folder
        self.group = f"bench-elastic-{side}-{uuid.uuid4().hex[:8]}"
        self.members: dict[int, multiprocessing.Process] = {}

    def journal(self, index: int) -> Path:
        """Member ``index``'s journal file."""
        return self.folder / f"{self.side}-{self.group}-{index}.jsonl"

    def spawn(self, index: int) -> None:
        """Start member ``index``."""
        process = multiprocessing.Process(
            target=_member,
            args=(self.side, self.bootstrap, self.group, str(self.journal(index)), self.args),
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

    def event(
        self, live: set[int], act: Callable[[], float], must_hold: int | None = None
    ) -> dict[str, Any]:
        """Settle, run ``act`` (it returns when the event began), wait until absorbed."""
        time.sleep(self.args.steady_s)
        before = self.wait_settled(live - {must_hold} if must_hold is not None else live)
        began = act()
        after = self.wait_settled(live, must_hold)
        ended = time.time()
        kept = {i for i in live if any(after[p] == i for p, o in before.items() if o == i)}
        return {
            "s": ended - began,
            "moved": sum(1 for p in before if after[p] != before[p]),
            "pause_s": self.pause(live, began, ended, kept),
        }

    def measure(self) -> dict[str, Any]:
        """Settle 8, take one away, add one, kill one; the absorb times, moves and pauses."""
        for index in range(MEMBERS):
            self.spawn(index)
        live = set(range(MEMBERS))
        self.wait_settled(live)
        results: dict[str, Any] = {}

        def leave() -> float:
            left_at = time.time()
            self.members[min(live)].terminate()
            live.discard(min(live))
            return left_at

        results["leave"] = self.event(live, leave)

        def join() -> float:
            self.spawn(MEMBERS)
            live.add(MEMBERS)
            return self._started_at(MEMBERS)

        results["join"] = self.event(live, join, must_hold=MEMBERS)

        def crash() -> float:
            killed_at = time.time()
            self.members[min(live)].kill()
            live.discard(min(live))
            return killed_at

        results["crash"] = self.event(live, crash)
        self.stop_all()
        return results

    def _started_at(self, index: int) -> float:
        deadline = time.time() + 30
        while time.time() < deadline:
            for entry in self.entries(index):
                if entry.get("started"):
                    return float(entry["t"])
            time.sleep(0.01)
        raise RuntimeError(f"{self.side}: member {index} did not start")


# ------------------------------------------------------------------------------ the broker
def broker_config(args: argparse.Namespace) -> dict[str, str]:
    """KIP-848's liveness is the broker's: session and heartbeat equal to ours."""
    session, beat = str(int(args.lease_s * 1000)), str(int(args.beat_s * 1000))
    return {
        "group.consumer.session.timeout.ms": session,
        "group.consumer.min.session.timeout.ms": session,
        "group.consumer.heartbeat.interval.ms": beat,
        "group.consumer.min.heartbeat.interval.ms": beat,
    }


@contextmanager
def broker(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """The env's cluster as it is, or a fresh LocalKafka with ``broker_config``."""
    given = os.environ.get("CLIENT_BALANCE_BOOTSTRAP_SERVERS")
    if given:
        yield given, "CLIENT_BALANCE_BOOTSTRAP_SERVERS"
        return
    with LocalKafka(config=broker_config(args)) as kafka:
        yield kafka.bootstrap_servers, f"LocalKafka kafka-{DEFAULT_KAFKA_VERSION}"


def kip848_liveness(bootstrap: str) -> dict[str, float]:
    """The broker's KIP-848 session timeout and heartbeat interval, in seconds."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    node = min(admin.list_topics(timeout=10).brokers)
    resource = ConfigResource(ResourceType.BROKER, str(node))
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    return {
        "peer_session_s": int(configs["group.consumer.session.timeout.ms"].value) / 1000,
        "peer_heartbeat_s": int(configs["group.consumer.heartbeat.interval.ms"].value) / 1000,
    }


# ------------------------------------------------------------------------------ main
def _line(
    event: str, peer: str, results: dict[str, list[dict[str, Any]]], extra: dict[str, Any]
) -> dict[str, Any]:
    ours = [r[event] for r in results["ours"]]
    theirs = [r[event] for r in results[peer]]
    ours_s = statistics.median(e["s"] for e in ours)
    peer_s = statistics.median(e["s"] for e in theirs)
    return {
        "bench": BENCH, "case": f"group-of-{MEMBERS}-{event}",
        "ours": round(ours_s, 3), "peer": round(peer_s, 3),
        "peer_name": f"confluent-kafka-{confluent_kafka.__version__} {PEERS[peer]}",
        "peer_mode": peer, "unit": "s", "ratio": round(peer_s / ours_s, 2),
        "ours_moved": [e["moved"] for e in ours], "peer_moved": [e["moved"] for e in theirs],
        "ours_pause_s": [round(e["pause_s"], 2) for e in ours],
        "peer_pause_s": [round(e["pause_s"], 2) for e in theirs],
        "ours_runs": [round(e["s"], 3) for e in ours],
        "peer_runs": [round(e["s"], 3) for e in theirs],
        **extra,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run every side ``--runs`` times, alternating; print one JSON line per event and peer."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=48)
    parser.add_argument("--messages", type=int, default=4_000_000)
    parser.add_argument("--work-s", type=float, default=0.02, help="work per batch of 200")
    parser.add_argument("--steady-s", type=float, default=3.0, help="wait between events")
    parser.add_argument("--lease-s", type=float, default=10.0, help="lease = session timeout")
    parser.add_argument("--beat-s", type=float, default=1.0, help="report = heartbeat interval")
    parser.add_argument(
        "--side", action="append", choices=SIDES, default=[], help="run only these (repeatable)"
    )
    parser.add_argument("--folder", type=Path, default=None, help="keep the journals here")
    args = parser.parse_args(argv)
    sides = [side for side in SIDES if side in args.side] if args.side else list(SIDES)
    if args.folder is None:
        args.folder = Path(tempfile.mkdtemp(prefix="client-balance-bench-elastic-"))
    args.folder.mkdir(parents=True, exist_ok=True)
    with broker(args) as (bootstrap, broker_name):
        liveness = kip848_liveness(bootstrap)
        print(json.dumps({
            "bench": BENCH, "broker": broker_name, "cores": os.cpu_count(),
            "librdkafka": confluent_kafka.libversion()[0], "ours_lease_s": args.lease_s,
            "ours_report_s": args.beat_s, "classic_session_s": args.lease_s,
            "classic_heartbeat_s": args.beat_s, **liveness,
        }))  # fmt: skip
        args.topic = f"bench-elastic-{args.partitions}p-{uuid.uuid4().hex[:6]}"
        produce(bootstrap, args.topic, args.partitions, args.messages, 100)
        results: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        load: dict[str, list[str]] = {side: [] for side in sides}
        with progress("elastic", args.runs * len(sides)):
            for number in range(args.runs):
                # Rotate the order so that no side always runs first on a fresh page cache.
                for side in sides[number % len(sides) :] + sides[: number % len(sides)]:
                    run = Run(side, args, bootstrap, args.folder)
                    load[side].append(Path("/proc/loadavg").read_text().rsplit(" ", 2)[0])
                    try:
                        results[side].append(run.measure())
                    except (RuntimeError, KafkaException) as error:
                        run.stop_all()
                        say(f"{side} run failed: {error}")
                        return 1
                    emit(json.dumps({"bench": BENCH, "run": number, "side": side,
                                     **results[side][-1]}))  # fmt: skip
                    advance(f"run {number + 1} {side}")
        for event in EVENTS:
            for peer in (side for side in sides if side != "ours"):
                if "ours" not in results:
                    continue
                extra = {
                    "partitions": args.partitions, "runs": args.runs,
                    "load": {"ours": load["ours"], "peer": load[peer]},
                    **({"ours_lease_s": args.lease_s,
                        "peer_session_s": liveness["peer_session_s"] if peer == "kip848"
                        else args.lease_s} if event == "crash" else {}),
                }  # fmt: skip
                print(json.dumps(_line(event, peer, results, extra)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
