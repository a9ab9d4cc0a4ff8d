"""Operator and setup calls against a Kafka cluster.

Readiness probes and topic creation, and the operator view of client-balanced groups:
``GroupView.load(settings, group)``, ``list_groups``, ``reset_offsets``, and the group offset
helpers ``partition_offsets`` and ``commit_offsets`` (defined in ``client_balance._group_view``).
Every ``confluent_kafka`` error is turned into :class:`~client_balance.errors.KafkaClientError`.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # admin re-exports it without __all__

from client_balance._group_view import (
    GroupView,
    MemberView,
    PartitionView,
    commit_offsets,
    list_groups,
    partition_offsets,
    reset_offsets,
)
from client_balance._kafka_errors import from_kafka_exception
from client_balance.errors import ConfigError, KafkaClientError
from client_balance.keys import check_topic_name
from client_balance.settings import KafkaValue

__all__ = [
    "GroupView",
    "MemberView",
    "PartitionView",
    "cluster_answers",
    "commit_offsets",
    "create_topics",
    "group_members",
    "list_groups",
    "partition_offsets",
    "reset_offsets",
    "wait_for_group_coordinator",
]

_PROBE_GROUP = "__client_balance_probe"
_TIMED_OUT = -185  # librdkafka's RD_KAFKA_RESP_ERR__TIMED_OUT


def _admin(bootstrap_servers: str, kafka: Mapping[str, KafkaValue] | None) -> AdminClient:
    # Never let a metadata request create a topic by accident on brokers that allow it.
    return AdminClient(
        {**(kafka or {}), "bootstrap.servers": bootstrap_servers, "allow.auto.create.topics": False}
    )


def cluster_answers(
    bootstrap_servers: str,
    *,
    timeout_s: float = 1.0,
    keep_waiting: Callable[[], bool] = lambda: True,
    kafka: Mapping[str, KafkaValue] | None = None,
) -> bool:
    """Poll until a broker at ``bootstrap_servers`` answers metadata: True, or False at timeout.

    ``keep_waiting`` is asked between attempts; returning False gives up early (for example
    when the broker process has exited).
    """
    # One quiet client for all attempts: reconnects are cheap, while each new client costs a
    # thread and logs every refused connection. A short backoff notices the broker at once.
    probe = _admin(
        bootstrap_servers,
        {**(kafka or {}), "log_level": 0, "reconnect.backoff.max.ms": 100},
    )
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if probe.list_topics(timeout=min(1.0, timeout_s)).brokers:
                return True
        except KafkaException:
            pass
        if time.monotonic() > deadline or not keep_waiting():
            return False
        time.sleep(0.05)


def group_members(
    bootstrap_servers: str,
    group_id: str,
    *,
    timeout_s: float = 10.0,
    kafka: Mapping[str, KafkaValue] | None = None,
) -> list[str]:
    """Member ids of ``group_id``'s ``subscribe()`` members (client-balanced ones never join).

    A group that does not exist yet has none.
    """
    admin = _admin(bootstrap_servers, kafka)
    futures = admin.describe_consumer_groups([group_id], request_timeout=timeout_s)
    try:
        description = futures[group_id].result(timeout=timeout_s)
    except KafkaException as error:
        raise from_kafka_exception(error, f"describing group {group_id!r}") from error
    except concurrent.futures.TimeoutError:
        raise KafkaClientError(
            f"describing group {group_id!r} failed: no answer from {bootstrap_servers} within "
            f"{timeout_s} s",
            kafka_code=_TIMED_OUT,
            kafka_name="_TIMED_OUT",
            retriable=True,
        ) from None
    return sorted(member.member_id for member in description.members)


def wait_for_group_coordinator(
    bootstrap_servers: str,
    *,
    timeout_s: float = 30.0,
    kafka: Mapping[str, KafkaValue] | None = None,
) -> None:
    """Block until the group coordinator serves offset fetches (creates ``__consumer_offsets``).

    The first group call on a fresh cluster creates the offsets topic; until it is loaded,
    commits are retried with COORDINATOR_NOT_AVAILABLE. Raises KafkaClientError at the deadline.

    This asks through a Consumer's ``committed()``, never AdminClient's
    ``list_consumer_group_offsets``: librdkafka (2.16.1, issue #5040) dereferences a NULL
    consumer-group handle when that admin call meets NOT_COORDINATOR, which is exactly what a
    fresh cluster answers, and the process dies with SIGSEGV.
    """
    probe = Consumer({
        **(kafka or {}), "bootstrap.servers": bootstrap_servers, "group.id": _PROBE_GROUP,
        "enable.auto.commit": False, "log_level": 0,
    })  # fmt: skip
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                probe.committed([KafkaTopicPartition(_PROBE_GROUP, 0)], timeout=5)
            except KafkaException as error:
                if time.monotonic() > deadline:
                    raise from_kafka_exception(error, "waiting for the group coordinator") from None
                time.sleep(0.1)
            else:
                return
    finally:
        probe.close()


def create_topics(
    bootstrap_servers: str,
    topics: Mapping[str, int],
    *,
    config: Mapping[str, str] | None = None,
    kafka: Mapping[str, KafkaValue] | None = None,
    exist_ok: bool = False,
    timeout_s: float = 30.0,
) -> None:
    """Create ``topics`` (name -> partition count) and wait until their leaders are known."""
    for name, count in topics.items():
        check_topic_name(name)
        if type(count) is not int or count < 1:
            raise ConfigError(
                f"partition count {count!r} of topic {name!r} is not allowed; use an int >= 1"
            )
    admin = _admin(bootstrap_servers, kafka)
    new = [
        NewTopic(name, num_partitions=count, config=dict(config or {}))
        for name, count in sorted(topics.items())
    ]
    futures = admin.create_topics(new, operation_timeout=timeout_s, request_timeout=timeout_s)
    for name, future in sorted(futures.items()):
        try:
            future.result()
        except KafkaException as error:
            if exist_ok and error.args[0].name() == "TOPIC_ALREADY_EXISTS":
                continue
            raise from_kafka_exception(error, f"creating topic {name!r}") from None
    _wait_for_leaders(admin, topics, time.monotonic() + timeout_s)


def _wait_for_leaders(admin: AdminClient, topics: Mapping[str, int], deadline: float) -> None:
    pending = dict(topics)
    while pending:
        metadata = admin.list_topics(timeout=5)
        for name in list(pending):
            topic = metadata.topics.get(name)
            if (
                topic is not None
                and topic.error is None
                and all(part.leader >= 0 for part in topic.partitions.values())
                and len(topic.partitions) >= pending[name]
            ):
                del pending[name]
        if pending and time.monotonic() > deadline:
            raise KafkaClientError(
                f"topics {sorted(pending)} have no leader for every partition yet; is the "
                "cluster healthy?",
                kafka_code=-185,
                kafka_name="_TIMED_OUT",
                retriable=True,
            )
        if pending:
            time.sleep(0.05)
