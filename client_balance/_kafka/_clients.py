"""Factories for every confluent-kafka client the SDK makes, and the settings they merge.

Each factory starts from the user's ``kafka`` settings and lays the SDK's fixed keys over them,
so what a client must be (assign-only, no auto commit, no topic auto-creation) cannot be undone
by a setting. Nothing else in the package constructs a ``Consumer``, ``Producer`` or
``AdminClient``.
"""

from __future__ import annotations

import logging
import re
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from client_balance._kafka._log_pump import pumped
from client_balance._logging import ROOT_LOGGER
from client_balance._secrets import without_userinfo
from client_balance._timing import OncePer
from client_balance.keys import TopicPartition
from client_balance.settings import ClientBalanceSettings, KafkaValue

__all__ = [
    "LIBRDKAFKA_DEFAULTS",
    "AdminOwner",
    "RepeatedLines",
    "admin_client",
    "commit_client",
    "drop_queued",
    "fetch_client",
    "fetch_queue_kbytes",
    "group_client",
    "kafka_tp",
    "producer_client",
    "reader_client",
]

KafkaConfig = Mapping[str, Any]

LIBRDKAFKA_DEFAULTS: Mapping[str, int] = {
    # Bounds how long a commit waits for a group coordinator; nothing else uses it (no joins).
    "session.timeout.ms": 10_000,
    # A broker answers one connection's requests in order, so every metadata and watermark
    # query waits behind the fetch long poll in flight: with librdkafka's 500 ms, registering
    # n new partitions stalled the consumer n * 0.5 s.
    "fetch.wait.max.ms": 100,
    # librdkafka stops fetching a partition for this long whenever its queue holds
    # queued.min.messages (100,000, shared by all partitions); its 1,000 ms default left the
    # consumer idle most of each second on a backlog. Our own buffers bound memory, so a short
    # back-off costs nothing but a check per partition.
    "fetch.queue.backoff.ms": 10,
}
"""librdkafka settings the fetching consumer changes (docs/settings.md); ``kafka`` overrides."""

KAFKA_LOGGER = logging.getLogger(f"{ROOT_LOGGER}.kafka")
"""Where librdkafka's own log lines go (docs/logging.md), unless ``kafka`` names a ``logger``.

Without one, librdkafka writes them to stderr from C, past the application's logging: a
dead-letter producer or status writer cut off from its broker printed ``%3|...|FAIL|`` lines.
confluent-kafka hands them over in the client's ``poll()``, ``flush()`` or ``consume()``, so
only clients that make those calls get it: an admin client or a commit-only consumer that is
never polled would keep every line queued for as long as it lives.
"""


def _no_url_credentials(record: logging.LogRecord) -> bool:
    """Mask URLs' credentials: librdkafka repeats a token endpoint's URL in its log lines."""
    try:
        said = record.getMessage()
    except Exception:  # a malformed record: logging's own handleError reports it
        return True
    masked = without_userinfo(said)
    if masked != said:  # only then: a handler may group records by their template
        record.msg, record.args = masked, ()
    return True


