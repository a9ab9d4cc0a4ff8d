"""librdkafka's statistics (``statistics.interval.ms``, ``stats_cb``): the figures we export.

librdkafka hands its client's statistics to ``stats_cb`` as one JSON document per interval
(https://github.com/confluentinc/librdkafka/blob/master/STATISTICS.md). Of it we keep, per
partition the client fetches, its consumer lag and what it received, and per broker the
request round trip. Pure: text in, plain data out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["BrokerTrip", "FetchStatistics", "PartitionFetch", "parse_statistics"]

_MICROSECONDS_PER_S = 1_000_000


@dataclass(frozen=True)
class PartitionFetch:
    """One partition as the fetching client sees it."""

    topic: str
    partition: int
    high_watermark: int | None
    """The high watermark of the last fetch (None before the first)."""
    messages: int
    """Messages received since the client started."""
    bytes: int
    """Message bytes received since the client started."""
    queued_messages: int
    """Messages fetched and waiting in librdkafka's queue for ``consume()``."""


@dataclass(frozen=True)
class BrokerTrip:
    """One broker's request round trip over the last interval."""

    broker: str
    avg_s: float
    p99_s: float


@dataclass(frozen=True)
class FetchStatistics:
    """The figures of one statistics document."""

    partitions: tuple[PartitionFetch, ...]
    brokers: tuple[BrokerTrip, ...]


_NOT_A_DOCUMENT = (TypeError, KeyError, AttributeError, ValueError, OverflowError, RecursionError)
"""What reading a document that is not librdkafka's may raise: ValueError is the JSON's own,
OverflowError a number past a double (``int(inf)``), RecursionError arrays nested too deep."""


def parse_statistics(text: str) -> FetchStatistics:
    """The figures of a librdkafka statistics document; ValueError if it is not one.

    Partitions the client does not fetch (librdkafka lists every partition of a topic it knows,
    and an internal ``-1``) are left out, and so are brokers without a node id (the bootstrap
    and coordinator connections) or without a round trip in the interval.
    """
    try:
        document = json.loads(text)
        return FetchStatistics(_partitions(document), _brokers(document))
    except _NOT_A_DOCUMENT as error:
        raise ValueError(f"not a librdkafka statistics document: {error!r}") from error


def _partitions(document: dict[str, Any]) -> tuple[PartitionFetch, ...]:
    found = []
    for topic, topic_stats in sorted(document.get("topics", {}).items()):
        for stats in topic_stats["partitions"].values():
            partition = int(stats["partition"])
            if partition < 0 or stats.get("fetch_state", "none") == "none":
                continue
            high = int(stats.get("hi_offset", -1))
            found.append(
                PartitionFetch(
                    topic=topic,
                    partition=partition,
                    high_watermark=high if high >= 0 else None,
                    messages=int(stats.get("rxmsgs", 0)),
                    bytes=int(stats.get("rxbytes", 0)),
                    queued_messages=int(stats.get("fetchq_cnt", 0)),
                )
            )
    return tuple(sorted(found, key=lambda p: (p.topic, p.partition)))


def _brokers(document: dict[str, Any]) -> tuple[BrokerTrip, ...]:
    found = []
    for name, stats in sorted(document.get("brokers", {}).items()):
        rtt = stats.get("rtt", {})
        if int(stats.get("nodeid", -1)) < 0 or not rtt.get("cnt"):
            continue
        found.append(
            BrokerTrip(
                broker=name,
                avg_s=rtt["avg"] / _MICROSECONDS_PER_S,
                p99_s=rtt["p99"] / _MICROSECONDS_PER_S,
            )
        )
    return tuple(found)
