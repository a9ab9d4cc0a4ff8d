"""Kafka I/O of the status topic: making sure it exists, writing records, reading a group.

The topic is compacted and stamps every record with the broker's log-append time, so leases
are judged by one clock. A group's records all go to the partition ``crc32(group) % n``, the
same for every member, so all of them read the group's records in one order.
"""

from __future__ import annotations

import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping

import structlog
from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]  # re-exported without __all__
from confluent_kafka.cimpl import NewTopic

from client_balance._kafka_errors import from_kafka_exception
from client_balance.errors import ConfigError, KafkaClientError
from client_balance.settings import KafkaValue
from client_balance.status._state import GroupState

__all__ = ["StatusReader", "StatusWriter", "ensure_status_topic", "status_partition"]

_log = structlog.get_logger("client_balance.status")

_TOPIC_EXISTS = 36  # TOPIC_ALREADY_EXISTS
_READ_WAIT_S = 0.1
_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "message.timestamp.type": "LogAppendTime",
    # Dead members' last records are all compaction keeps; clean often enough that a long
    # run does not replay much on start.
    "min.cleanable.dirty.ratio": "0.1",
    "segment.ms": "3600000",
}


def status_partition(group: str, partitions: int) -> int:
    """The status partition of ``group``: the same answer for every member."""
    return zlib.crc32(group.encode()) % partitions


def ensure_status_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    kafka: Mapping[str, KafkaValue],
    timeout_s: float,
) -> int:
    """Create the status topic if missing; check its settings; return its partition count.

    Raises :class:`ConfigError` when it exists but is not compacted or does not stamp
    log-append time: claims would then be lost to retention, or judged by each host's clock.
    """
    admin = AdminClient(
        {**kafka, "bootstrap.servers": bootstrap_servers, "allow.auto.create.topics": False}
    )
    try:
        metadata = admin.list_topics(topic, timeout=timeout_s)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            _create(admin, topic, timeout_s)
            return _wait_for_partitions(admin, topic, timeout_s)
        _check_config(admin, topic, timeout_s)
        return len(found.partitions)
    except KafkaException as error:
        raise from_kafka_exception(error, f"preparing the status topic {topic!r}") from error


def _create(admin: AdminClient, topic: str, timeout_s: float) -> None:
    new = NewTopic(topic, num_partitions=1, replication_factor=-1, config=_TOPIC_CONFIG)
    future = admin.create_topics([new], request_timeout=timeout_s)[topic]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as error:
        if error.args[0].code() != _TOPIC_EXISTS:  # another member created it meanwhile
            raise


def _wait_for_partitions(admin: AdminClient, topic: str, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while True:
        found = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if (
            found is not None
            and found.partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return len(found.partitions)
        if time.monotonic() > deadline:
            raise KafkaClientError(
                f"the status topic {topic!r} has no leader after {timeout_s} s",
                kafka_code=-185,
                kafka_name="_TIMED_OUT",
            )
        time.sleep(0.05)


def _check_config(admin: AdminClient, topic: str, timeout_s: float) -> None:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource], request_timeout=timeout_s)[resource]
    entries = configs.result(timeout=timeout_s)
    policy = entries["cleanup.policy"].value if "cleanup.policy" in entries else "delete"
    stamp = entries["message.timestamp.type"].value if "message.timestamp.type" in entries else ""
    if "compact" not in (policy or "").split(","):
        raise ConfigError(
            f"status topic {topic!r} has cleanup.policy={policy}; it must be compacted "
            "(cleanup.policy=compact), or claims and reports are deleted by retention. Fix it "
            "with kafka-configs.sh, or set status_topic to another name"
        )
    if stamp != "LogAppendTime":
        raise ConfigError(
            f"status topic {topic!r} has message.timestamp.type={stamp}; it must be "
            "LogAppendTime so that leases run on the broker's clock, not each host's. Fix it "
            "with kafka-configs.sh, or set status_topic to another name"
        )


