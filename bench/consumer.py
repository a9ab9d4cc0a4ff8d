"""Consumer: ``ClientBalanceConsumer`` against a raw confluent-kafka ``Consumer``.

Every line is in the format of every bench script (``bench``, ``case``, ``ours``, ``peer``,
``peer_name``, ``unit``, ``ratio``); ``ratio`` is defined so that above 1 means we are better.

Throughput cases, ``throughput-batch<B>[-<librdkafka settings>][-gc-frozen]``: messages per second,
``ratio`` = ours / peer. The data (``--messages`` messages of ``--size`` bytes, round robin
over ``--partitions`` partitions of one topic) is produced once; every run reads all of it
from the beginning in a fresh process. Ours: ``ClientBalanceConsumer`` with
``start_position="earliest"``, ``commit="interval"`` and ``batch_max_messages=B`` in a fresh
group, ``start([topic], source_count=1, node_id=0)``, then ``get_message()``, touch every
message, ``confirm()``. Peer: a plain assign-only confluent-kafka ``Consumer`` on the same
partitions from ``OFFSET_BEGINNING``, ``consume(num_messages=B)``, touch every message, no
commits. "Touch" is the same on both sides: ``len(message.value())``. Both sides get the
librdkafka settings of ``--kafka`` (a JSON object, in the case name). Without any, each side
runs with its own defaults: the raw consumer with librdkafka's, ours with the SDK's, which
cut ``fetch.queue.backoff.ms`` to 10 ms (``sdk_defaults`` in the line, docs/settings.md).
The cases with ``fetch.queue.backoff.ms=10`` give both sides the same setting and so measure
the SDK's own overhead. The peer's process imports confluent-kafka only, never the SDK: the
SDK's modules are objects that every full garbage collection of the process walks. The
``-gc-frozen`` cases tell that walk apart from the rest of the overhead: both sides call
``gc.freeze()`` once their consumer is set up, so that nothing made before the loop (imported
modules, clients) is walked again. The same-settings cases of 100-byte messages also time a
third side, alternating with the two: the raw loop in a process that has imported
``client_balance`` and uses nothing of it (``peer_sdk_imported``). Its rate over the raw
loop's (``sdk_import_share``) is what the SDK's modules alone cost the raw loop, and ours
over it (``ratio_to_peer_sdk_imported``) is what remains: the SDK's own work per batch.
They also time a fourth side, the raw loop that hands on one partition's run at a time
(``peer_split``): ``consume(n)``, the same error filter, then a list of one partition goes on
whole (one C-level counting pass says so) and a mixed one is cut into runs with ``groupby``;
each run is a batch. ``split_share`` (split / raw) is what per-partition batches cost any
loop, and ``ratio_to_peer_split`` (ours / split) is ours against a loop that gives what ours
gives, one partition per batch, less the locking, confirming and committing.
The rate is counted from the first batch in hand to the last message in hand, so neither
side's start-up counts (the raw consumer spends about 0.5 s resolving ``OFFSET_BEGINNING``);
``ours_incl_start``/``peer_incl_start`` are the rates from constructing the consumer on.

First-message cases: seconds from constructing the consumer to the first message in hand,
``ratio`` = peer / ours. Ours: settings, ``ClientBalanceConsumer``, ``start([topic],
source_count=1, node_id=0)`` in a fresh group (``start_position="earliest"``), the first
``get_message()``. Peer: a confluent-kafka ``Consumer`` that ``subscribe()``s in a fresh
group, then ``poll()`` until the first message, in two modes: ``-kip848`` cases with
``group.protocol=consumer`` (KIP-848, the peer's fastest join), the others with the classic
protocol (the broker keeps its default ``group.initial.rebalance.delay.ms`` of 3000). Both
sides run with equal settings: the peer gets the SDK's own fetch and reconnect settings
(``peer_kafka`` in the line). ``first-message`` reads a topic with a backlog (10,000 messages
per partition); ``first-message-sparse`` one with 100 per partition, fewer than a batch.

Every timed run is its own Python process (no shared GIL, memory or librdkafka state), the two
sides alternate, untimed runs of each side go first (the broker's JIT and page cache:
``--warmup``, default 1, before a throughput case; ``--start-warmup``, default 30, before a
first-message case, whose figures are kept in the line as ``ours_warmup_runs`` and
``peer_warmup_runs``), and the figures are medians of ``--runs`` (throughput, default 5) or
``--start-runs`` (first message, default 15); the single runs are in the line, and ``load``
is the 1-minute load average before and after. The broker is a fresh ``LocalKafka``, or the
cluster at ``CLIENT_BALANCE_BOOTSTRAP_SERVERS``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import groupby
from operator import countOf
from pathlib import Path
from typing import TYPE_CHECKING, Any

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

if TYPE_CHECKING:
    from client_balance import ClientBalanceSettings

# The SDK is imported where it is used (its workers, the parent), never up here: a peer worker,
# a raw confluent-kafka loop, must not carry the SDK's modules. They are some 21,000 objects
# that every full garbage collection of the process walks, eight times per million messages
# in a throughput run; with them the raw loop's collections took twice as long
# (docs/benchmarks.md, fifth round).

BENCH = "consumer"
GROUPS = ("throughput", "first-message", "first-message-sparse")
DEFAULT_BATCHES = (1000, 5000)
SAME_SETTINGS: dict[str, Any] = {"fetch.queue.backoff.ms": 10}
"""The same-settings cases: librdkafka's 1 s fetch back-off cut as the SDK cuts it."""
DEFAULT_KAFKA = ("{}", json.dumps(SAME_SETTINGS))
"""librdkafka's defaults, and the same with its 1 s fetch back-off cut (see docs/benchmarks.md)."""
LARGE_MESSAGES: dict[str, Any] = {
    "batch": 100,
    "kafka": SAME_SETTINGS,
    "size": 1_000_000,
    "messages": 2_000,
}
"""The memory case: 2,000 messages of 1 MB (2 GB), same settings on both sides; peak RSS."""
FIRST_MESSAGE_BACKLOG = {"first-message": 10_000, "first-message-sparse": 100}
"""Messages per partition in the first-message cases' topics."""
START_WARMUP = 30
"""Untimed runs of each side before a first-message case. A fresh broker's request paths are
interpreted until its JIT compiles them. 80 pairs from a cold broker, medians of each ten
(docs/benchmarks.md, 2026-11-28): ours 36.0, 30.0, 30.0, 26.0, 25.5, 25.0, 27.0, 25.0 ms and
33.5, 31.0, 30.5, 27.0, 26.5, 28.0, 28.0, 26.5 ms, the peer 135.5 then 124-129 ms. Ours needs
some thirty starts to reach its plateau, the peer ten. A production broker is warm, so the timed
runs come after thirty; the warm-up runs are in the line too."""
START_RUNS = 15
"""Timed runs of each side in a first-message case (``--runs`` counts the throughput cases').
Medians of five moved the backlog ratio between 4.2x and 5.9x from one run to the next on the
same code. With the thirty warm-up pairs this adds about half a minute to each KIP-848 case and
two minutes to each classic one, whose peer waits 3 s a start: the sixteenth ``make bench`` run
took 40 minutes where the fifteenth took 34."""
FIRST_MESSAGE_PEERS = {
    "classic": "subscribe(), classic group protocol, broker default "
    "group.initial.rebalance.delay.ms (3000)",
    "consumer": "subscribe(), KIP-848 group.protocol=consumer",
}
"""The peer's ``group.protocol`` in the first-message cases -> the ``peer_mode`` of the line."""
WORKER_TIMEOUT_S = 600.0
SDK_IMPORTED_PEER = "throughput-peer-sdk-imported"
SPLIT_PEER = "throughput-peer-split"
"""The worker of the raw loop that hands on one partition's run at a time (module docstring)."""
EXTRA_PEERS = (SDK_IMPORTED_PEER, SPLIT_PEER)
"""Raw loops timed beside the same-settings lines of 100-byte messages, in turn with the two."""
"""The worker of the raw loop in a process that has imported the SDK (module docstring)."""


