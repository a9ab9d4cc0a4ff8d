r"""One node of a client-balanced group in a process of its own, for the multi-process tests.

Run as::

    python -m tests.integration.consumer_worker --bootstrap B --group G --topic T \
        --source-count N --node-id I [--mode M] --out FILE [--stop-after-idle-s S]

It consumes ``T`` with :class:`ClientBalanceConsumer` as node ``I`` of ``N``
(``start_position="earliest"``, ``commit="sync"``) and writes three files:

- ``FILE``: one line ``"<partition> <offset>"`` per consumed message, flushed **before** the
  batch is confirmed. ``commit="sync"`` commits at every confirm, so (while the broker answers)
  the confirmed and the committed positions are the same: a SIGKILL can only lose the lines of
  a batch that was out unconfirmed, and exactly that batch is delivered again to the next
  holder. (With ``commit="interval"`` a kill would also repeat confirmed batches not committed
  yet, which is allowed, but would hide which duplicates a kill may cause.)
- ``FILE.batches``: ``"out <partition> <start> <end>"`` before a batch's lines are written, and
  ``"confirmed <partition> <end> <1|0>"`` once its confirm returned (1: committed at once). A
  batch with an ``out`` line and no ``confirmed`` line may have been confirmed just before a
  kill; never the other way round.
- ``FILE.held``: JSON ``{"held": [...], "ever": [...], "batches": n}``, the partitions held now
  and ever held by this process, replaced atomically every ``HELD_EVERY_S``.

It stops on SIGTERM (shutting the consumer down, which commits) or after ``--stop-after-idle-s``
seconds without a message. It handles no Kafka error: the consumer is meant to ride out a
broker outage by itself, so any error it raises ends the process with a non-zero code.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TextIO

from client_balance import (
    ClientBalanceConsumer,
    ClientBalanceSettings,
    ConsumeResult,
    InvalidConfirmContextError,
    NoMessageError,
    PartitionKey,
)

HELD_EVERY_S = 0.2


def batches_path(out: Path) -> Path:
    """The batch log next to an output file."""
    return out.with_name(out.name + ".batches")


def held_path(out: Path) -> Path:
    """The held-partitions sidecar next to an output file."""
    return out.with_name(out.name + ".held")


def read_records(out: Path) -> list[tuple[int, int]]:
    """The ``(partition, offset)`` lines of an output file (a torn last line is skipped)."""
    if not out.exists():
        return []
    records = []
    for line in out.read_text().splitlines(keepends=True):
        fields = line.split()
        if line.endswith("\n") and len(fields) == 2:  # "<partition> <offset>"
            records.append((int(fields[0]), int(fields[1])))
    return records


def count_records(out: Path) -> int:
    """How many complete lines an output file has (cheap, for polling)."""
    try:
        return out.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def open_batches(out: Path) -> list[tuple[int, int, int]]:
    """``(partition, start, end)`` of the batches logged as out and never as confirmed."""
    out_now: dict[int, tuple[int, int, int]] = {}
    for fields in _batch_log(out):
        if fields[0] == "out":
            partition, start, end = (int(field) for field in fields[1:4])
            out_now[partition] = (partition, start, end)
        elif fields[0] == "confirmed":
            out_now.pop(int(fields[1]), None)
    return sorted(out_now.values())


def confirms(out: Path) -> list[tuple[int, int, bool]]:
    """``(partition, end, committed at once)`` of every confirm the batch log records."""
    return [
        (int(fields[1]), int(fields[2]), fields[3] == "1")
        for fields in _batch_log(out)
        if fields[0] == "confirmed"
    ]


def _ms() -> int:
    # Wall-clock ms, the clock of the broker's LogAppendTime on this same host: the history
    # checker orders these lines against the status topic's claims.
    return int(time.time() * 1000)


def timed_batch_events(out: Path) -> list[tuple[str, int, int, int, int]]:
    """:func:`batch_events` with each line's wall-clock time (ms) last."""
    return [
        (fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[4]))
        for fields in _batch_log(out)
        if len(fields) >= 5
    ]


def batch_events(out: Path) -> list[tuple[str, int, int, int]]:
    """Every batch-log line in order, as ``(kind, partition, position, flag)``.

    ``("out", partition, start, end)`` or ``("confirmed", partition, position, committed)``
    with ``committed`` 1 when the confirm committed at once.
    """
    return [(fields[0], *(int(field) for field in fields[1:4])) for fields in _batch_log(out)]  # type: ignore[misc]


def count_confirmed(out: Path) -> int:
    """How many batches the batch log records as confirmed."""
    try:
        return batches_path(out).read_text().count("confirmed ")
    except FileNotFoundError:
        return 0


def _batch_log(out: Path) -> list[list[str]]:
    try:
        text = batches_path(out).read_text()
    except FileNotFoundError:
        return []
    return [line.split() for line in text.splitlines(keepends=True) if line.endswith("\n")]


def last_batch_line(out: Path) -> str:
    """The last complete line of the batch log, or ``""``."""
    try:
        text = batches_path(out).read_text()
    except FileNotFoundError:
        return ""
    lines = [line for line in text.splitlines(keepends=True) if line.endswith("\n")]
    return lines[-1].strip() if lines else ""


