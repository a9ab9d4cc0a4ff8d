"""A client-balanced worker: node ``I`` of ``N`` consumes its share of a group's topics.

    python examples/worker.py --bootstrap 127.0.0.1:9092 --group billing
        --topics orders,stock --source-count 3 --node-id 0
        [--mode elastic (instead of the two above)]
        [--strategy modulo] [--filter orders=created,paid]
        [--summary-every 10] [--report node0.json] [--pause-per-batch-s 0.1]

Start the same command once per node (node ids ``0 .. N-1``); each one holds exactly its
partitions, consumes them in batches that it confirms, and resumes where the group left off.
It prints one summary line every ``--summary-every`` seconds (partitions held, messages,
lag) and stops cleanly on Ctrl-C or SIGTERM: the batch in hand is finished and confirmed,
confirmed positions are committed, the partitions are released. A second Ctrl-C stops at once.

``--bootstrap`` defaults to ``CLIENT_BALANCE_BOOTSTRAP_SERVERS`` and ``--group`` to
``CLIENT_BALANCE_GROUP_ID``; every other setting comes from its ``CLIENT_BALANCE_<FIELD>``
variable (``CLIENT_BALANCE_START_POSITION=earliest``, ``CLIENT_BALANCE_COMMIT=sync`` ...).
``--report`` writes, at exit and at each summary line, a JSON file with what was confirmed per
partition: message counts and the offset runs, which ``examples/demo.py`` uses to prove that
every event was consumed exactly once (a SIGKILLed node leaves its last one). A demo slows the
worker down with ``--pause-per-batch-s``. Only the public API of ``client_balance`` is used.
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
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from client_balance import (
    Batch,
    ClientBalanceConsumer,
    ClientBalanceError,
    ClientBalanceSettings,
    ConfigError,
    ConsumeResult,
    InvalidConfirmContextError,
    KafkaClientError,
)

Topics = dict[str, set[str] | None]
_CONFIRM_ATTEMPTS = 3


@dataclass(slots=True)
class PartitionTally:
    """What this node consumed and confirmed from one partition."""

    messages: int = 0
    json_values: int = 0
    runs: list[list[int]] = field(default_factory=list)
    """Offsets consumed, as ``[start, end)`` runs in the order they came."""

    def add(self, offset: int) -> None:
        """Count one message at ``offset``."""
        self.messages += 1
        if self.runs and self.runs[-1][1] == offset:
            self.runs[-1][1] = offset + 1
        else:
            self.runs.append([offset, offset + 1])


class Tally:
    """Per-partition counts, shared by the consuming loop and the summary thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partitions: dict[str, PartitionTally] = {}
        self.batches = 0
        self.rolled_back = 0

    def add_batch(self, result: ConsumeResult, json_values: int) -> None:
        """Count a confirmed batch."""
        with self._lock:
            tally = self._partitions.setdefault(
                f"{result.topic}:{result.partition}", PartitionTally()
            )
            for message in result.messages:
                offset = message.offset()
                if offset is not None:
                    tally.add(offset)
            tally.json_values += json_values
            self.batches += 1

    def messages(self) -> int:
        """Messages consumed and confirmed so far."""
        with self._lock:
            return sum(tally.messages for tally in self._partitions.values())

    def as_json(self) -> dict[str, Any]:
        """Everything counted, by ``topic:partition``."""
        with self._lock:
            return {
                key: {"messages": t.messages, "json_values": t.json_values, "runs": t.runs}
                for key, t in sorted(self._partitions.items())
            }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; ``--bootstrap`` and ``--group`` fall back to the environment."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("CLIENT_BALANCE_BOOTSTRAP_SERVERS"),
        help="host:port list of the brokers (default: $CLIENT_BALANCE_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument(
        "--group",
        default=os.environ.get("CLIENT_BALANCE_GROUP_ID"),
        help="the group id; never use it with subscribe() consumers "
        "(default: $CLIENT_BALANCE_GROUP_ID)",
    )
    parser.add_argument("--topics", required=True, help="comma-separated topic names")
    parser.add_argument(
        "--source-count", type=int, default=-1, help="nodes in the group (node mode)"
    )
    parser.add_argument("--node-id", type=int, default=-1, help="this node, 0 .. N-1")
    parser.add_argument(
        "--mode",
        choices=["node", "elastic"],
        help="group mode (default: node when --source-count > 0); elastic members count "
        "themselves from the live members",
    )
    parser.add_argument(
        "--strategy", help="assignment strategy (default: $CLIENT_BALANCE_STRATEGY or modulo)"
    )
    parser.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="TOPIC=V1,V2",
        help="consume only messages of TOPIC whose filter header is one of the values (repeatable)",
    )
    parser.add_argument(
        "--summary-every",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds between summary lines (default: 10)",
    )
    parser.add_argument(
        "--pause-per-batch-s", type=float, default=0.0, metavar="SECONDS",
        help="seconds each batch's processing takes before its confirm (a demo's throttle)",
    )  # fmt: skip
    parser.add_argument("--report", type=Path, help="JSON report, written at each summary and exit")
    args = parser.parse_args(argv)
    if not args.bootstrap:
        parser.error("--bootstrap is required (or set CLIENT_BALANCE_BOOTSTRAP_SERVERS)")
    if not args.group:
        parser.error("--group is required (or set CLIENT_BALANCE_GROUP_ID)")
    if args.summary_every <= 0 or args.pause_per_batch_s < 0:
        parser.error("--summary-every must be > 0 and --pause-per-batch-s >= 0")
    return args