@dataclass(frozen=True)
class Case:
    """One JSON line: a group of cases with its batch size and librdkafka settings."""

    group: str
    batch: int = 1000
    kafka: dict[str, Any] = field(default_factory=dict)
    size: int | None = None
    """Throughput: bytes per message of this case (None: ``--size``)."""
    messages: int | None = None
    """Throughput: messages of this case (None: ``--messages``)."""
    gc_frozen: bool = False
    """Throughput: both sides call ``gc.freeze()`` once their consumer is set up."""

    @property
    def times_extra_peers(self) -> bool:
        """Whether the two extra raw loops (``EXTRA_PEERS``) are timed too (module docstring)."""
        return (
            self.group == "throughput"
            and self.kafka == SAME_SETTINGS
            and self.size is None
            and not self.gc_frozen
        )

    @property
    def name(self) -> str:
        """``throughput-batch5000-fetch.queue.backoff.ms=10``, ``first-message-kip848``."""
        if self.group != "throughput":
            kip848 = self.kafka.get("group.protocol") == "consumer"
            return f"{self.group}-kip848" if kip848 else self.group
        sized = "" if self.size is None else f"-{self.size // 1_000_000}mb"
        tuned = "".join(f"-{key}={value}" for key, value in sorted(self.kafka.items()))
        frozen = "-gc-frozen" if self.gc_frozen else ""
        return f"throughput-batch{self.batch}{sized}{tuned}{frozen}"


