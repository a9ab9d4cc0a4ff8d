"""The one place where errors of the Kafka client become :class:`KafkaClientError`.

Duck-typed on ``KafkaException.args[0]`` (a ``KafkaError``), so this module needs no import of
confluent-kafka and the mapping stays testable with a stand-in.
"""

from __future__ import annotations

from typing import Any

from client_balance.errors import KafkaClientError

__all__ = ["from_kafka_exception"]


def from_kafka_exception(error: BaseException, doing: str) -> KafkaClientError:
    """Map a ``KafkaException`` (or a plain ``KafkaError``) raised while ``doing`` something."""
    kafka_error: Any = error.args[0] if error.args else None
    code_of = getattr(kafka_error, "code", None)
    if not callable(code_of):
        return KafkaClientError(
            f"{doing} failed: {error}", kafka_code=-1, kafka_name=type(error).__name__
        )
    name = str(kafka_error.name())
    text = str(kafka_error.str())
    return KafkaClientError(
        f"{doing} failed: {name}: {text}",
        kafka_code=int(code_of()),
        kafka_name=name,
        retriable=bool(kafka_error.retriable()),
    )
