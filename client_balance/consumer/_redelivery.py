"""``max_redeliveries``: what happens to a batch the application keeps rolling back.

A batch rolled back (``confirm(..., consumed=False)``) comes again from the same offset. One
that can never be processed would stall its partition for good, so past ``max_redeliveries``
rollbacks at one offset the ``redelivery_policy`` applies: ``"raise"`` raises
:class:`RedeliveryLimitError` from the confirm that went over (the batch is rolled back all the
same; the application decides), ``"skip"`` confirms the batch when it comes again and logs its
range, ``"dead-letter"`` first produces its messages to ``dead_letter_topic`` (with headers
naming where they came from), then skips it.

Only what was rolled back every time is skipped: a batch that comes again longer than the
shortest one rolled back at that offset (messages arrived meanwhile) is cut there, and the
rest is delivered.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

from client_balance._kafka import (
    KafkaException,
    drop_queued,
    from_kafka_exception,
    producer_client,
    stopped,
    timed_out,
)
from client_balance._logging import get_logger
from client_balance.errors import KafkaClientError, RedeliveryLimitError
from client_balance.keys import TopicPartition
from client_balance.settings import ClientBalanceSettings

__all__ = ["Redeliveries"]

_log = get_logger("consumer")


class Redeliveries:
    """Counts rollbacks per partition at one offset and applies the policy past the limit."""

    def __init__(self, settings: ClientBalanceSettings) -> None:
        self._settings = settings
        self._limit = settings.max_redeliveries
        self._lock = threading.Lock()
        self._rollbacks: dict[TopicPartition, tuple[int, int, int, int]] = {}
        """Partition -> (offset rolled back to, the end of the shortest batch rolled back
        there, how many times in a row, the holding they were counted in)."""
        self._producer: Any = None
        self._producing = threading.Lock()  # a dead-letter write, or the close at shutdown
        self._closed = False

    def confirmed(self, partition: TopicPartition) -> None:
        """The partition moved on: its count starts over."""
        if self._limit is not None:
            with self._lock:
                self._rollbacks.pop(partition, None)

    def rolled_back(
        self, partition: TopicPartition, offset: int, end: int, key: str, holding: int = 0
    ) -> None:
        """Count a rollback of ``offset`` .. ``end``; raise past the limit under ``"raise"``.

        Counted in ``holding`` only: a partition released and held again (a topic re-created,
        a fence, a ``connect()``) starts over, or its new data at an old offset was skipped.
        """
        if self._limit is None:
            return
        with self._lock:
            at, until, count, was = self._rollbacks.get(partition, (offset, end, 0, holding))
            if at == offset and was == holding:
                count, until = count + 1, min(until, end)
            else:
                count, until = 1, end
            self._rollbacks[partition] = (offset, until, count, holding)
        if count > self._limit and self._settings.redelivery_policy == "raise":
            raise RedeliveryLimitError(
                f"the batch of {key} at offset {offset} was rolled back {count} times, more "
                f"than max_redeliveries={self._limit}; it was rolled back again. Skip it by "
                "confirming it, disconnect the partition, or set redelivery_policy",
                key=key,
                offset=offset,
                rollbacks=count,
            )

    def skip_until(self, partition: TopicPartition, start: int, holding: int = 0) -> int | None:
        """Where to stop skipping the batch at ``start``; None unless the policy skips it now.

        That is the end of the shortest batch rolled back at ``start`` in ``holding``: what
        lies past it was never handed out and rolled back, so it is delivered, not skipped.
        """
        if self._limit is None or self._settings.redelivery_policy == "raise":
            return None
        with self._lock:
            at, until, count, was = self._rollbacks.get(partition, (-1, -1, 0, holding))
        return until if at == start and was == holding and count > self._limit else None

    def set_aside(
        self, partition: TopicPartition, key: str, start: int, end: int, messages: list[Any]
    ) -> None:
        """Log (and, for ``"dead-letter"``, produce) messages ``start`` .. ``end`` to be skipped."""
        topic = self._settings.dead_letter_topic
        if self._settings.redelivery_policy == "dead-letter" and topic is not None:
            self._dead_letter(topic, partition, messages)
        _log.warning(
            "batch skipped after too many rollbacks",
            partition=key,
            start=start,
            end=end,
            messages=len(messages),
            policy=self._settings.redelivery_policy,
        )

    def close(self) -> None:
        """Close the dead-letter producer, if one was made (each write flushed what it sent)."""
        with self._producing:
            self._closed = True
            if self._producer is not None:
                self._producer.close()
                self._producer = None

    def _refused(self, error: BaseException, topic: str) -> KafkaClientError:
        """The dead-letter write's failure, naming the login and the ACL, without a secret."""
        return from_kafka_exception(
            error, f"producing to dead_letter_topic {topic!r}", kafka=self._settings.kafka,
            operation="Write", resource=topic,
        )  # fmt: skip

    def _dead_letter(self, topic: str, partition: TopicPartition, messages: list[Any]) -> None:
        with self._producing:
            if self._closed:
                raise stopped(
                    f"producing to dead_letter_topic {topic!r}: the consumer is shutting down"
                )
            self._produce(topic, partition, messages)

    def _produce(self, topic: str, partition: TopicPartition, messages: list[Any]) -> None:
        if self._producer is None:
            settings = self._settings
            # Idempotent: a retry after a leader moved neither doubles nor reorders a batch.
            self._producer = producer_client(
                settings.bootstrap_servers, settings.admin_config(),
                {"acks": "all", "enable.idempotence": True},
            )  # fmt: skip
        timeout_s = self._settings.request_timeout_s
        failures: list[Any] = []

        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                failures.append(error)

        try:
            for message in messages:
                origin = [
                    ("client_balance.topic", partition.topic.encode()),
                    ("client_balance.partition", str(partition.partition).encode()),
                    ("client_balance.offset", str(message.offset()).encode()),
                ]
                headers = [*(message.headers() or []), *origin]
                produce = partial(
                    self._producer.produce, topic, message.value(), message.key(),
                    headers=headers, on_delivery=delivered,
                )  # fmt: skip
                try:
                    produce()
                except BufferError:  # a batch past librdkafka's queue: deliver what it holds
                    if self._producer.flush(timeout_s):
                        raise
                    produce()
            left = self._producer.flush(timeout_s)
        except (KafkaException, BufferError) as error:
            drop_queued(self._producer)
            raise self._refused(error, topic) from error
        failed = failures[0] if failures else None  # before the purge adds its own reports
        if failed is not None or left:
            # What is still queued would be written whenever the topic or broker comes back,
            # and the batch is produced again at its next skip: each failed attempt would
            # leave one more copy in the dead-letter topic.
            drop_queued(self._producer)
        if failed is not None:
            raise self._refused(KafkaException(failed), topic)
        if left:
            raise timed_out(f"producing {left} messages to dead_letter_topic {topic!r}", timeout_s)
