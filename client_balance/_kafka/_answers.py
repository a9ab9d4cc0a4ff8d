"""Reading an admin request's answer: every future of confluent-kafka's admin API is read here.

confluent-kafka stores a failed request's ``KafkaException`` in its future. Raised as stored
(``future.result()``), the exception collects the frames it passes through, and frames that
hold the future close a cycle: exception, traceback, frame, future, exception. CPython frees a
cycle only at a collection of its generation, so the admin client in those frames lived on,
threads, connections and reconnect attempts included, long after the call had returned (an
``exist_ok`` topic creation left one behind every time). :func:`answer_of` raises a fresh
exception instead, which the future does not hold.
"""

from __future__ import annotations

import concurrent.futures
from typing import TypeVar

from confluent_kafka import KafkaException

__all__ = ["answer_of"]

_T = TypeVar("_T")


def answer_of(future: concurrent.futures.Future[_T], timeout_s: float | None = None) -> _T:
    """``future.result(timeout_s)``, with a failure raised as a new ``KafkaException``.

    Raises ``concurrent.futures.TimeoutError`` when no answer came within ``timeout_s``.
    """
    error = future.exception(timeout_s)
    if error is None:
        return future.result()
    if isinstance(error, KafkaException):
        raise KafkaException(*error.args)
    raise error  # not the client's (confluent-kafka failed to read the answer): as it came
