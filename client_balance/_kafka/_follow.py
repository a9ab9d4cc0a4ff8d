"""Following partitions as messages arrive: a one-off reader with no end (``client-balance tail``).

Like :mod:`._ranges`, the reader never joins a group and never commits; unlike it, it has no
end offsets: it yields what arrives until the caller stops iterating, which closes the client.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from confluent_kafka import KafkaException, Message

from client_balance._kafka._clients import LIBRDKAFKA_DEFAULTS, kafka_tp, reader_client
from client_balance._kafka._errors import from_kafka_exception, is_transient
from client_balance.keys import TopicPartition

__all__ = ["follow"]

_BATCH_MESSAGES = 500


def follow(
    config: Mapping[str, Any], starts: Mapping[TopicPartition, int], *, wait_s: float = 0.5
) -> Iterator[Message]:
    """Messages of ``starts``' partitions from their offsets on, in arrival order, without end.

    A partition-level error that only says the cluster cannot be reached for now is waited
    out (librdkafka reconnects); any other is raised as :class:`KafkaClientError`.
    """
    doing = f"following {', '.join(map(str, sorted(starts)))}"
    consumer = reader_client({**LIBRDKAFKA_DEFAULTS, **config})
    try:
        consumer.assign([kafka_tp(tp, offset) for tp, offset in starts.items()])
        while True:
            try:
                messages = consumer.consume(num_messages=_BATCH_MESSAGES, timeout=wait_s)
            except KafkaException as error:
                raise from_kafka_exception(error, doing) from error
            for message in messages:
                problem = message.error()
                if problem is None:
                    yield message
                    continue
                mapped = from_kafka_exception(KafkaException(problem), doing)
                if not is_transient(mapped):
                    raise mapped
    finally:
        consumer.close()
