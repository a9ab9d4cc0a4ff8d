"""Every partition's watermarks and a group's committed offset, read without joining the group.

Asked once per planned Spark read and per micro-batch, and by the operator tools. One answer
needs every partition's leader: a broker killed outright keeps answering ``_TIMED_OUT``,
``_UNKNOWN_PARTITION`` or ``_DESTROY_BROKER`` until the controller fences it (about 10 s) and
``OFFSET_NOT_AVAILABLE`` from its successor for a moment after. One attempt with the whole budget
spent it on the dead leader, and a streaming query died for good of one broker's loss (a chaos
run on a 3-node cluster). So attempts are short, each with a fresh client (one kept after such
an error still asked the dead broker), within the caller's budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from confluent_kafka import KafkaException

from client_balance._kafka._clients import group_client, kafka_tp
from client_balance._kafka._errors import from_kafka_exception, is_transient
from client_balance._kafka._metadata import described
from client_balance._kafka._retry import TRANSIENT_RETRY_S, call_while
from client_balance._timing import Deadline
from client_balance.errors import ConfigError, KafkaClientError
from client_balance.keys import TopicPartition
from client_balance.settings import KafkaValue

__all__ = ["partition_offsets"]

_ATTEMPT_S = 5.0
"""The longest one attempt waits: a leader that moved is found by the next."""
_LEADER_MOVING_CODES = frozenset({-190, -137, 78})
"""``_UNKNOWN_PARTITION``, ``_DESTROY_BROKER``, ``OFFSET_NOT_AVAILABLE``: a leader being replaced
(the transient codes, ``_TIMED_OUT`` and ``NOT_LEADER`` among them, count too)."""

Offsets = dict[TopicPartition, tuple[int, int, int | None]]


def partition_offsets(
    bootstrap_servers: str,
    group_id: str,
    topics: list[str],
    *,
    timeout_s: float = 30.0,
    kafka: Mapping[str, KafkaValue] | None = None,
    skip_missing: bool = False,
    matching: Callable[[str], bool] | None = None,
) -> Offsets:
    """Every partition of ``topics`` -> (low, high, ``group_id``'s committed offset or None).

    Raises :class:`ConfigError` naming a topic that does not exist, unless ``skip_missing``.
    ``matching`` adds every topic of the cluster whose name it accepts, from the same metadata.
    Asked again, with a fresh client, while a leader is being replaced, up to ``timeout_s``.
    """
    deadline = Deadline(timeout_s)

    def attempt() -> Offsets:
        left_s = max(min(_ATTEMPT_S, deadline.left_s()), TRANSIENT_RETRY_S)
        return _offsets_once(
            bootstrap_servers, group_id, topics,
            timeout_s=left_s, kafka=kafka, skip_missing=skip_missing, matching=matching,
        )  # fmt: skip

    return call_while(
        attempt, failing_with=_leader_moving, timeout_s=timeout_s, interval_s=TRANSIENT_RETRY_S
    )


def _leader_moving(error: BaseException) -> bool:
    return isinstance(error, KafkaClientError) and (
        is_transient(error) or error.kafka_code in _LEADER_MOVING_CODES
    )


def _offsets_once(
    bootstrap_servers: str,
    group_id: str,
    topics: list[str],
    *,
    timeout_s: float,
    kafka: Mapping[str, KafkaValue] | None,
    skip_missing: bool,
    matching: Callable[[str], bool] | None,
) -> Offsets:
    client = group_client(bootstrap_servers, group_id, kafka)
    try:
        asked = set(topics)
        metadata = described(
            client,
            lambda name: name in asked or (matching is not None and matching(name)),
            timeout_s,
        )
        if matching is not None:
            topics = [*topics, *sorted(set(filter(matching, metadata.topics)) - set(topics))]
        wanted = []
        for topic in topics:
            found = metadata.topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                if skip_missing:
                    continue
                raise ConfigError(f"topic {topic!r} does not exist")
            wanted += [TopicPartition(topic, number) for number in sorted(found.partitions)]
        answers = client.committed([kafka_tp(tp) for tp in wanted], timeout=timeout_s)
        failed = next((tp for tp in answers if tp.error is not None), None)
        if failed is not None:  # not "nothing committed", which starts over from the log start
            raise KafkaException(failed.error)
        committed = {
            TopicPartition(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None
            for tp in answers
        }
        answer = {}
        for tp in wanted:
            low, high = client.get_watermark_offsets(kafka_tp(tp), timeout=timeout_s)
            answer[tp] = (int(low), int(high), committed.get(tp))
        return answer
    except KafkaException as error:
        raise from_kafka_exception(error, f"reading offsets of {topics}") from error
    finally:
        client.close()
