r"""A worker for the design card's use cases: pins, assignment callbacks, lifecycle hooks.

Run as::

    python -m tests.integration.usecase_worker --bootstrap B --group G --topics T1,T2 \
        --source-count N --node-id I [--mode M] --out FILE [--pin KEY[=OFFSET] ...] \
        [--assigner route_by_topic|weight_by_lag] [--state-dir DIR] [--stop-after-idle-s S]

It writes ``"<topic> <partition> <offset>"`` per consumed message to ``FILE`` (flushed before
the batch is confirmed), ``FILE.hooks`` with one line per hook call (``assigned``, ``revoked``,
``lost``, each ``key=offset``), and ``FILE.held`` with the keys it holds (JSON, replaced
atomically).

With ``--state-dir`` it is a stateful application that must count every message exactly once
across members, using the hooks as Kafka's ``ConsumerRebalanceListener`` is used: a partition's
state (``count``, ``next`` offset) lives in ``DIR/<topic>-<partition>.json``. ``on_assigned``
loads it, ``on_revoked`` writes it (before the SDK's final commit), ``on_lost`` drops it
unwritten. Every ``--checkpoint-every`` batches the worker writes all its states and only then
calls ``commit()`` (``commit_interval_s`` is an hour), so the committed offset never passes a
written state; messages below a state's ``next`` are skipped, so what a SIGKILL sends again is
not counted twice.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import TextIO

from client_balance import (
    ClientBalanceConsumer,
    ClientBalanceSettings,
    ConsumeResult,
    InvalidConfirmContextError,
    PartitionKey,
)
from tests.integration.consumer_worker import results_until_idle

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples"))
import assigners  # noqa: E402 - the examples folder is not a package; its path comes first

HELD_EVERY_S = 0.2


def hooks_path(out: Path) -> Path:
    """The hook log next to an output file."""
    return out.with_name(out.name + ".hooks")


def held_path(out: Path) -> Path:
    """The held-keys sidecar next to an output file."""
    return out.with_name(out.name + ".held")


def read_lines(out: Path) -> list[tuple[str, int, int]]:
    """The ``(topic, partition, offset)`` lines of an output file (a torn last line skipped)."""
    if not out.exists():
        return []
    records = []
    for line in out.read_text().splitlines(keepends=True):
        fields = line.split()
        if line.endswith("\n") and len(fields) == 3:
            records.append((fields[0], int(fields[1]), int(fields[2])))
    return records


def read_hooks(out: Path) -> list[tuple[str, dict[str, int]]]:
    """Every hook call logged: ``(hook, {"topic:partition": offset})``."""
    try:
        text = hooks_path(out).read_text()
    except FileNotFoundError:
        return []
    calls = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            continue
        hook, *pairs = line.split()
        calls.append((hook, {k: int(v) for k, v in (pair.rsplit("=", 1) for pair in pairs)}))
    return calls


def read_held(out: Path) -> set[str]:
    """``"topic:partition"`` of what the worker holds now (empty before the first write)."""
    try:
        return set(json.loads(held_path(out).read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return set()


def read_states(state_dir: Path) -> dict[str, dict[str, int]]:
    """Every written partition state: ``{"topic:partition": {"count": n, "next": offset}}``."""
    states = {}
    for path in sorted(state_dir.glob("*.json")):
        topic, _, partition = path.stem.rpartition("-")
        states[f"{topic}:{partition}"] = json.loads(path.read_text())
    return states


def _identity(key: str) -> str:
    return str(PartitionKey.parse(key).topic_partition)


class StatefulCounter:
    """Per-partition counts kept with the hooks (module docstring)."""

    def __init__(self, state_dir: Path | None, hook_log: TextIO) -> None:
        self.state_dir = state_dir
        """None: only log the hooks (no state is kept or written)."""
        self.hook_log = hook_log
        self.lock = threading.Lock()
        self.states: dict[str, dict[str, int]] = {}

    def log(self, hook: str, positions: Mapping[str, int]) -> None:
        """One line in the hook log."""
        pairs = " ".join(f"{_identity(k)}={v}" for k, v in positions.items())
        self.hook_log.write(f"{hook} {pairs}\n")
        self.hook_log.flush()

    def assigned(self, positions: Mapping[str, int]) -> None:
        """Load the states of partitions that arrive."""
        with self.lock:
            self.log("assigned", positions)
            for key in positions:
                state = {"count": 0, "next": 0}
                if self.state_dir is not None and self._path(_identity(key)).exists():
                    state = json.loads(self._path(_identity(key)).read_text())
                self.states[_identity(key)] = state

    def revoked(self, positions: Mapping[str, int]) -> None:
        """Write the states of partitions that leave, then forget them."""
        with self.lock:
            self.log("revoked", positions)
            for key in positions:
                state = self.states.pop(_identity(key), None)
                if state is not None:
                    self._write(_identity(key), state)

    def lost(self, positions: Mapping[str, int]) -> None:
        """Forget the states of partitions taken away: another member owns them now."""
        with self.lock:
            self.log("lost", positions)
            for key in positions:
                self.states.pop(_identity(key), None)

    def count(self, result: ConsumeResult) -> None:
        """Count the batch's messages not counted before."""
        with self.lock:
            state = self.states[f"{result.topic}:{result.partition}"]
            for message in result.messages:
                offset = message.offset() or 0  # a consumed message always has one
                if offset >= state["next"]:
                    state["count"] += 1
                    state["next"] = offset + 1

    def checkpoint(self) -> None:
        """Write every state held (the caller commits after this)."""
        with self.lock:
            for identity, state in sorted(self.states.items()):
                self._write(identity, state)

    def _path(self, identity: str) -> Path:
        assert self.state_dir is not None
        topic, _, partition = identity.rpartition(":")
        return self.state_dir / f"{topic}-{partition}.json"

    def _write(self, identity: str, state: dict[str, int]) -> None:
        if self.state_dir is None:
            return
        path = self._path(identity)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(state))
        partial.replace(path)