# ------------------------------------------------------------------------------ workers
# Each runs in its own process and returns its timings; the parent prints the JSON lines.


def _touch(messages: list[Any]) -> int:
    """What both sides do with each message: look at its value."""
    return sum(len(message.value()) for message in messages)


class _Progress:
    """Counts messages and stamps the first batch and the end."""

    def __init__(self) -> None:
        self.began = time.perf_counter()
        self.count = self.size = self.batches = self.first_count = 0
        self.first_at = 0.0
        self.rss_base_mb = _peak_rss_mb()

    def add(self, messages: list[Any]) -> None:
        self.size += _touch(messages)
        self.count += len(messages)
        self.batches += 1
        if self.batches == 1:
            self.first_at, self.first_count = time.perf_counter(), self.count

    def result(self) -> dict[str, Any]:
        ended = time.perf_counter()
        return {
            "rate": (self.count - self.first_count) / (ended - self.first_at),
            "rate_incl_start": self.count / (ended - self.began),
            "start_s": self.first_at - self.began,
            "total_s": ended - self.began,
            "messages": self.count,
            "bytes": self.size,
            "batches": self.batches,
            "rss_mb": _peak_rss_mb(),
            "rss_base_mb": self.rss_base_mb,
        }


def _peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB.

    Linux's ``VmHWM``: ``ru_maxrss`` would carry over the parent's peak across fork and exec
    (the parent producing the 1 MB messages peaks near a gigabyte).
    """
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def throughput_ours(args: argparse.Namespace) -> dict[str, Any]:
    """Read ``--messages`` messages through get_message + confirm."""
    from client_balance import (  # noqa: PLC0415 - see the imports
        ClientBalanceConsumer,
        ClientBalanceSettings,
    )

    progress = _Progress()
    settings = ClientBalanceSettings(
        bootstrap_servers=args.bootstrap,
        group_id=f"bench-ours-{uuid.uuid4().hex}",
        start_position="earliest",
        commit="interval",
        batch_max_messages=args.batch[0],
        kafka=json.loads(args.kafka[0]),
    )
    consumer = ClientBalanceConsumer(settings)
    consumer.start([args.topic], source_count=1, node_id=0)
    _freeze_if(args)
    while progress.count < args.messages:
        result = consumer.get_message(timeout_s=30.0)
        progress.add(result.messages)
        consumer.confirm(result.confirm_context)
    done = progress.result()
    consumer.shutdown()
    return done


def _raw_consumer(args: argparse.Namespace) -> Consumer:
    """An assign-only Consumer on every partition of the topic, from the beginning."""
    consumer = Consumer(
        {
            **json.loads(args.kafka[0]),
            "bootstrap.servers": args.bootstrap,
            "group.id": f"bench-peer-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign(
        [KafkaTopicPartition(args.topic, p, OFFSET_BEGINNING) for p in range(args.partitions)]
    )
    return consumer


def throughput_peer(args: argparse.Namespace) -> dict[str, Any]:
    """Read ``--messages`` messages with an assign-only Consumer and consume()."""
    progress = _Progress()
    consumer = _raw_consumer(args)
    _freeze_if(args)
    while progress.count < args.messages:
        fetched = consumer.consume(num_messages=args.batch[0], timeout=1.0)
        messages = [message for message in fetched if message.error() is None]
        if messages:
            progress.add(messages)
    done = progress.result()
    consumer.close()
    return done


def throughput_peer_split(args: argparse.Namespace) -> dict[str, Any]:
    """The raw loop of :func:`throughput_peer` handing on one partition's run at a time.

    What an application that wants per-partition batches from ``consume(n)`` writes, as fast
    as we know how: the list is checked at C speed for being all of one partition (the topic
    is one), and only a mixed list is cut into runs. Each run counts as a batch.
    """
    progress = _Progress()
    consumer = _raw_consumer(args)
    partition_of = confluent_kafka.Message.partition
    while progress.count < args.messages:
        fetched = consumer.consume(num_messages=args.batch[0], timeout=1.0)
        messages = [message for message in fetched if message.error() is None]
        if not messages:
            continue
        if countOf(map(partition_of, messages), messages[0].partition()) == len(messages):
            progress.add(messages)
            continue
        for _, run in groupby(messages, key=partition_of):
            progress.add(list(run))
    done = progress.result()
    consumer.close()
    return done


def throughput_peer_sdk_imported(args: argparse.Namespace) -> dict[str, Any]:
    """The raw loop of :func:`throughput_peer` in a process that has imported the SDK."""
    import client_balance  # noqa: F401, PLC0415 - its modules are what this side measures

    return throughput_peer(args)


def _freeze_if(args: argparse.Namespace) -> None:
    """With ``--gc-freeze``: every object made so far leaves the collector's full walks."""
    if args.gc_freeze:
        gc.freeze()