def read_held(out: Path) -> tuple[set[int], set[int]]:
    """(held now, ever held) partitions from the sidecar; empty sets before the first write."""
    try:
        data = json.loads(held_path(out).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return set(), set()
    return set(data["held"]), set(data["ever"])


class Worker:
    """The consume loop; see the module docstring."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out_path = Path(args.out)
        self.stop = False
        self.ever: set[int] = set()
        self.batches = 0
        self.held_written_at = 0.0
        self.settings = ClientBalanceSettings(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            start_position="earliest",
            commit="sync",
            reconcile_interval_s=args.reconcile_interval_s,
            batch_max_messages=args.batch_max,
            lease_timeout_s=args.lease_timeout_s,
            report_interval_s=min(1.0, args.lease_timeout_s / 3),
            request_timeout_s=args.lease_timeout_s / 3,
            **({"status_topic": args.status_topic} if args.status_topic else {}),
        )

    def run(self) -> int:
        """Consume until SIGTERM or idle; the exit code."""
        with (
            self.out_path.open("a") as out,
            batches_path(self.out_path).open("a") as log,
            ClientBalanceConsumer(self.settings) as consumer,
        ):
            _say("starting")
            consumer.start(
                [self.args.topic], self.args.source_count, self.args.node_id, mode=self.args.mode
            )
            _say("started")
            for result in results_until_idle(
                consumer, lambda: self.stop, self.args.stop_after_idle_s,
                on_each_wait=lambda: self.write_held(consumer),
            ):  # fmt: skip
                self.handle(consumer, result, out, log)
            self.write_held(consumer, force=True)
        _say(f"node {self.args.node_id} done after {self.batches} batches")
        return 0

    def handle(
        self, consumer: ClientBalanceConsumer, result: ConsumeResult, out: TextIO, log: TextIO
    ) -> None:
        """Log the batch as out, write and flush its lines, then confirm it and log that."""
        log.write(f"out {result.partition} {result.start_offset} {result.end_offset} {_ms()}\n")
        log.flush()
        out.writelines(f"{result.partition} {message.offset()}\n" for message in result.messages)
        out.flush()
        if self.args.confirm_delay_s:
            time.sleep(self.args.confirm_delay_s)
        try:
            confirmed = consumer.confirm(result.confirm_context)
        except InvalidConfirmContextError:
            # Rolled back by a release: the partition's next holder gets these messages again.
            _say(f"batch {result.confirm_context} was rolled back")
            return
        self.batches += 1
        log.write(
            f"confirmed {result.partition} {confirmed.current} {int(confirmed.committed)} {_ms()}\n"
        )
        log.flush()

    def write_held(self, consumer: ClientBalanceConsumer, *, force: bool = False) -> None:
        """Replace the sidecar with the partitions held now (at most every HELD_EVERY_S)."""
        now = time.monotonic()
        if not force and now - self.held_written_at < HELD_EVERY_S:
            return
        self.held_written_at = now
        held = {PartitionKey.parse(key).partition for key in consumer.registered_partitions()}
        self.ever |= held
        target = held_path(self.out_path)
        partial = target.with_name(target.name + ".partial")
        data = {"held": sorted(held), "ever": sorted(self.ever), "batches": self.batches}
        partial.write_text(json.dumps(data))
        partial.replace(target)

    def on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """Ask the loop to stop; the consumer then shuts down and commits."""
        self.stop = True


def results_until_idle(
    consumer: ClientBalanceConsumer,
    stopped: Callable[[], bool],
    stop_after_idle_s: float | None,
    on_each_wait: Callable[[], None],
) -> Iterator[ConsumeResult]:
    """Batches until ``stopped()``, or until ``stop_after_idle_s`` passed without a message.

    Waiting for partitions (a dead predecessor's lease, say) is not idleness.
    """
    last_message_at = time.monotonic()
    while not stopped():
        on_each_wait()
        try:
            result = consumer.get_message(timeout_s=0.2)
        except NoMessageError as nothing:
            if nothing.code == NoMessageError.NO_PARTITION:
                last_message_at = time.monotonic()
            idle_s = time.monotonic() - last_message_at
            if stop_after_idle_s is not None and idle_s > stop_after_idle_s:
                return
            continue
        if result.messages:
            last_message_at = time.monotonic()
        yield result


def _say(text: str) -> None:
    print(f"[worker {os.getpid()}] {text}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line of a worker."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--source-count", type=int, required=True)
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--mode", choices=["node", "manual", "elastic"], default=None)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stop-after-idle-s", type=float, default=None)
    parser.add_argument("--batch-max", type=int, default=1000)
    parser.add_argument("--reconcile-interval-s", type=float, default=1.0)
    parser.add_argument("--lease-timeout-s", type=float, default=6.0)
    parser.add_argument("--status-topic", default=None, help="default: the SDK's")
    parser.add_argument(
        "--confirm-delay-s",
        type=float,
        default=0.0,
        help="sleep between writing a batch's lines and confirming it (a slow application)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker; the SDK's warnings go to its log (a test reads them: a fence, say)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    logging.getLogger("client_balance.kafka").setLevel(logging.CRITICAL)  # a broker's outage
    worker = Worker(parse_args(argv))
    signal.signal(signal.SIGTERM, worker.on_sigterm)
    return worker.run()


if __name__ == "__main__":
    sys.exit(main())