class Worker:
    """The consume loop; see the module docstring."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out_path = Path(args.out)
        self.stop = False
        self.batches = 0
        self.held_written_at = 0.0
        self.settings = ClientBalanceSettings(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            start_position="earliest",
            commit="interval" if args.state_dir else "sync",
            commit_interval_s=3600.0,
            reconcile_interval_s=1.0,
            batch_max_messages=args.batch_max,
            lease_timeout_s=args.lease_timeout_s,
            report_interval_s=min(1.0, args.lease_timeout_s / 3),
            request_timeout_s=args.lease_timeout_s / 3,
        )

    def run(self) -> int:
        """Consume until SIGTERM or idle; the exit code."""
        hook_log = hooks_path(self.out_path).open("a")
        state_dir = Path(self.args.state_dir) if self.args.state_dir else None
        counter = StatefulCounter(state_dir, hook_log)
        hooks = {"on_assigned": counter.assigned, "on_revoked": counter.revoked}
        hooks["on_lost"] = counter.lost
        assigner = getattr(assigners, self.args.assigner) if self.args.assigner else None
        consumer = ClientBalanceConsumer(self.settings, assigner=assigner, **hooks)
        pins = dict(_pin(text) for text in self.args.pin)
        with self.out_path.open("a") as out, hook_log, consumer:
            consumer.start(
                self.args.topics.split(","), self.args.source_count, self.args.node_id,
                mode=self.args.mode, pinned=pins,
            )  # fmt: skip
            _say("started")
            for result in results_until_idle(
                consumer, lambda: self.stop, self.args.stop_after_idle_s,
                on_each_wait=lambda: self.write_held(consumer),
            ):  # fmt: skip
                self.handle(consumer, counter, result, out)
            self.write_held(consumer, force=True)
        _say(f"done after {self.batches} batches")
        return 0

    def handle(
        self,
        consumer: ClientBalanceConsumer,
        counter: StatefulCounter,
        result: ConsumeResult,
        out: TextIO,
    ) -> None:
        """Write and flush the batch's lines, count it, confirm it; checkpoint now and then."""
        out.writelines(
            f"{result.topic} {result.partition} {message.offset()}\n" for message in result.messages
        )
        out.flush()
        if self.args.state_dir:
            counter.count(result)
        try:
            consumer.confirm(result.confirm_context)
        except InvalidConfirmContextError:
            _say(f"batch {result.confirm_context} was rolled back")
            return
        self.batches += 1
        if self.args.state_dir and self.batches % self.args.checkpoint_every == 0:
            counter.checkpoint()
            consumer.commit()

    def write_held(self, consumer: ClientBalanceConsumer, *, force: bool = False) -> None:
        """Replace the sidecar with the keys held now (at most every HELD_EVERY_S)."""
        now = time.monotonic()
        if not force and now - self.held_written_at < HELD_EVERY_S:
            return
        self.held_written_at = now
        held = sorted(_identity(key) for key in consumer.registered_partitions())
        target = held_path(self.out_path)
        partial = target.with_name(target.name + ".partial")
        partial.write_text(json.dumps(held))
        partial.replace(target)

    def on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """Ask the loop to stop; the consumer then shuts down and commits."""
        self.stop = True


def _pin(text: str) -> tuple[str, int]:
    key, _, offset = text.partition("=")
    return key, int(offset) if offset else -1


def _say(text: str) -> None:
    print(f"[usecase worker {os.getpid()}] {text}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line of a worker."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topics", required=True, help="comma-separated topic names")
    parser.add_argument("--source-count", type=int, required=True)
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--mode", choices=["node", "manual", "elastic"], default=None)
    parser.add_argument("--out", required=True)
    parser.add_argument("--pin", action="append", default=[], help="KEY or KEY=OFFSET")
    parser.add_argument("--assigner", choices=["route_by_topic", "weight_by_lag"], default=None)
    parser.add_argument("--state-dir", default=None)
    parser.add_argument("--checkpoint-every", type=int, default=5)
    parser.add_argument("--stop-after-idle-s", type=float, default=None)
    parser.add_argument("--batch-max", type=int, default=100)
    parser.add_argument("--lease-timeout-s", type=float, default=6.0)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker."""
    worker = Worker(parse_args(argv))
    signal.signal(signal.SIGTERM, worker.on_sigterm)
    return worker.run()


if __name__ == "__main__":
    sys.exit(main())