def parse_topics(topics: str, filters: Sequence[str]) -> Topics:
    """``"orders,stock"`` and ``["orders=created,paid"]`` -> topic -> filter set or None."""
    parsed: Topics = {name.strip(): None for name in topics.split(",") if name.strip()}
    for item in filters:
        topic, sep, values = item.partition("=")
        topic = topic.strip()
        if not sep or topic not in parsed:
            raise ConfigError(
                f"--filter {item!r} is not allowed; use TOPIC=V1,V2 with a topic of --topics "
                f"({', '.join(parsed)})"
            )
        chosen = parsed[topic] or set()
        chosen.update(value.strip() for value in values.split(","))
        parsed[topic] = chosen
    return parsed


def json_values(result: ConsumeResult) -> int:
    """How many of the batch's values are JSON objects (what real processing would parse)."""
    parsed = 0
    for message in result.messages:
        value = message.value()
        if value is None:
            continue
        try:
            document = json.loads(value)
        except ValueError:
            continue
        parsed += isinstance(document, dict)
    return parsed


@dataclass(slots=True)
class Node:
    """One running node: its consumer, what it counted, and how it is told to stop."""

    name: str
    consumer: ClientBalanceConsumer
    tally: Tally = field(default_factory=Tally)
    stop: threading.Event = field(default_factory=threading.Event)
    busy: threading.Lock = field(default_factory=threading.Lock)
    """Held while a batch is in hand, so that the shutdown waits for its confirm."""
    errors: list[ClientBalanceError] = field(default_factory=list)
    pause_per_batch_s: float = 0.0
    report: Path | None = None


def summary_line(node: Node, began: float) -> str:
    """One line: partitions held, messages confirmed, rate, and lag."""
    infos = node.consumer.offset_infos()
    lags = [info.lag for info in infos.values() if info.lag is not None]
    lag = f"{sum(lags):,}" if len(lags) == len(infos) else f">={sum(lags):,}"
    messages = node.tally.messages()
    rate = messages / max(time.monotonic() - began, 1e-9)
    return (
        f"{node.name}: {len(infos)} partitions held, {messages:,} messages "
        f"({rate:,.0f}/s), {node.tally.batches:,} batches, lag {lag}"
    )


def consume(node: Node) -> ClientBalanceError | None:
    """Process and confirm batches until stopped; return the error that ended it, if any."""
    consumer, tally = node.consumer, node.tally
    while not node.stop.is_set():
        try:
            for batch in consumer.batches():
                with node.busy:  # no shutdown while a batch is in hand
                    if consumer.is_shutdown():
                        return None  # handed out as the shutdown began: rolled back, comes again
                    parsed = json_values(batch.result)
                    if node.pause_per_batch_s:
                        node.stop.wait(node.pause_per_batch_s)
                    if confirm(node, batch):
                        tally.add_batch(batch.result, parsed)
                    else:
                        tally.rolled_back += 1
                if node.stop.is_set():
                    break
            else:
                return None  # batches() ends when the consumer is shut down
        except KafkaClientError as error:
            # A failed reconcile round or commit: the consumer goes on, and so do we.
            print(f"{node.name}: {error}; continuing", file=sys.stderr)
            node.stop.wait(1.0)
        except ClientBalanceError as error:
            return error  # GroupInUseError, an invalid assignment ...: nothing to retry
    return None