class RepeatedLines:
    """Lets one of a run of alike librdkafka lines through per ``window_s``; says what it held.

    A broker that is down is tried again every ``reconnect.backoff.ms`` (10 ms here) without
    the back-off growing, and each try is a "Connect to ... failed" line: some 80 a second for
    each client, five clients a member. Lines alike but for their "after 3ms" timings count as
    one; the next one let through says how many were held back.
    """

    def __init__(self, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._window_s = window_s
        self._once = OncePer(window_s, clock)

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` goes on; one that does carries the count held back before it.

        Only librdkafka's lines (confluent-kafka's ``"%s [%s] %s"`` with facility, client and
        text) are judged: the SDK's own events on this logger carry their fields as attributes,
        so two of one name are not alike.
        """
        if not (isinstance(record.args, tuple) and len(record.args) == _LIBRDKAFKA_ARGS):
            return True
        try:
            said = record.getMessage()
        except Exception:  # a malformed record: logging's own handleError reports it
            return True
        held = self._once.admit(_TIMINGS.sub("ms", said))
        if held is None:
            return False
        if held:
            record.msg = f"{said} ({held} alike lines held back in the {self._window_s:g} s before)"
            record.args = ()
        return True


_TIMINGS = re.compile(r"\b\d+ms\b")
_LIBRDKAFKA_ARGS = 3

KAFKA_LOGGER.addFilter(_no_url_credentials)
KAFKA_LOGGER.addFilter(RepeatedLines())  # after the mask: it may rewrite what it lets through


def kafka_tp(partition: TopicPartition, offset: int | None = None) -> KafkaTopicPartition:
    """confluent-kafka's ``TopicPartition`` for ours (with an offset, for assign and commit)."""
    if offset is None:
        return KafkaTopicPartition(partition.topic, partition.partition)
    return KafkaTopicPartition(partition.topic, partition.partition, offset)


def admin_client(
    bootstrap_servers: str,
    kafka: Mapping[str, KafkaValue] | None = None,
    overrides: KafkaConfig | None = None,
) -> AdminClient:
    """An ``AdminClient``; a metadata request never creates a topic by accident.

    Its librdkafka lines go to :data:`KAFKA_LOGGER` (unless ``kafka`` names a ``logger``),
    served by ``_log_pump``: nothing else polls an admin client.
    """
    config: dict[str, Any] = {
        "logger": KAFKA_LOGGER,
        **(kafka or {}),
        **(overrides or {}),
        "bootstrap.servers": bootstrap_servers,
        "allow.auto.create.topics": False,
    }
    return pumped(AdminClient(config))


class AdminOwner:
    """Holds the one reference to an admin client that keeps it alive; lends weak proxies.

    confluent-kafka's ``AdminClient`` has no ``close()``: its threads and connections go when
    its last reference does. A member's parts refer to one another in cycles, which only the
    cyclic collector frees, whenever it next runs a full collection; so a stopped consumer's
    admin client, or a failed start's, lived on that long. Every part gets :meth:`lend`'s
    proxy instead, and :meth:`close` drops the client at once; a proxy used after that raises
    ``ReferenceError``.
    """

    def __init__(self, client: AdminClient) -> None:
        self._client: AdminClient | None = client

    def lend(self) -> AdminClient:
        """A weak proxy of the client, used as the client itself (it has its methods)."""
        if self._client is None:
            raise ReferenceError("the admin client is closed")
        return cast(AdminClient, weakref.proxy(self._client))

    def close(self) -> None:
        """Drop the client: librdkafka stops its threads and closes its connections."""
        self._client = None


def group_client(
    bootstrap_servers: str,
    group_id: str,
    kafka: Mapping[str, KafkaValue] | None = None,
    overrides: KafkaConfig | None = None,
) -> Consumer:
    """A consumer that never joins: reads and commits ``group_id``'s offsets, assign-only."""
    return Consumer(
        {
            **(kafka or {}),
            **(overrides or {}),
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "enable.auto.commit": False,
        }
    )


def fetch_queue_kbytes(max_buffered_bytes: int) -> int:
    """The prefetch queue (KiB) of a consumer buffering up to ``max_buffered_bytes``.

    The queue sits in front of the SDK's buffers: a quarter of their bound keeps the two
    together near it, from 1 MiB up to librdkafka's own default of 64 MiB.
    """
    return min(max(max_buffered_bytes // 4 // 1024, 1024), 65_536)


def fetch_client(
    settings: ClientBalanceSettings,
    on_error: Callable[[KafkaError], None],
    statistics: Callable[[str], None] | None = None,
) -> Consumer:
    """The fetching consumer of a ``ClientBalanceConsumer``: the SDK's librdkafka defaults.

    An ``error_cb`` of the user's runs after the SDK's own, which it cannot replace: the SDK
    learns from it that the client failed for good. With ``statistics_interval_ms`` and a
    ``statistics`` sink, librdkafka's statistics documents go to the sink, then to a user's
    ``stats_cb``.
    """
    queue = {"queued.max.messages.kbytes": fetch_queue_kbytes(settings.max_buffered_bytes)}
    # Connected to every broker at once, as the admin client is (docs/design-decisions.md):
    # with sparse connections the queries where each partition starts, the first a member
    # makes, waited out librdkafka's hold-back of the connection after the bootstrap one.
    eager = {"enable.sparse.connections": False}
    config = {"logger": KAFKA_LOGGER, **LIBRDKAFKA_DEFAULTS, **queue, **eager}
    config.update(settings.consumer_config())
    config["error_cb"] = _ours_first(on_error, config.get("error_cb"))
    if statistics is not None and settings.statistics_interval_ms:
        config["statistics.interval.ms"] = settings.statistics_interval_ms
        config["stats_cb"] = _ours_first(statistics, config.get("stats_cb"))
    return Consumer(config)


_NOT_FOR_COMMITS = ("error_cb", "stats_cb", "throttle_cb", "statistics.interval.ms")
"""The fetching client reports these already; a second report of each would only be noise."""


def commit_client(settings: ClientBalanceSettings) -> Consumer:
    """The consumer a ``ClientBalanceConsumer`` commits through: its settings, never assigned.

    confluent-kafka makes a client's calls one at a time: a commit waiting for an answer that
    a dropped link holds back kept the fetching client's ``consume()`` waiting with it (45 s
    seen on a 3-node cluster), so commits go through a client of their own.
    """
    config = {"logger": KAFKA_LOGGER, **LIBRDKAFKA_DEFAULTS, **settings.consumer_config()}
    for key in _NOT_FOR_COMMITS:
        config.pop(key, None)
    return Consumer(config)


def _ours_first(ours: Callable[[Any], None], users: Any) -> Callable[[Any], None]:
    """A librdkafka callback that calls the SDK's, then the user's from ``kafka`` if any."""

    def both(argument: Any) -> None:
        ours(argument)
        if users is not None:
            users(argument)

    return both


def reader_client(config: KafkaConfig) -> Consumer:
    """A one-off reader (a Spark task, a status reader): assign-only, no commits, no EOF events.

    A start below the log's start reads from its start, unless ``config`` says otherwise: a
    Spark task's reader sets ``auto.offset.reset=error`` to see the loss (``_ranges``).
    """
    return Consumer(
        {
            "logger": KAFKA_LOGGER,
            "auto.offset.reset": "earliest",
            **config,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )


def drop_queued(producer: Producer) -> None:
    """Drop what ``producer`` still holds, so that a write reported as failed never lands later."""
    producer.purge()
    producer.flush(0)  # serves the purged messages' delivery reports


def producer_client(
    bootstrap_servers: str,
    kafka: Mapping[str, KafkaValue] | None = None,
    overrides: KafkaConfig | None = None,
) -> Producer:
    """A ``Producer`` (the status topic's writer); it never creates a topic by accident.

    librdkafka's producer lets a metadata request create a missing topic by default, with the
    broker's defaults: a status topic made that way would be neither compacted nor stamped with
    log-append time. Without it, the writer may connect before the topic is ensured.
    """
    return Producer(
        {
            "logger": KAFKA_LOGGER,
            **(kafka or {}),
            **(overrides or {}),
            "bootstrap.servers": bootstrap_servers,
            "allow.auto.create.topics": False,
        }
    )
