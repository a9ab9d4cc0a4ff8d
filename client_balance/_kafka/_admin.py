"""Cluster calls: readiness probes, group membership and the metadata of partitions."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from client_balance._kafka._answers import answer_of
from client_balance._kafka._clients import admin_client, group_client
from client_balance._kafka._errors import (
    AUTHENTICATION_CODES,
    from_kafka_exception,
    is_transient,
    timed_out,
)
from client_balance._kafka._metadata import topic_layouts
from client_balance._kafka._retry import BROKER_POLL_S, METADATA_POLL_S, wait_until
from client_balance._timing import Deadline
from client_balance.settings import KafkaValue

__all__ = [
    "ask_group_members",
    "check_login",
    "cluster_answers",
    "group_members",
    "partition_leader",
    "topics_metadata",
    "wait_for_brokers",
    "wait_for_group_coordinator",
]

_PROBE_GROUP = "__client_balance_probe"
_LEAST_WAIT_S = 0.001  # what a question asked past the shared deadline is given: it times out


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
    probe = admin_client(
        bootstrap_servers, kafka, {"log_level": 0, "reconnect.backoff.max.ms": 100}
    )

    def answers() -> bool:
        try:
            return bool(probe.list_topics(timeout=min(1.0, timeout_s)).brokers)
        except KafkaException:
            return False

    return wait_until(
        answers, timeout_s=timeout_s, interval_s=METADATA_POLL_S, keep_waiting=keep_waiting
    )


def check_login(
    bootstrap_servers: str,
    *,
    timeout_s: float,
    kafka: Mapping[str, KafkaValue] | None = None,
) -> None:
    """Return once a broker answers this client; raise at once if the cluster refuses its login.

    librdkafka retries a refused SASL login for ever and tells only its ``error_cb``: every
    request then waits out its whole timeout and fails with a vague transport error. This
    probe watches for the refusal and raises the authentication error within a moment.
    """
    refused: list[KafkaError] = []

    def on_error(error: KafkaError) -> None:
        if error.code() in AUTHENTICATION_CODES:
            refused.append(error)

    doing = "logging in to the cluster"
    probe = admin_client(bootstrap_servers, kafka, {"error_cb": on_error, "log_level": 0})

    def settled() -> bool:
        probe.poll(0)  # serves error_cb
        if refused:
            return True
        try:
            return bool(probe.list_topics(timeout=METADATA_POLL_S).brokers)
        except KafkaException:
            return False

    answered = wait_until(settled, timeout_s=timeout_s, interval_s=METADATA_POLL_S)
    if refused:
        raise from_kafka_exception(KafkaException(refused[0]), doing, kafka=kafka)
    if not answered:
        raise timed_out(doing, timeout_s, f"{bootstrap_servers} did not answer")


def group_members(
    bootstrap_servers: str,
    group_id: str,
    *,
    timeout_s: float = 10.0,
    kafka: Mapping[str, KafkaValue] | None = None,
    admin: AdminClient | None = None,
) -> list[str]:
    """Member ids of ``group_id``'s ``subscribe()`` members (client-balanced ones never join).

    A group that does not exist yet has none. ``admin``: a client to ask through (else a new one).
    """
    if admin is None:  # not ``admin or ...``: an AdminClient with nothing queued is falsy
        admin = admin_client(bootstrap_servers, kafka)
    return ask_group_members(admin, group_id, timeout_s=timeout_s, kafka=kafka)()


def ask_group_members(
    admin: AdminClient,
    group_id: str,
    *,
    timeout_s: float,
    kafka: Mapping[str, KafkaValue] | None = None,
) -> Callable[[], list[str]]:
    """Ask :func:`group_members` now; the call returned waits for the answer.

    The question goes out at once, so the caller does other work meanwhile without a thread.
    """
    futures = admin.describe_consumer_groups([group_id], request_timeout=timeout_s)
    doing = f"describing group {group_id!r}"

    def answer() -> list[str]:
        try:
            description = answer_of(futures[group_id], timeout_s)
        except KafkaException as error:
            raise from_kafka_exception(
                error, doing, kafka=kafka, operation="Describe", resource=group_id
            ) from error
        except concurrent.futures.TimeoutError:
            raise timed_out(doing, timeout_s, "the group coordinator did not answer") from None
        return sorted(member.member_id for member in description.members)

    return answer


def topics_metadata(admin: AdminClient, topics: Sequence[str], timeout_s: float) -> Any:
    """The metadata of ``topics`` through ``admin``, asked topic by topic.

    confluent-kafka's ``list_topics`` asks for one topic or for the whole cluster: a member of
    several topics asked for every topic of a shared cluster every full round. One request a
    topic costs a round trip each, 0.2 ms on one broker, against 7.6 ms for a cluster of 200
    topics of 10 partitions in one request (docs/benchmarks.md); what is read is what
    ``topic_layouts`` reads, ``.topics``. ``timeout_s`` bounds all of them together.

    Asked of an admin client, not of the fetching consumer: a metadata request there would wait
    for the client lock, and for the fetch in flight on the same connection, while the
    application waits for its batch.
    """
    deadline = Deadline(timeout_s)
    found: dict[str, Any] = {}
    try:
        for topic in topics:
            answer = admin.list_topics(topic, timeout=max(deadline.left_s(), _LEAST_WAIT_S))
            if topic in answer.topics:
                found[topic] = answer.topics[topic]
    except KafkaException as error:
        raise from_kafka_exception(error, "querying metadata") from error
    return TopicsMetadata(found)


class TopicsMetadata(NamedTuple):
    """Several topics' metadata answers together (``ClusterMetadata.topics`` of each)."""

    topics: dict[str, Any]


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
    probe = group_client(bootstrap_servers, _PROBE_GROUP, kafka, {"log_level": 0})
    doing = "waiting for the group coordinator"

    def serves() -> bool:
        try:
            probe.committed([KafkaTopicPartition(_PROBE_GROUP, 0)], timeout=5)
        except KafkaException as error:  # asked again only while it may pass (not an ACL)
            failed = from_kafka_exception(error, doing, kafka=kafka, operation="Describe")
            if is_transient(failed):
                return False
            raise failed from None
        return True

    try:
        if not wait_until(serves, timeout_s=timeout_s, interval_s=BROKER_POLL_S):
            raise timed_out(doing, timeout_s, "the offsets topic is not served yet")
    finally:
        probe.close()