def confirm(node: Node, batch: Batch) -> bool:
    """Confirm ``batch``: True once it is confirmed, False if it was rolled back meanwhile.

    A confirm may raise a ``KafkaClientError`` that was not about this batch: the consumer
    reports a failed background step (a reconcile round, an interval commit) on the next call
    of any thread, before that call does its work. So a ``KafkaClientError`` is retried. With
    ``commit="sync"`` the error can also come from the commit after the batch was confirmed;
    the retry then finds the batch gone, which here means "confirmed, commit pending" (the
    next commit carries the position).
    """
    for attempt in range(_CONFIRM_ATTEMPTS):
        try:
            batch.confirm()
        except InvalidConfirmContextError:
            # First try: the partition was released meanwhile and the batch rolled back; its
            # next holder gets these messages again. A retry: the failed try had confirmed it.
            return attempt > 0
        except KafkaClientError as error:
            if attempt + 1 == _CONFIRM_ATTEMPTS:
                raise
            print(f"{node.name}: {error}; confirming again", file=sys.stderr)
            continue
        return True
    return False  # not reached: the last attempt returns or raises


def report_and_stop(node: Node, every_s: float) -> None:
    """Print a summary every ``every_s``; once stopped, shut the consumer down."""
    began = time.monotonic()
    while not node.stop.wait(every_s):
        try:
            print(summary_line(node, began), flush=True)
            if node.report is not None:  # a SIGKILLed node leaves what it had confirmed
                write_report(node.report, node, time.monotonic() - began)
        except KafkaClientError as error:
            print(f"{node.name}: {error}; continuing", file=sys.stderr)
        except ClientBalanceError as error:
            node.errors.append(error)
            node.stop.set()
    with node.busy:  # after the batch in hand is confirmed; batches() then ends
        try:
            node.consumer.shutdown()
        except ClientBalanceError as error:
            node.errors.append(error)


def install_signal_handlers(stop: threading.Event) -> None:
    """SIGINT and SIGTERM ask for a clean stop; a second one stops at once."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        print(f"\n{signal.Signals(signum).name}: stopping (again to force)", file=sys.stderr)
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)


def settings_of(args: argparse.Namespace) -> ClientBalanceSettings:
    """Settings from the command line, the rest from ``CLIENT_BALANCE_*``."""
    given: dict[str, Any] = {"bootstrap_servers": args.bootstrap, "group_id": args.group}
    if args.strategy is not None:
        given["strategy"] = args.strategy
    return ClientBalanceSettings(**given)


def write_report(path: Path, node: Node, seconds: float) -> None:
    """The JSON report: who this node was and what it consumed."""
    consumer, tally = node.consumer, node.tally
    report: Mapping[str, Any] = {
        "node_id": consumer.node_id,
        "source_count": consumer.source_count,
        "consumer_id": consumer.consumer_id,
        "seconds": round(seconds, 3),
        "ok": not node.errors,
        "batches": tally.batches,
        "rolled_back": tally.rolled_back,
        "partitions": tally.as_json(),
    }
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(report))
    temporary.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one node until SIGINT/SIGTERM: 0 on a clean stop, 1 on an error, 2 on bad input."""
    args = parse_args(argv)
    try:
        topics = parse_topics(args.topics, args.filter)
        settings = settings_of(args)
    except ConfigError as error:
        print(f"worker: {error}", file=sys.stderr)
        return 2
    began = time.monotonic()
    try:
        with ClientBalanceConsumer(settings) as consumer:
            node = Node(f"node {args.node_id}", consumer, pause_per_batch_s=args.pause_per_batch_s)
            node.report = args.report
            install_signal_handlers(node.stop)
            try:
                consumer.start(
                    topics, source_count=args.source_count, node_id=args.node_id, mode=args.mode
                )
            except ClientBalanceError as error:
                print(f"worker: cannot start: {error}", file=sys.stderr)
                return 2 if isinstance(error, ConfigError) else 1
            print(
                f"{node.name} of {args.source_count} in group {settings.group_id!r} started "
                f"({settings.strategy}; topics {', '.join(topics)})",
                flush=True,
            )
            reporter = threading.Thread(
                target=report_and_stop,
                args=(node, args.summary_every),
                name="worker-summary",
                daemon=True,  # a forced stop (second Ctrl-C) must not wait for it
            )
            reporter.start()
            try:
                failure = consume(node)
            finally:
                node.stop.set()
                reporter.join()
            if failure is not None:
                node.errors.insert(0, failure)
    except KeyboardInterrupt:
        print(
            f"node {args.node_id}: forced stop; what was not committed comes again", file=sys.stderr
        )
        return 130
    seconds = time.monotonic() - began
    print(
        f"{node.name}: stopped after {seconds:.1f} s; {node.tally.messages():,} messages in "
        f"{node.tally.batches:,} confirmed batches",
        flush=True,
    )
    for problem in node.errors:
        print(f"{node.name}: {type(problem).__name__}: {problem}", file=sys.stderr)
    if args.report is not None:
        write_report(args.report, node, seconds)
    return 1 if node.errors else 0


if __name__ == "__main__":
    sys.exit(main())