class StatusWriter:
    """Writes a group's records and says where each landed (offset, broker time)."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        partition: int,
        *,
        kafka: Mapping[str, KafkaValue],
        timeout_s: float,
    ) -> None:
        self._topic, self._partition, self._timeout_s = topic, partition, timeout_s
        self._producer = Producer(
            {
                **kafka,
                "bootstrap.servers": bootstrap_servers,
                "acks": "all",
                # No idempotence: acquiring a producer id cost 0.5 s of every start, and a
                # record written twice by a retry changes nothing (same key, same meaning).
                "linger.ms": 0,
                "message.timeout.ms": int(timeout_s * 1000),
            }
        )
        self._lock = threading.Lock()
        # Fetch the topic's metadata now, while the reader starts: the first write would
        # otherwise wait for it.
        self._warm = threading.Thread(
            target=self._producer.list_topics, args=(topic, timeout_s), daemon=True
        )
        self._warm.start()

    def write(self, records: Iterable[tuple[bytes, bytes | None]]) -> list[tuple[int, int]]:
        """Write (key, value or None) records in order; (offset, broker ms) of each."""
        results: dict[int, tuple[int, int] | KafkaClientError] = {}

        def delivered(index: int) -> Callable[[object, object], None]:
            def report(error: object, message: object) -> None:
                if error is not None:
                    results[index] = from_kafka_exception(
                        KafkaException(error), "writing to the status topic"
                    )
                else:
                    _, stamp = message.timestamp()  # type: ignore[attr-defined]
                    results[index] = (message.offset(), stamp)  # type: ignore[attr-defined]

            return report

        with self._lock:
            count = 0
            for index, (key, value) in enumerate(records):
                self._producer.produce(
                    self._topic, value, key, partition=self._partition, on_delivery=delivered(index)
                )
                count += 1
            left = self._producer.flush(self._timeout_s)
        if left or len(results) < count:
            raise KafkaClientError(
                f"the status topic {self._topic!r} did not take {count} records within "
                f"{self._timeout_s} s",
                kafka_code=-185,
                kafka_name="_TIMED_OUT",
            )
        answers = []
        for index in range(count):
            result = results[index]
            if isinstance(result, KafkaClientError):
                raise result
            answers.append(result)
        return answers

    def close(self) -> None:
        """Deliver what is queued (bounded by the timeout) and drop the client."""
        self._producer.flush(self._timeout_s)


class StatusReader:
    """Follows a group's status partition in a thread and keeps its :class:`GroupState`."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        partition: int,
        group: str,
        *,
        kafka: Mapping[str, KafkaValue],
        timeout_s: float,
        on_change: Callable[[], None] = lambda: None,
        follow: bool = True,
        keep_records: bool = False,
    ) -> None:
        self.state = GroupState(group)
        self.records: list[tuple[bytes | None, bytes | None, int, int]] | None = (
            [] if keep_records else None
        )
        """Every record read as (key, value, offset, broker ms), when ``keep_records``."""
        self._on_change = on_change
        self._consumer = Consumer(
            {
                **kafka,
                "bootstrap.servers": bootstrap_servers,
                "group.id": f"__client_balance_status_reader-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "fetch.queue.backoff.ms": 10,
                "auto.offset.reset": "earliest",
            }
        )
        # An absolute start offset: librdkafka resolves OFFSET_BEGINNING with a delay of about
        # 0.5 s, which every start() of a member would wait for. Compaction keeps offsets, so
        # the log starts at 0 unless records were deleted; then "earliest" takes over.
        self._partition = KafkaTopicPartition(topic, partition)
        self._consumer.assign([KafkaTopicPartition(topic, partition, 0)])
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if follow:
            self._thread = threading.Thread(
                target=self._run, name="client-balance-status", daemon=True
            )
            self._thread.start()

    def _read_once(self) -> None:
        try:
            # consume() would wait out its timeout unless the whole batch arrived: poll() for
            # the first record, then take what else is there.
            first = self._consumer.poll(_READ_WAIT_S)
            messages = [] if first is None else [first]
            if first is not None:
                messages += self._consumer.consume(num_messages=10_000, timeout=0)
        except KafkaException as error:
            _log.warning("reading the status topic failed", error=str(error))
            return
        changed = False
        with self._lock:
            for message in messages:
                failure = message.error()
                offset = message.offset()
                if failure is not None or offset is None:
                    continue  # an end-of-partition event, or a fetch error librdkafka retries
                kind, stamp = message.timestamp()
                if kind != TIMESTAMP_LOG_APPEND_TIME:
                    stamp = int(time.time() * 1000)  # a foreign record; never decides a lease
                changed |= self.state.apply(message.key(), message.value(), offset, stamp)
                if self.records is not None:
                    self.records.append((message.key(), message.value(), offset, stamp))
            self._lock.notify_all()
        if changed:
            self._on_change()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._read_once()

    def wait_applied(self, offset: int, timeout_s: float) -> bool:
        """Wait until the record at ``offset`` is applied; False at timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self.state.position > offset, timeout_s)

    def read_to_end(self, timeout_s: float) -> None:
        """Without a thread: read up to the end the log has now (for one-off views).

        Up to the high watermark taken first, not to an end-of-partition event: while members
        keep writing, a reader may never see the log stand still at its end.
        """
        deadline = time.monotonic() + timeout_s
        try:
            _, end = self._consumer.get_watermark_offsets(self._partition, timeout=timeout_s)
        except KafkaException as error:
            raise from_kafka_exception(error, "reading the status topic") from error
        while self.state.position < end:
            if time.monotonic() > deadline:
                raise KafkaClientError(
                    f"could not read the status topic to its end within {timeout_s} s",
                    kafka_code=-185,
                    kafka_name="_TIMED_OUT",
                )
            self._read_once()

    @property
    def lock(self) -> threading.Condition:
        """Held while records are applied; hold it to read the state consistently."""
        return self._lock

    def close(self) -> None:
        """Stop following and drop the client."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._consumer.close()