def first_message_ours(args: argparse.Namespace) -> dict[str, Any]:
    """Construct, start in a fresh group, first get_message."""
    from client_balance import (  # noqa: PLC0415 - see the imports
        ClientBalanceConsumer,
        ClientBalanceSettings,
    )

    began = time.perf_counter()
    settings = ClientBalanceSettings(
        bootstrap_servers=args.bootstrap,
        group_id=f"bench-ours-{uuid.uuid4().hex}",
        start_position="earliest",
    )
    consumer = ClientBalanceConsumer(settings)
    consumer.start([args.topic], source_count=1, node_id=0)
    result = consumer.get_message(timeout_s=60.0)
    took = time.perf_counter() - began
    consumer.confirm(result.confirm_context)
    consumer.shutdown()
    return {"seconds": took, "messages": len(result.messages)}


def peer_settings() -> dict[str, Any]:
    """The SDK's own librdkafka settings that mean the same to a subscribe() consumer.

    Its fetch and reconnect settings (``sdk_defaults``, docs/settings.md), so that both sides
    of a first-message case run with equal settings; not its group or offset settings. The
    parent hands them to the peer's worker, which does not import the SDK.
    """
    from client_balance._kafka import LIBRDKAFKA_DEFAULTS  # noqa: PLC0415 - see the imports

    ours = {**LIBRDKAFKA_DEFAULTS, **_default_settings().consumer_config()}
    return {key: value for key, value in ours.items() if key.startswith(("fetch.", "reconnect."))}


