r"""TubeMQ's ``ClientBalanceConsumerExample``, ported: the application assigns the partitions.

    python examples/tubemq_example.py --bootstrap 127.0.0.1:9092 --group billing \
        --topics orders,stock --source-count 2 --node-id 0 \
        --offsets node0.offsets.json --output node0.out
        [--start-position latest] [--assign-every-s 10] [--duration-s S]
        [--max-messages N] [--stop-after-idle-s S] [--work-per-batch-s S]

Start it once per node (``--node-id 0 .. N-1``, the same ``--source-count N`` everywhere). The
program has the TubeMQ example's shape, for users who know that one:

- the consumer is started in **manual** mode: the library registers nothing by itself, and
  the application decides (TubeMQ's ``start(map, sourceCount, nodeId)`` only validated the
  counts; here ``source_count > 0`` would make the library assign, so the counts stay in the
  application);
- **one assigner thread** (TubeMQ's ``partition_assigner``) runs a round every
  ``--assign-every-s``: ``get_partition_meta()`` (the full configured partition set, each
  with a subscribable flag) -> target = the partitions whose ``"topic:partition"`` has an
  unsigned Java ``String.hashCode()`` modulo ``source_count`` equal to ``node_id`` ->
  ``disconnect()`` what is registered but not in the target (or no longer subscribable) ->
  ``connect()`` what the target has and this node does not hold, with the bootstrap offset
  from the application's offset map (-1 when the map has none). A refused connect (410
  occupied, 421 too frequent, 422 no leader) is simply tried again next round;
- **three fetch threads** (TubeMQ's ``_fetch_runner_``): ``is_partitions_ready()`` ->
  ``get_message()`` -> work -> ``confirm()`` -> record; 406/407/408 only mean "nothing now";
- **an application-side offset map** (TubeMQ's ``partitionOffsetMap``): partition -> the next
  offset after the last recorded batch, fed back as bootstrap offsets whenever the node
  connects a partition, after a restart too.

Recording a confirmed batch appends one line per message to ``--output``
(``<topic> <partition> <offset> <value as a JSON string>``) and replaces ``--offsets``, a
JSON file with the offset map and the length of the output it matches, atomically (temporary
file + ``os.replace``). That is the exactly-once step: the output and the offsets move
together. On start, output past the recorded length (a batch appended but not recorded when
the process was killed) is cut off, and those messages come again from the recorded offsets.
Three rules keep the map the one truth, so that every message is in the output exactly once,
even across a SIGKILL:

- every partition the node holds has an entry (the assigner writes down where a partition
  started when the map had none), so a connect never falls back to the group's committed
  offset, which may be ahead of the output (a confirm commits before its batch is recorded)
  or behind it (``commit="interval"``);
- confirm-and-record and read-bootstrap-and-connect hold one lock, so a partition released
  and connected again meanwhile starts from the end of what was recorded, never from before
  a batch about to be recorded;
- a batch whose confirm is refused (its partition was released and it was rolled back) is
  not recorded: it comes again from the map's offset.

This holds for a process crash; a machine crash would also need ``fsync``. The map is per
node, so keep ``--source-count`` and ``--node-id`` with the files.

The program stops on SIGINT/SIGTERM, after ``--duration-s``, after ``--max-messages``
messages, or after ``--stop-after-idle-s`` seconds without one (a connect, a disconnect or a
refused connect starts that wait again): the fetch threads finish and confirm the batch in
hand, then ``shutdown()`` commits and releases every partition. A second signal stops at
once. Exit code 0 on a clean stop, 1 on an error, 2 on bad arguments.
``--bootstrap`` and ``--group`` default to ``CLIENT_BALANCE_BOOTSTRAP_SERVERS`` and
``CLIENT_BALANCE_GROUP_ID``; every other setting comes from its ``CLIENT_BALANCE_<FIELD>``
variable.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import BinaryIO

from client_balance import (
    RESUME_OFFSET,
    ClientBalanceConsumer,
    ClientBalanceError,
    ClientBalanceSettings,
    ConfigError,
    ConsumeResult,
    GroupMode,
    InvalidConfirmContextError,
    KafkaClientError,
    NoMessageError,
    NotStartedError,
    PartitionKey,
    PartitionNotFoundError,
    PartitionOccupiedError,
    PartitionUnsubscribableError,
    TooFrequentError,
)
from client_balance.strategies import java_string_hash

FETCH_THREADS = 3  # TubeMQ's example hard-codes three fetch runners
READY_WAIT_S = 1.0
GET_MESSAGE_TIMEOUT_S = 1.0
KAFKA_RETRY_PAUSE_S = 1.0
# A fatal client error is raised by every call from then on; retrying it for about a minute
# rides out anything transient without looping forever on what never clears.
KAFKA_FAILURES_BEFORE_GIVING_UP = 60
MAIN_POLL_S = 0.2
_UINT32_MASK = 0xFFFFFFFF

Topics = dict[str, set[str] | None]
RETRY_NEXT_ROUND = (
    PartitionOccupiedError,  # 410: another live member holds it
    TooFrequentError,  # 421: asked again too soon after a 410
    PartitionUnsubscribableError,  # 422: no leader now
    PartitionNotFoundError,  # 404: gone since the meta query
)


# ------------------------------------------------------------------------- the offset map
class OffsetMap:
    """The application's offsets and its output, recorded together after every batch.

    ``lock`` is held by every method, and by the callers around confirm-and-record and
    read-bootstrap-and-connect (see the module docstring), hence reentrant.
    """

    def __init__(self, offsets_path: Path, output_path: Path) -> None:
        self._offsets_path = offsets_path
        self.lock = threading.RLock()
        self._offsets, recorded_bytes = _read_checkpoint(offsets_path)
        self.dropped_bytes = _cut_output(output_path, recorded_bytes)
        self._output: BinaryIO = output_path.open("ab")
        self.messages = 0
        self.last_message_s = time.monotonic()

    def bootstrap_offset(self, partition: str) -> int:
        """Where ``partition`` goes on: the recorded next offset, or -1 (the group's position)."""
        with self.lock:
            return self._offsets.get(partition, RESUME_OFFSET)

    def snapshot(self) -> dict[str, int]:
        """The offsets recorded so far."""
        with self.lock:
            return dict(self._offsets)

    def record_start(self, partition: str, offset: int) -> None:
        """Write down where a partition that the map did not have starts."""
        with self.lock:
            self._offsets.setdefault(partition, offset)
            self._save()

    def record(self, result: ConsumeResult) -> None:
        """Append a confirmed batch's lines and record its end offset, as one step."""
        lines = b"".join(
            _output_line(result.topic, message.partition(), message.offset(), message.value())
            for message in result.messages
        )
        with self.lock:
            self._output.write(lines)
            self._output.flush()  # in the OS before the checkpoint names its length
            self._offsets[f"{result.topic}:{result.partition}"] = result.end_offset
            self._save()
            self.messages += len(result.messages)
            self.last_message_s = time.monotonic()

    def _save(self) -> None:
        checkpoint = {"offsets": self._offsets, "output_bytes": self._output.tell()}
        temporary = self._offsets_path.with_name(self._offsets_path.name + ".tmp")
        temporary.write_text(json.dumps(checkpoint, sort_keys=True))
        os.replace(temporary, self._offsets_path)  # a reader sees the old map or the new one

    def close(self) -> None:
        """Close the output."""
        with self.lock:
            self._output.close()


def _read_checkpoint(path: Path) -> tuple[dict[str, int], int]:
    if not path.exists():
        return {}, 0
    checkpoint = json.loads(path.read_text())
    offsets = {str(key): int(value) for key, value in checkpoint["offsets"].items()}
    return offsets, int(checkpoint["output_bytes"])


def _cut_output(path: Path, recorded_bytes: int) -> int:
    """Cut what was processed after the last checkpoint; those messages come again."""
    if not path.exists() or path.stat().st_size <= recorded_bytes:
        return 0
    dropped = path.stat().st_size - recorded_bytes
    with path.open("r+b") as output:
        output.truncate(recorded_bytes)
    return dropped


def _output_line(
    topic: str, partition: int | None, offset: int | None, value: bytes | None
) -> bytes:
    text = None if value is None else value.decode("utf-8", errors="replace")
    return f"{topic} {partition} {offset} {json.dumps(text)}\n".encode()


# ------------------------------------------------------------------------------- the node
@dataclass
class Node:
    """One running node: the consumer, its offset map, its rule, and how it is told to stop."""

    consumer: ClientBalanceConsumer
    offsets: OffsetMap
    source_count: int
    node_id: int
    assign_every_s: float
    work_per_batch_s: float
    stop: threading.Event = field(default_factory=threading.Event)
    failures: list[ClientBalanceError] = field(default_factory=list)
    unsettled_at_s: float = 0.0
    """``time.monotonic()`` of the last connect or disconnect, or refused connect: a node whose
    share is just connected, or still waits for a partition (a killed predecessor's lease,
    say), is not idle."""

    def say(self, text: str) -> None:
        """One line of what the node does, on stdout."""
        print(f"node {self.node_id}: {text}", flush=True)

    def fail(self, error: ClientBalanceError) -> None:
        """Stop the whole node because of ``error``."""
        self.say(f"stopping: {type(error).__name__}: {error}")
        self.failures.append(error)
        self.stop.set()

    def owns(self, partition: str) -> bool:
        """TubeMQ's example rule: unsigned ``hashCode()`` of the key modulo the node count."""
        return (java_string_hash(partition) & _UINT32_MASK) % self.source_count == self.node_id


def identity(key: str) -> str:
    """``"topic:partition"`` of a key; the leader part of ``"1:orders:3"`` moves with failovers."""
    return str(PartitionKey.parse(key).topic_partition)


# ---------------------------------------------------------------------- the assigner thread
def assign_partitions(node: Node) -> None:
    """Run an assignment round every ``assign_every_s`` until the node stops."""
    kafka_failures = 0
    while not node.stop.is_set():
        try:
            assign_round(node)
            kafka_failures = 0
        except NotStartedError:
            return
        except KafkaClientError as error:
            kafka_failures += 1
            node.say(f"assignment round failed, next round tries again: {error}")
            if kafka_failures >= KAFKA_FAILURES_BEFORE_GIVING_UP:
                node.fail(error)
                return
        except ClientBalanceError as error:
            node.fail(error)  # a group conflict or the like: no later round would fix it
            return
        node.stop.wait(node.assign_every_s)


def assign_round(node: Node) -> None:
    """Meta query -> hash-modulo target -> disconnect extras -> connect the missing ones."""
    consumer = node.consumer
    # Every configured partition with its subscribable flag (TubeMQ's partStatusMap).
    subscribable = {
        str(meta.topic_partition): meta.subscribable
        for meta in consumer.get_partition_meta().values()
    }
    # Over the full configured set, not only what is subscribable now, so that a partition
    # without a leader keeps its node and nothing else moves.
    target = sorted(partition for partition in subscribable if node.owns(partition))
    kept = set()
    for partition in sorted(identity(key) for key in consumer.registered_partitions()):
        if partition in target and subscribable.get(partition, False):
            kept.add(partition)
            continue
        node.unsettled_at_s = time.monotonic()
        try:
            consumer.disconnect(partition)
        except KafkaClientError as error:
            # Released all the same; what was confirmed and not committed comes again.
            node.say(f"disconnected {partition}, its final commit failed: {error}")
        else:
            node.say(f"disconnected {partition}")
    for partition in target:
        if partition in kept or not subscribable[partition]:
            continue
        with node.offsets.lock:
            bootstrap_offset = node.offsets.bootstrap_offset(partition)
            try:
                consumer.connect(partition, bootstrap_offset)
            except RETRY_NEXT_ROUND as error:
                node.say(f"cannot connect {partition} now ({error.code}), next round: {error}")
                continue
            finally:
                node.unsettled_at_s = time.monotonic()
        resumed = bootstrap_offset == RESUME_OFFSET
        node.say(f"connected {partition} from {'the group' if resumed else bootstrap_offset}")
    record_starts(node)


def record_starts(node: Node) -> None:
    """Give every held partition an entry in the map: where it started, if it had none."""
    with node.offsets.lock:  # no batch is confirmed meanwhile, so "current" is not recorded
        recorded = node.offsets.snapshot()
        held = {identity(key) for key in node.consumer.registered_partitions()}
        if held <= recorded.keys():
            return
        for key, info in node.consumer.offset_infos().items():
            if identity(key) not in recorded:
                node.offsets.record_start(identity(key), info.current)


# ------------------------------------------------------------------------ the fetch threads
def fetch_and_confirm(node: Node) -> None:
    """Wait until a partition is registered, then take, process and confirm batches."""
    consumer = node.consumer
    try:
        while not node.stop.is_set() and not consumer.is_partitions_ready(READY_WAIT_S):
            pass
    except NotStartedError:
        return
    kafka_failures = 0
    while not node.stop.is_set():
        try:
            result = consumer.get_message(GET_MESSAGE_TIMEOUT_S)
        except NoMessageError:
            kafka_failures = 0
            continue  # 406/407/408: nothing registered, nothing new, or everything taken
        except NotStartedError:
            return
        except KafkaClientError as error:
            kafka_failures += 1
            if kafka_failures >= KAFKA_FAILURES_BEFORE_GIVING_UP:
                node.fail(error)
                return
            node.say(f"get_message failed, trying again: {error}")
            node.stop.wait(KAFKA_RETRY_PAUSE_S)
            continue
        except ClientBalanceError as error:
            node.fail(error)
            return
        kafka_failures = 0
        if node.work_per_batch_s > 0:
            time.sleep(node.work_per_batch_s)  # stands for the real work on the batch
        with node.offsets.lock:
            try:
                consumer.confirm(result.confirm_context)
            except InvalidConfirmContextError:
                # Released meanwhile and rolled back: it comes again from the map's offset.
                node.say(f"batch of {result.key} was rolled back before its confirm")
                continue
            except ClientBalanceError as error:  # GroupInUseError of a sync commit
                node.fail(error)  # not recorded, so it comes again after a restart
                return
            node.offsets.record(result)


# ---------------------------------------------------------------------------- the program
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; ``--bootstrap`` and ``--group`` fall back to the environment."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bootstrap", default=os.environ.get("CLIENT_BALANCE_BOOTSTRAP_SERVERS"))
    parser.add_argument("--group", default=os.environ.get("CLIENT_BALANCE_GROUP_ID"))
    parser.add_argument(
        "--topics",
        required=True,
        help="topic[:filter1;filter2][,topic2...] as TubeMQ's example takes them",
    )
    parser.add_argument("--source-count", type=int, default=1, help="nodes in the group")
    parser.add_argument("--node-id", type=int, default=0, help="this node, 0 .. N-1")
    parser.add_argument("--offsets", type=Path, required=True, help="the offset map (JSON)")
    parser.add_argument("--output", type=Path, required=True, help="processed messages")
    parser.add_argument(
        "--start-position",
        choices=["earliest", "latest"],
        default="latest",
        help="where a partition starts that neither the map nor the group has (TubeMQ's "
        "example: latest)",
    )
    parser.add_argument("--assign-every-s", type=float, default=10.0, metavar="SECONDS")
    parser.add_argument("--duration-s", type=float, metavar="SECONDS", help="stop after this")
    parser.add_argument("--max-messages", type=int, help="stop after this many messages")
    parser.add_argument("--stop-after-idle-s", type=float, metavar="SECONDS")
    parser.add_argument(
        "--work-per-batch-s", type=float, default=0.0, metavar="SECONDS", help="simulated work"
    )
    args = parser.parse_args(argv)
    if not args.bootstrap or not args.group:
        parser.error("--bootstrap and --group are required (or CLIENT_BALANCE_* variables)")
    if args.source_count < 1 or not 0 <= args.node_id < args.source_count:
        parser.error("--source-count must be >= 1 and --node-id in [0, source_count - 1]")
    if args.assign_every_s <= 0:
        parser.error("--assign-every-s must be > 0")
    return args