def wait_for_brokers(
    bootstrap_servers: str,
    node_ids: Iterable[int],
    *,
    timeout_s: float,
    keep_waiting: Callable[[], bool] = lambda: True,
    kafka: Mapping[str, KafkaValue] | None = None,
) -> bool:
    """Poll until metadata lists every broker of ``node_ids``: True, or False at timeout.

    Metadata lists the brokers that are registered and unfenced, so a node that restarts is
    listed again once it has caught up with the cluster. ``keep_waiting`` as for
    :func:`cluster_answers`.
    """
    wanted = frozenset(node_ids)
    probe = admin_client(
        bootstrap_servers, kafka, {"log_level": 0, "reconnect.backoff.max.ms": 100}
    )

    def listed() -> bool:
        try:
            metadata = probe.list_topics(timeout=min(1.0, timeout_s))
        except KafkaException:
            return False
        return wanted <= set(metadata.brokers)

    return wait_until(
        listed, timeout_s=timeout_s, interval_s=METADATA_POLL_S, keep_waiting=keep_waiting
    )


def partition_leader(
    bootstrap_servers: str,
    topic: str,
    partition: int,
    *,
    timeout_s: float = 10.0,
    kafka: Mapping[str, KafkaValue] | None = None,
) -> int:
    """The node id leading ``topic``'s ``partition`` now, as metadata answers; -1 for none.

    -1 also stands for a topic or partition the cluster does not know.
    """
    admin = admin_client(bootstrap_servers, kafka, {"log_level": 0})
    try:
        metadata = admin.list_topics(topic, timeout=timeout_s)
    except KafkaException as error:
        raise from_kafka_exception(error, f"reading the leader of {topic}[{partition}]") from None
    leaders = topic_layouts(metadata, [topic])[topic].leaders
    return leaders[partition] if 0 <= partition < len(leaders) else -1