def first_message_peer(args: argparse.Namespace) -> dict[str, Any]:
    """Construct, subscribe() in a fresh group, poll until the first message."""
    began = time.perf_counter()
    consumer = Consumer(
        {
            **json.loads(args.kafka[0]),  # peer_settings() and the case's group.protocol
            "bootstrap.servers": args.bootstrap,
            "group.id": f"bench-peer-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([args.topic])
    deadline = began + 60.0
    while True:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            break
        if time.perf_counter() > deadline:
            raise TimeoutError("the subscribe() consumer got no message within 60 s")
    took = time.perf_counter() - began
    consumer.close()
    return {"seconds": took, "messages": 1}


WORKERS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "throughput-ours": throughput_ours,
    "throughput-peer": throughput_peer,
    SPLIT_PEER: throughput_peer_split,
    SDK_IMPORTED_PEER: throughput_peer_sdk_imported,
    "first-message-ours": first_message_ours,
    "first-message-peer": first_message_peer,
}


# ------------------------------------------------------------------------------ the parent


def run_worker(
    name: str, args: argparse.Namespace, bootstrap: str, topic: str, case: Case
) -> dict[str, Any]:
    """Run one side once in a fresh interpreter; its result dict."""
    kafka = {**peer_settings(), **case.kafka} if name == "first-message-peer" else case.kafka
    command = [
        sys.executable, str(Path(__file__).resolve()), "--worker", name,
        "--bootstrap", bootstrap, "--topic", topic,
        "--messages", str(case.messages or args.messages),
        "--partitions", str(args.partitions), "--batch", str(case.batch),
        "--kafka", json.dumps(kafka),
        *(["--gc-freeze"] if case.gc_frozen else []),
    ]  # fmt: skip
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"worker"')]
    if done.returncode != 0 or not lines:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"worker {name} failed (exit {done.returncode}):\n{tail}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def produce(bootstrap: str, topic: str, partitions: int, messages: int, size: int) -> float:
    """Create ``topic`` and write ``messages`` values of ``size`` bytes round robin; seconds."""
    from client_balance import admin  # noqa: PLC0415 - see the imports

    began = time.perf_counter()
    admin.create_topics(bootstrap, {topic: partitions}, exist_ok=True)
    have = _high_watermarks(bootstrap, topic, partitions)
    if have >= messages:
        return 0.0
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
            "message.max.bytes": 2 * 1024 * 1024,  # 1 MB values and their record overhead
        }
    )
    value = (b"0123456789" * (size // 10 + 1))[:size]
    for i in range(have, messages):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError(f"could not produce {messages} messages to {topic}")
    have = _high_watermarks(bootstrap, topic, partitions)
    if have < messages:
        raise RuntimeError(f"{topic} holds {have} messages after producing {messages}")
    return time.perf_counter() - began


def _high_watermarks(bootstrap: str, topic: str, partitions: int) -> int:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe"})
    deadline = time.monotonic() + 30.0
    try:
        while True:
            try:
                return sum(
                    probe.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10)[1]
                    for p in range(partitions)
                )
            except KafkaException:  # a new topic: the client's metadata catches up
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        probe.close()


Runs = list[dict[str, Any]]


def alternate(
    args: argparse.Namespace, bootstrap: str, topic: str, case: Case
) -> tuple[Runs, Runs, Runs, Runs, dict[str, Runs]]:
    """Untimed runs of both sides, then alternating timed runs of each.

    A throughput case takes ``--warmup`` and ``--runs`` of them, a first-message case
    ``--start-warmup`` and ``--start-runs``.

    Returns our timed runs, the peer's, the warm-up runs of each (kept for the line: what
    a cold broker costs is shown, not hidden), and the timed runs of each extra raw loop
    (``EXTRA_PEERS``), taken in turn with the others (none unless ``times_extra_peers``).
    """
    if case.group == "throughput":
        kind, warmup, runs = "throughput", args.warmup, args.runs
    else:
        kind, warmup, runs = "first-message", args.start_warmup, args.start_runs
    ours, peer = f"{kind}-ours", f"{kind}-peer"
    extras = EXTRA_PEERS if case.times_extra_peers else ()
    our_warmups, peer_warmups = [], []
    for _ in range(warmup):
        peer_warmups.append(run_worker(peer, args, bootstrap, topic, case))
        our_warmups.append(run_worker(ours, args, bootstrap, topic, case))
    our_runs, peer_runs = [], []
    extra_runs: dict[str, Runs] = {extra: [] for extra in extras}
    for _ in range(runs):
        our_runs.append(run_worker(ours, args, bootstrap, topic, case))
        peer_runs.append(run_worker(peer, args, bootstrap, topic, case))
        for extra in extras:
            extra_runs[extra].append(run_worker(extra, args, bootstrap, topic, case))
    return our_runs, peer_runs, our_warmups, peer_warmups, extra_runs


def peer_name() -> str:
    """``confluent-kafka-2.16.1``: the peer with its version."""
    return f"confluent-kafka-{confluent_kafka.__version__}"


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(run[key] for run in runs))