def parse_topics(text: str) -> Topics:
    """``"orders:created;paid,stock"`` -> ``{"orders": {"created", "paid"}, "stock": None}``."""
    topics: Topics = {}
    for item in text.split(","):
        name, _, filters = item.strip().partition(":")
        values = {value.strip() for value in filters.split(";") if value.strip()}
        topics[name.strip()] = values or None
    return topics


def install_signal_handlers(stop: threading.Event) -> None:
    """SIGINT and SIGTERM ask for a clean stop; a second one stops at once."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        print(f"{signal.Signals(signum).name}: stopping (again to force)", file=sys.stderr)
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)


def should_stop(node: Node, args: argparse.Namespace, began_s: float) -> bool:
    """Whether the duration, the message count or the idle time has run out."""
    now_s = time.monotonic()
    if args.duration_s is not None and now_s - began_s >= args.duration_s:
        return True
    if args.max_messages is not None and node.offsets.messages >= args.max_messages:
        return True
    idle_since_s = max(node.offsets.last_message_s, node.unsettled_at_s, began_s)
    return args.stop_after_idle_s is not None and now_s - idle_since_s >= args.stop_after_idle_s


def run(node: Node, args: argparse.Namespace) -> None:
    """Start the assigner and the fetch threads; stop them once told to, batches confirmed."""
    threads = [threading.Thread(target=assign_partitions, args=(node,), name="partition_assigner")]
    threads += [
        threading.Thread(target=fetch_and_confirm, args=(node,), name=f"_fetch_runner_{index}")
        for index in range(FETCH_THREADS)
    ]
    for thread in threads:
        thread.start()
    began_s = time.monotonic()
    try:
        while not node.stop.wait(MAIN_POLL_S):
            if should_stop(node, args, began_s):
                node.stop.set()
    finally:
        node.stop.set()
        # The fetch threads confirm the batch in hand before they end, so the shutdown that
        # follows rolls nothing back.
        for thread in threads:
            thread.join()


def main(argv: Sequence[str] | None = None) -> int:
    """Run one node until stopped: 0 on a clean stop, 1 on an error, 2 on bad arguments."""
    args = parse_args(argv)
    try:
        topics = parse_topics(args.topics)
        settings = ClientBalanceSettings(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            start_position=args.start_position,
        )
        offsets = OffsetMap(args.offsets, args.output)
    except (ConfigError, ValueError, KeyError, OSError) as error:
        print(f"tubemq_example: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    try:
        with ClientBalanceConsumer(settings) as consumer:
            node = Node(
                consumer, offsets, args.source_count, args.node_id,
                args.assign_every_s, args.work_per_batch_s,
            )  # fmt: skip
            if offsets.dropped_bytes:
                node.say(f"cut {offsets.dropped_bytes} bytes of output processed after the map")
            install_signal_handlers(node.stop)
            try:
                consumer.start(topics, mode=GroupMode.MANUAL)
            except ClientBalanceError as error:
                print(f"tubemq_example: cannot start: {error}", file=sys.stderr)
                return 2 if isinstance(error, ConfigError) else 1
            node.say(
                f"started as node {args.node_id} of {args.source_count} in group "
                f"{settings.group_id!r}, from offsets {offsets.snapshot()}"
            )
            run(node, args)
        node.say(f"stopped after {offsets.messages} messages; offsets {offsets.snapshot()}")
    except ClientBalanceError as error:  # the final commits of shutdown()
        print(f"tubemq_example: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tubemq_example: forced stop; the offset map is as last recorded", file=sys.stderr)
        return 130
    finally:
        offsets.close()
    return 1 if node.failures else 0


if __name__ == "__main__":
    sys.exit(main())
