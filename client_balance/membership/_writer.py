"""Writing a group's records to its status partition (``_log`` reads them)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Mapping
from functools import partial

from client_balance._kafka import (
    KafkaException,
    drop_queued,
    from_kafka_exception,
    producer_client,
    stopped,
    timed_out,
)
from client_balance._timing import Deadline
from client_balance.errors import KafkaClientError
from client_balance.membership._signing import RecordSigner
from client_balance.settings import KafkaValue

__all__ = ["RECORD_MAX_BYTES", "StatusWriter"]

_LINGER_MAX_MS = 900_000  # librdkafka refuses a longer linger.ms
RECORD_MAX_BYTES = 64 * 1024 * 1024
"""The largest record the writer produces, before compression (librdkafka's own limit is
1,000,000 bytes): a member's report lists each partition it holds, about 100 bytes each, so
a member of 10,000 partitions writes a megabyte. What the topic takes after compression is
its ``max.message.bytes`` (8 MiB on a status topic the SDK creates)."""


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
        secret: bytes | None = None,
    ) -> None:
        self._topic, self._partition, self._timeout_s = topic, partition, timeout_s
        self._kafka = kafka
        self._signer = None if secret is None else RecordSigner(secret)
        self._producer = producer_client(
            bootstrap_servers,
            # Connected to every broker at once, as the admin client is (the user's kafka
            # wins): with sparse connections librdkafka dropped the bootstrap connection with
            # the warm-up's metadata request in it and held the next one back for 10 ms, and
            # the join's write waited that out (docs/design-decisions.md).
            {"enable.sparse.connections": False, **kafka},
            {
                "acks": "all",
                # A retry must not land a write's later batch before its earlier one: readers
                # tell replays by each writer's sequence (_signing), and a claim is read back
                # up to its last record.
                "max.in.flight.requests.per.connection": 1,
                # No idempotence: acquiring a producer id cost 0.5 s of every start, and a
                # record written twice by a retry changes nothing (same key, same meaning).
                # Every write ends in flush(), which sends at once whatever the linger; the
                # linger keeps a write's records together until then. With 0 the producer
                # could send a join's report before its claims were queued: two requests,
                # two broker times, where the join is meant to be one write. Half the
                # message timeout, not a short one: a thread stalled between two records (a
                # loaded machine) must not see the linger run out mid-write.
                "linger.ms": min(_LINGER_MAX_MS, int(timeout_s * 500)),
                "message.timeout.ms": int(timeout_s * 1000),
                # Reports are JSON with a key per held partition: lz4 makes a 1.76 MB report of
                # 20,000 partitions 0.58 MB (tests/integration/test_status_size.py). Not zstd
                # (0.32 MB): librdkafka sets up a zstd context for every batch it reads, and a
                # start replays every batch of its status partition, one per write: 2,000 of
                # them took 55 ms with zstd, 8 ms with lz4, the reader's time before a join
                # reads itself back on the way to the first message.
                "compression.type": "lz4",
                "message.max.bytes": RECORD_MAX_BYTES,
            },
        )
        self._lock = threading.Lock()
        self._closed = False
        # The topic's metadata now, while the topic is checked: the first write would wait for it.
        self._warm = threading.Thread(target=self._warm_up, args=(topic, timeout_s), daemon=True)
        self._warm.start()

    def _warm_up(self, topic: str, timeout_s: float) -> None:
        # Best effort: a broker out of reach now is the first write's to report, with context.
        with contextlib.suppress(KafkaException):
            self._producer.list_topics(topic, timeout_s)

    def write(
        self, records: Iterable[tuple[bytes, bytes | None]], *, within_s: float | None = None
    ) -> list[tuple[int, int]]:
        """Write (key, value or None) records in order; (offset, broker ms) of each.

        Waits at most the writer's timeout, or ``within_s`` if that is sooner. Records that had
        no answer by then are dropped from the producer's queue: a write reported as failed
        must not land later (a report after its member's fence, a claim given up).
        """
        wait_s = self._timeout_s if within_s is None else max(0.0, min(within_s, self._timeout_s))
        deadline = Deadline(wait_s)
        results: dict[int, tuple[int, int] | KafkaClientError] = {}
        doing = f"writing to the status topic {self._topic!r}"

        largest = 0  # bytes of the largest value: what a size limit refused

        def refused(error: KafkaException) -> KafkaClientError:
            return from_kafka_exception(
                error,
                f"{doing} (the largest record {largest:,} bytes before compression)",
                kafka=self._kafka,
                operation="Write",
                resource=self._topic,
            )

        def delivered(index: int) -> Callable[[object, object], None]:
            def report(error: object, message: object) -> None:
                if error is not None:
                    results[index] = refused(KafkaException(error))
                else:
                    _, stamp = message.timestamp()  # type: ignore[attr-defined]
                    results[index] = (message.offset(), stamp)  # type: ignore[attr-defined]

            return report

        # Records produced before the partition's leader is known wait apart and are moved to
        # it one by one once it is; with flush() under way the producer may send the first of
        # them alone: two requests, two broker times. Known first, they wait for flush().
        self._warm.join(deadline.left_s())
        with self._lock:
            if self._closed:
                raise stopped(f"{doing}: the writer is closed")
            count = 0
            for index, (key, value) in enumerate(records):
                # Signed under the lock: a writer's sequence numbers go out in their order.
                headers = None if self._signer is None else self._signer.headers(key, value)
                largest = max(largest, len(value or b""))
                produce = partial(
                    self._producer.produce, self._topic, value, key, partition=self._partition,
                    on_delivery=delivered(index), headers=headers,
                )  # fmt: skip
                try:
                    try:
                        produce()
                    except BufferError:  # librdkafka's queue is full: deliver what it holds
                        self._producer.flush(deadline.left_s())
                        produce()
                except KafkaException as error:  # refused before sending: a topic not writable
                    raise refused(error) from error
                except BufferError as error:
                    why = "the producer's queue stays full"
                    raise timed_out(doing, wait_s, why) from error
                count += 1
            left = self._producer.flush(deadline.left_s())
            if left or len(results) < count:
                drop_queued(self._producer)
        if left or len(results) < count:
            raise timed_out(f"writing {count} records to the status topic {self._topic!r}", wait_s)
        answers = []
        for index in range(count):
            result = results[index]
            if isinstance(result, KafkaClientError):
                raise result
            answers.append(result)
        return answers

    def close(self) -> None:
        """Deliver what is queued (bounded by the timeout), then close the client. Idempotent.

        Closed, not only flushed: a stopped member kept the producer's threads and connections
        for as long as the application kept the consumer. What is still queued after the
        timeout is dropped; a write after this raises :class:`KafkaClientError`.
        """
        self._warm.join(self._timeout_s)  # its metadata call must not outlive the client
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._producer.flush(self._timeout_s):
                self._producer.purge()  # undeliverable now: close() would wait for them again
            self._producer.close()