def run_throughput(args: argparse.Namespace, bootstrap: str, case: Case) -> dict[str, Any]:
    """Messages per second, ours / peer; and each side's peak resident memory."""
    messages, size = case.messages or args.messages, case.size or args.size
    topic = f"bench-throughput-{messages}x{size}b-{args.partitions}p"
    produce_s = produce(bootstrap, topic, args.partitions, messages, size)
    load_before = _load()
    our_runs, peer_runs, _, _, extra_runs = alternate(args, bootstrap, topic, case)
    ours, peer = _median(our_runs, "rate"), _median(peer_runs, "rate")
    return {
        "bench": BENCH,
        "case": case.name,
        "ours": round(ours),
        "peer": round(peer),
        "peer_name": peer_name(),
        "unit": "msg/s",
        "ratio": round(ours / peer, 3),
        "peer_mode": "assign-only, consume(num_messages=batch), no commits"
        + (", gc.freeze() before the loop" if case.gc_frozen else ""),
        "gc_frozen": case.gc_frozen,
        "messages": messages,
        "message_bytes": size,
        "partitions": args.partitions,
        "batch": case.batch,
        "kafka": case.kafka,
        "sdk_defaults": sdk_defaults(),
        "runs": args.runs,
        "ours_runs": [round(run["rate"]) for run in our_runs],
        "peer_runs": [round(run["rate"]) for run in peer_runs],
        "ours_incl_start": round(_median(our_runs, "rate_incl_start")),
        "peer_incl_start": round(_median(peer_runs, "rate_incl_start")),
        "ours_start_s": round(_median(our_runs, "start_s"), 3),
        "peer_start_s": round(_median(peer_runs, "start_s"), 3),
        "ours_batches": round(_median(our_runs, "batches")),
        "peer_batches": round(_median(peer_runs, "batches")),
        "ours_rss_mb": round(_median(our_runs, "rss_mb")),
        "peer_rss_mb": round(_median(peer_runs, "rss_mb")),
        "rss_ratio": round(_median(peer_runs, "rss_mb") / _median(our_runs, "rss_mb"), 3),
        "ours_rss_runs": [round(run["rss_mb"]) for run in our_runs],
        "peer_rss_runs": [round(run["rss_mb"]) for run in peer_runs],
        "ours_rss_base_mb": round(_median(our_runs, "rss_base_mb")),
        "peer_rss_base_mb": round(_median(peer_runs, "rss_base_mb")),
        **_sdk_imported_fields(ours, peer, extra_runs.get(SDK_IMPORTED_PEER, [])),
        **_split_fields(ours, peer, extra_runs.get(SPLIT_PEER, [])),
        "produce_s": round(produce_s, 1),
        "librdkafka": confluent_kafka.libversion()[0],
        "load": [load_before, _load()],
    }


