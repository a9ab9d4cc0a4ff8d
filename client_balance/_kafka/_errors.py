"""The one place where errors of the Kafka client become :class:`KafkaClientError`.

Duck-typed on ``KafkaException.args[0]`` (a ``KafkaError``), so the mapping stays testable with
a stand-in. :func:`timed_out` is the one way to say "no answer in time", and
:func:`is_transient` the one judgement of whether an error only means "not reachable for now".
"""

from __future__ import annotations

from typing import Any

from client_balance.errors import ClientBalanceError, KafkaClientError

__all__ = [
    "GROUP_IN_USE_CODES",
    "TIMED_OUT",
    "TRANSIENT_KAFKA_CODES",
    "from_kafka_exception",
    "is_transient",
    "timed_out",
]

TIMED_OUT = -185
"""librdkafka's ``RD_KAFKA_RESP_ERR__TIMED_OUT``."""

# librdkafka codes that mean "not reachable right now": transport, timeouts, no brokers,
# resolution, waiting for a coordinator, and the broker's own retriable coordinator/leader codes.
TRANSIENT_KAFKA_CODES = frozenset({-195, -187, TIMED_OUT, -193, -180, 5, 6, 7, 14, 15, 16})

# Commits that fail with these mean someone subscribe()s with our group id.
GROUP_IN_USE_CODES = frozenset({22, 25, 27})  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE


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


def timed_out(doing: str, timeout_s: float, why: str = "") -> KafkaClientError:
    """The error of ``doing`` something that got no (good) answer within ``timeout_s``."""
    detail = f": {why}" if why else ""
    return KafkaClientError(
        f"{doing} failed: no answer within {timeout_s:g} s{detail}",
        kafka_code=TIMED_OUT,
        kafka_name="_TIMED_OUT",
        retriable=True,
    )


def is_transient(error: ClientBalanceError) -> bool:
    """Whether ``error`` only says the cluster cannot be reached for now."""
    return isinstance(error, KafkaClientError) and (
        error.retriable or error.kafka_code in TRANSIENT_KAFKA_CODES
    )
