"""The Prometheus recorder: the consumer's counts in a prometheus_client registry.

Counters and the round histogram are prometheus_client metrics, one set per registry that every
consumer on it shares (a registry refuses a name twice), told apart by the ``consumer`` label.
Gauges (held partitions, lag, and librdkafka's statistics) are read when the registry is
collected, from each consumer watching it, so they are never stale and vanish with the consumer.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from client_balance._logging import get_logger
from client_balance._metrics import HeldLags, Recorder, RoundOnce
from client_balance._metrics._http import Endpoint, serve
from client_balance._metrics._stats import FetchStatistics, parse_statistics
from client_balance.errors import ClientBalanceError
from client_balance.keys import TopicPartition
from client_balance.settings import ClientBalanceSettings

__all__ = ["PrometheusRecorder"]

_log = get_logger("metrics")

_MEMBER = ("group", "consumer")
_PARTITION = (*_MEMBER, "topic", "partition")
_ROUND_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _Families:
    """The metrics of one registry, shared by every consumer that records to it."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str, labels: tuple[str, ...] = _PARTITION) -> Counter:
            return Counter(f"client_balance_{name}", doc, labels, registry=registry)

        self.messages = counter("messages_delivered", "Messages handed to the application.")
        self.batches = counter("batches_delivered", "Batches handed to the application.")
        self.confirms = counter("batches_confirmed", "Batches confirmed as consumed.")
        self.rollbacks = counter("batches_rolled_back", "Batches confirmed with consumed=False.")
        self.redeliveries = counter(
            "batches_redelivered", "Batches handed out again from an offset rolled back to."
        )
        self.set_aside = counter(
            "batches_set_aside", "Batches skipped past max_redeliveries (redelivery_policy)."
        )
        self.rounds = counter("reconcile_rounds", "Reconcile rounds run.", _MEMBER)
        self.round_failures = counter(
            "reconcile_round_failures", "Reconcile rounds that raised.", _MEMBER
        )
        self.round_s = Histogram(
            "client_balance_reconcile_round_duration_seconds",
            "How long reconcile rounds took.",
            _MEMBER,
            registry=registry,
            buckets=_ROUND_BUCKETS_S,
        )
        self.won = counter("claims_won", "Claims on the status topic won.", _MEMBER)
        self.lost = counter("claims_lost", "Claims lost to a live holder.", _MEMBER)
        self.fenced = counter("fencing_events", "Times the member fenced itself.", _MEMBER)
        self.live = _LiveCollector()
        registry.register(self.live)
        # In the order of PrometheusRecorder's per-partition children.
        self.per_partition = (
            self.messages, self.batches, self.confirms, self.rollbacks, self.redeliveries,
            self.set_aside,
        )  # fmt: skip
        self.per_member = (
            self.rounds, self.round_failures, self.round_s, self.won, self.lost, self.fenced,
        )  # fmt: skip


_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, _Families]
_by_registry = weakref.WeakKeyDictionary()
_by_registry_lock = threading.Lock()


def _families(registry: CollectorRegistry) -> _Families:
    with _by_registry_lock:
        families = _by_registry.get(registry)
        if families is None:
            families = _by_registry[registry] = _Families(registry)
        return families