def _sdk_imported_fields(ours: float, peer: float, imported_runs: Runs) -> dict[str, Any]:
    """The raw loop with the SDK imported, and the two shares of the gap it tells apart."""
    if not imported_runs:
        return {}
    imported = _median(imported_runs, "rate")
    return {
        "peer_sdk_imported": round(imported),
        "peer_sdk_imported_runs": [round(run["rate"]) for run in imported_runs],
        "sdk_import_share": round(imported / peer, 3),
        "ratio_to_peer_sdk_imported": round(ours / imported, 3),
    }


def _split_fields(ours: float, peer: float, split_runs: Runs) -> dict[str, Any]:
    """The raw loop that hands on per-partition runs: its rate, and ours against it."""
    if not split_runs:
        return {}
    split = _median(split_runs, "rate")
    return {
        "peer_split": round(split),
        "peer_split_runs": [round(run["rate"]) for run in split_runs],
        "peer_split_batches": round(_median(split_runs, "batches")),
        "split_share": round(split / peer, 3),
        "ratio_to_peer_split": round(ours / split, 3),
    }


def sdk_defaults() -> dict[str, int]:
    """The librdkafka settings ours changes, its queue bound from the default buffer bound."""
    from client_balance._kafka import LIBRDKAFKA_DEFAULTS  # noqa: PLC0415 - see the imports
    from client_balance._kafka._clients import fetch_queue_kbytes  # noqa: PLC0415 - imports

    queue = fetch_queue_kbytes(_default_settings().max_buffered_bytes)
    return {**LIBRDKAFKA_DEFAULTS, "queued.max.messages.kbytes": queue}


@functools.cache
def _default_settings() -> ClientBalanceSettings:
    """The SDK's settings with every default: made once per parent, not once per worker run."""
    from client_balance import ClientBalanceSettings  # noqa: PLC0415 - see the imports

    return ClientBalanceSettings(bootstrap_servers="localhost:9092", group_id="bench")


def run_first_message(args: argparse.Namespace, bootstrap: str, case: Case) -> dict[str, Any]:
    """Seconds to the first message, peer / ours."""
    backlog = FIRST_MESSAGE_BACKLOG[case.group]
    topic = f"bench-{case.group}-{backlog}x{args.size}b-{args.partitions}p"
    produce(bootstrap, topic, args.partitions, backlog * args.partitions, args.size)
    load_before = _load()
    our_runs, peer_runs, our_warmups, peer_warmups, _ = alternate(args, bootstrap, topic, case)
    ours, peer = _median(our_runs, "seconds"), _median(peer_runs, "seconds")
    return {
        "bench": BENCH,
        "case": case.name,
        "ours": round(ours, 3),
        "peer": round(peer, 3),
        "peer_name": peer_name(),
        "unit": "s",
        "ratio": round(peer / ours, 3),
        "peer_mode": FIRST_MESSAGE_PEERS[case.kafka["group.protocol"]],
        "peer_kafka": {**peer_settings(), **case.kafka},
        "partitions": args.partitions,
        "messages_per_partition": backlog,
        "runs": args.start_runs,
        "ours_runs": [round(run["seconds"], 3) for run in our_runs],
        "peer_runs": [round(run["seconds"], 3) for run in peer_runs],
        "warmup": args.start_warmup,
        "ours_warmup_runs": [round(run["seconds"], 3) for run in our_warmups],
        "peer_warmup_runs": [round(run["seconds"], 3) for run in peer_warmups],
        "librdkafka": confluent_kafka.libversion()[0],
        "load": [load_before, _load()],
    }


