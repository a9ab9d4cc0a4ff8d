"""Broker start time: LocalKafka as shipped against Kafka's quickstart settings.

Both start from the same jars to the same point: the broker answers metadata and the group
coordinator serves offsets (what a test or the demo waits for). Ours uses the launcher's
defaults, including its class-data-sharing archive (written by the warm-up run). The peer is
Kafka's quickstart ``config/server.properties`` and ``kafka-server-start.sh`` settings (50
offsets partitions, 3 network and 8 IO threads, 1 GiB heap) on a plain JVM, which is what
starting Kafka's own scripts costs.

Prints one JSON line in the format of every bench script (``bench``, ``case``, ``ours``,
``peer``, ``peer_name``, ``unit``, ``ratio``): ``ours`` and ``peer`` are the median seconds over
alternating runs, ``unit`` is ``"s"``, and ``ratio`` = peer / ours, so above 1 means our broker
is ready sooner. ``ours_runs`` and ``peer_runs`` list the single runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable

from client_balance.broker import DEFAULT_KAFKA_VERSION, LocalKafka, ensure_kafka_jars

QUICKSTART = {
    "offsets.topic.num.partitions": "50",
    "num.network.threads": "3",
    "num.io.threads": "8",
}


def ours() -> LocalKafka:
    """The launcher's defaults."""
    return LocalKafka()


def peer() -> LocalKafka:
    """Kafka's shipped quickstart settings."""
    return LocalKafka(config=QUICKSTART, heap_mb=1024, class_data_sharing=False)


def time_start(make: Callable[[], LocalKafka]) -> float:
    """Seconds from start() to a broker ready for commits."""
    with make() as kafka:
        return kafka.startup_s or 0.0


def main(argv: list[str] | None = None) -> int:
    """Run the case and print its JSON line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    ensure_kafka_jars()  # a download must not count as start time
    time_start(ours)  # warms the page cache for both sides and writes ours' CDS archive
    our_times, peer_times = [], []
    for _ in range(args.runs):
        our_times.append(time_start(ours))
        peer_times.append(time_start(peer))
    ours_s, peer_s = statistics.median(our_times), statistics.median(peer_times)
    line = {
        "bench": "broker_start",
        "case": f"kafka-{DEFAULT_KAFKA_VERSION} start to ready for commits, median of {args.runs}",
        "ours": round(ours_s, 3),
        "peer": round(peer_s, 3),
        "peer_name": f"kafka-{DEFAULT_KAFKA_VERSION} quickstart config, 1 GiB heap, no CDS",
        "unit": "s",
        "ratio": round(peer_s / ours_s, 3),
        "ours_runs": [round(t, 3) for t in our_times],
        "peer_runs": [round(t, 3) for t in peer_times],
    }
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