class PrometheusRecorder(Recorder):
    """One member's recorder; with ``metrics_port`` it serves its registry over HTTP."""

    enabled = True

    def __init__(
        self,
        settings: ClientBalanceSettings,
        consumer_id: str,
        registry: CollectorRegistry | None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.member = (settings.group_id, consumer_id)
        self._families = _families(self.registry)
        self._partitions: dict[TopicPartition, tuple[Any, ...]] = {}
        families = self._families
        self._rounds = families.rounds.labels(*self.member)
        self._round_failures = families.round_failures.labels(*self.member)
        self._round_s = families.round_s.labels(*self.member)
        self._won = families.won.labels(*self.member)
        self._lost = families.lost.labels(*self.member)
        self._fenced = families.fenced.labels(*self.member)
        self._rolled_back_to: dict[TopicPartition, int] = {}
        self.held: HeldLags | None = None
        self.fetched: FetchStatistics | None = None
        self._families.live.add(self)
        self._endpoint: Endpoint | None = None
        if settings.metrics_port is not None:
            try:
                self._endpoint = serve(
                    self.registry, settings.metrics_host, settings.metrics_port, "metrics_"
                )
            except BaseException:
                self.close()
                raise

    def _children(self, partition: TopicPartition) -> tuple[Any, ...]:
        children = self._partitions.get(partition)
        if children is None:
            labels = (*self.member, partition.topic, str(partition.partition))
            children = tuple(metric.labels(*labels) for metric in self._families.per_partition)
            self._partitions[partition] = children
        return children

    def delivered(self, partition: TopicPartition, messages: int, start: int) -> None:
        """Count a batch, its messages, and whether it is a redelivery."""
        children = self._children(partition)
        children[0].inc(messages)
        children[1].inc()
        if self._rolled_back_to.pop(partition, None) == start:
            children[4].inc()

    def settled(self, partition: TopicPartition, consumed: bool, position: int) -> None:
        """Count a confirm or a rollback."""
        if consumed:
            self._children(partition)[2].inc()
        else:
            self._children(partition)[3].inc()
            self._rolled_back_to[partition] = position

    def set_aside(self, partition: TopicPartition) -> None:
        """Count a batch skipped by the redelivery policy."""
        self._children(partition)[5].inc()

    def claimed(self, won: int, lost: int) -> None:
        """Count the claims of one registration."""
        self._won.inc(won)
        self._lost.inc(lost)

    def fenced(self) -> None:
        """Count a fencing."""
        self._fenced.inc()

    def statistics(self, text: str) -> None:
        """Keep the figures of librdkafka's latest statistics (from the fetching thread)."""
        try:
            self.fetched = parse_statistics(text)
        except ValueError as error:
            _log.warning("librdkafka statistics not understood", error=str(error))

    def timed(self, round_once: RoundOnce) -> RoundOnce:
        """``round_once``, counted and timed."""
        rounds, failures, duration = self._rounds, self._round_failures, self._round_s

        def timed_round(full: bool) -> None:
            started = time.perf_counter()
            try:
                round_once(full)
            except BaseException:
                failures.inc()
                raise
            finally:
                rounds.inc()
                duration.observe(time.perf_counter() - started)

        return timed_round

    def watch(self, held: HeldLags) -> None:
        """Read held partitions and lags from ``held`` at each collection."""
        self.held = held

    def close(self) -> None:
        """Stop serving; drop this member's series from the registry."""
        if self._endpoint is not None:
            self._endpoint.close()
            self._endpoint = None
        self._families.live.discard(self)
        for partition in self._partitions:
            labels = (*self.member, partition.topic, str(partition.partition))
            for metric in self._families.per_partition:
                metric.remove(*labels)
        for member_metric in self._families.per_member:
            member_metric.remove(*self.member)
        self._partitions.clear()


class _LiveCollector(Collector):
    """Gauges read at collection time from every recorder of one registry."""

    def __init__(self) -> None:
        self._recorders: set[PrometheusRecorder] = set()
        self._lock = threading.Lock()

    def add(self, recorder: PrometheusRecorder) -> None:
        with self._lock:
            self._recorders.add(recorder)

    def discard(self, recorder: PrometheusRecorder) -> None:
        with self._lock:
            self._recorders.discard(recorder)

    def describe(self) -> Iterator[Any]:
        """The families with no samples, so that the registry refuses their names twice."""
        return iter(_new_families().values())

    def collect(self) -> Iterator[Any]:
        """Held partitions, lag and librdkafka's figures of each recorder."""
        families = _new_families()
        with self._lock:
            recorders = list(self._recorders)
        for recorder in recorders:
            _add_fetched(families, recorder, _add_held(families, recorder))
        return iter(families.values())


def _new_families() -> dict[str, Any]:
    member, partition, broker = list(_MEMBER), list(_PARTITION), [*_MEMBER, "broker"]
    name = "client_balance_"
    return {
        "held": GaugeMetricFamily(f"{name}held_partitions", "Partitions held.", labels=member),
        "lag": GaugeMetricFamily(
            f"{name}lag_messages",
            "A held partition's high watermark minus its confirmed position.",
            labels=partition,
        ),
        "fetch_lag": GaugeMetricFamily(
            f"{name}fetch_consumer_lag_messages",
            "The last fetch's high watermark minus the member's committed offset.",
            labels=partition,
        ),
        "fetch_messages": CounterMetricFamily(
            f"{name}fetch_messages", "Messages the client fetched.", labels=partition
        ),
        "fetch_bytes": CounterMetricFamily(
            f"{name}fetch_bytes", "Message bytes the client fetched.", labels=partition
        ),
        "fetch_queue": GaugeMetricFamily(
            f"{name}fetch_queue_messages",
            "Messages fetched and waiting in librdkafka's queue.",
            labels=partition,
        ),
        "rtt_avg": GaugeMetricFamily(
            f"{name}broker_round_trip_avg_seconds",
            "Average request round trip to a broker over the last statistics interval.",
            labels=broker,
        ),
        "rtt_p99": GaugeMetricFamily(
            f"{name}broker_round_trip_p99_seconds",
            "99th percentile request round trip to a broker over the last interval.",
            labels=broker,
        ),
    }


def _add_held(families: dict[str, Any], recorder: PrometheusRecorder) -> dict[TopicPartition, int]:
    """The held partitions' gauges; returns their committed positions, where known."""
    if recorder.held is None:
        return {}
    try:
        held = list(recorder.held())
    except ClientBalanceError as error:  # the consumer is closing: its gauges are left out
        _log.debug("held partitions not read for metrics", error=str(error))
        return {}
    member = list(recorder.member)
    families["held"].add_metric(member, len(held))
    for partition, lag, _ in held:
        if lag is not None:
            families["lag"].add_metric([*member, partition.topic, str(partition.partition)], lag)
    return {partition: committed for partition, _, committed in held if committed is not None}


def _add_fetched(
    families: dict[str, Any], recorder: PrometheusRecorder, committed: dict[TopicPartition, int]
) -> None:
    fetched = recorder.fetched
    if fetched is None:
        return
    member = list(recorder.member)
    for at in fetched.partitions:
        labels = [*member, at.topic, str(at.partition)]
        # Commits go through a client of their own: the fetching client's statistics never
        # learn a committed offset, so the lag is the fetch's high minus the member's commit.
        position = committed.get(TopicPartition(at.topic, at.partition))
        if at.high_watermark is not None and position is not None:
            families["fetch_lag"].add_metric(labels, max(at.high_watermark - position, 0))
        families["fetch_messages"].add_metric(labels, at.messages)
        families["fetch_bytes"].add_metric(labels, at.bytes)
        families["fetch_queue"].add_metric(labels, at.queued_messages)
    for trip in fetched.brokers:
        families["rtt_avg"].add_metric([*member, trip.broker], trip.avg_s)
        families["rtt_p99"].add_metric([*member, trip.broker], trip.p99_s)