def plan(args: argparse.Namespace) -> list[Case]:
    """Every case of this run's settings, in order."""
    cases = [
        Case("throughput", batch, json.loads(kafka))
        for kafka in args.kafka or DEFAULT_KAFKA
        for batch in args.batch or DEFAULT_BATCHES
    ]
    if not (args.batch or args.kafka):
        cases.append(Case("throughput", **LARGE_MESSAGES))
        cases += [
            Case("throughput", batch, SAME_SETTINGS, gc_frozen=True) for batch in DEFAULT_BATCHES
        ]
    firsts = [
        Case(group, kafka={"group.protocol": protocol})
        for group in FIRST_MESSAGE_BACKLOG
        for protocol in ("consumer", "classic")
    ]
    return [*cases, *firsts]


@contextmanager
def broker() -> Iterator[tuple[str, str]]:
    """The bootstrap address and what it is: the env's cluster, or a fresh LocalKafka."""
    from client_balance.broker import DEFAULT_KAFKA_VERSION, LocalKafka  # noqa: PLC0415 - imports

    given = os.environ.get("CLIENT_BALANCE_BOOTSTRAP_SERVERS")
    if given:
        yield given, "CLIENT_BALANCE_BOOTSTRAP_SERVERS"
        return
    with LocalKafka() as kafka:
        yield kafka.bootstrap_servers, f"LocalKafka kafka-{DEFAULT_KAFKA_VERSION}"


def make_parser() -> argparse.ArgumentParser:
    """The command line of this script."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="NAME",
        help=f"run only this case or group ({', '.join(GROUPS)}); repeatable, see --list",
    )
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each side")
    parser.add_argument(
        "--warmup", type=int, default=1, help="throughput: untimed runs of each side first"
    )
    parser.add_argument(
        "--start-runs",
        type=int,
        default=START_RUNS,
        help=f"first message: timed runs of each side (default {START_RUNS})",
    )
    parser.add_argument(
        "--start-warmup",
        type=int,
        default=START_WARMUP,
        help=f"first message: untimed runs of each side first (default {START_WARMUP})",
    )
    parser.add_argument("--messages", type=int, default=1_000_000, help="throughput: messages")
    parser.add_argument("--size", type=int, default=100, help="bytes per message")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the topics")
    parser.add_argument(
        "--batch",
        type=int,
        action="append",
        default=[],
        help="throughput: batch_max_messages = consume(num_messages); repeatable "
        f"(default {', '.join(map(str, DEFAULT_BATCHES))})",
    )
    parser.add_argument(
        "--kafka",
        action="append",
        default=[],
        metavar="JSON",
        help="throughput: librdkafka settings for both sides; repeatable "
        f"(default {' and '.join(DEFAULT_KAFKA)})",
    )
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--gc-freeze", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the cases (or, with ``--worker``, one side once) and print their JSON lines."""
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.worker:
        result = WORKERS[args.worker](args)
        print(json.dumps({"worker": args.worker, **result}), flush=True)
        return 0
    if args.runs < 1 or args.start_runs < 1 or args.warmup < 0 or args.start_warmup < 0:
        parser.error("--runs and --start-runs must be >= 1, --warmup and --start-warmup >= 0")

    cases = plan(args)
    if args.list:
        print("\n".join(case.name for case in cases))
        return 0
    if args.case:
        cases = [case for case in cases if case.name in args.case or case.group in args.case]
        if not cases:
            parser.error(f"no case named {', '.join(args.case)}; see --list")
    with broker() as (bootstrap, where):
        print(
            json.dumps({"bench": BENCH, "broker": where, "cores": os.cpu_count()}),
            file=sys.stderr,
            flush=True,
        )
        for case in cases:
            run = run_throughput if case.group == "throughput" else run_first_message
            print(json.dumps(run(args, bootstrap, case)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
