"""Cluster calls: readiness probes, group membership, topics and the metadata of partitions."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
    AdminClient,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.cimpl import NewTopic  # admin re-exports it without __all__

from client_balance._kafka._clients import admin_client, group_client
from client_balance._kafka._errors import (
    AUTHENTICATION_CODES,
    AUTHORIZATION_CODES,
    from_kafka_exception,
    timed_out,
)
from client_balance._kafka._metadata import topic_layouts
from client_balance._kafka._retry import BROKER_POLL_S, METADATA_POLL_S, call_while, wait_until
from client_balance.errors import ConfigError
from client_balance.keys import check_topic_name
from client_balance.settings import KafkaValue

__all__ = [
    "TopicState",
    "check_login",
    "cluster_answers",
    "create_topics",
    "ensure_topic",
    "group_members",
    "partition_leader",
    "topics_metadata",
    "wait_for_brokers",
    "wait_for_group_coordinator",
]

_PROBE_GROUP = "__client_balance_probe"
_TOPIC_EXISTS = 36  # TOPIC_ALREADY_EXISTS
_UNKNOWN_TOPIC = 3  # UNKNOWN_TOPIC_OR_PART
_DENIED = frozenset(AUTHORIZATION_CODES)


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
    futures = admin.describe_consumer_groups([group_id], request_timeout=timeout_s)
    doing = f"describing group {group_id!r}"
    try:
        description = futures[group_id].result(timeout=timeout_s)
    except KafkaException as error:
        raise from_kafka_exception(
            error, doing, kafka=kafka, operation="Describe", resource=group_id
        ) from error
    except concurrent.futures.TimeoutError:
        raise timed_out(doing, timeout_s, f"{bootstrap_servers} did not answer") from None
    return sorted(member.member_id for member in description.members)


def topics_metadata(admin: AdminClient, topics: Sequence[str], timeout_s: float) -> Any:
    """The cluster's metadata for ``topics`` through ``admin``: one topic's alone, else all.

    Asked of an admin client, not of the fetching consumer: a metadata request there would wait
    for the client lock, and for the fetch in flight on the same connection, while the
    application waits for its batch.
    """
    try:
        if len(topics) == 1:
            return admin.list_topics(topics[0], timeout=timeout_s)
        return admin.list_topics(timeout=timeout_s)
    except KafkaException as error:
        raise from_kafka_exception(error, "querying metadata") from error


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
    try:
        wait_until(
            lambda: probe.committed([KafkaTopicPartition(_PROBE_GROUP, 0)], timeout=5) or True,
            timeout_s=timeout_s,
            interval_s=BROKER_POLL_S,
            retry_on=(KafkaException,),
        )
    except KafkaException as error:
        raise from_kafka_exception(error, "waiting for the group coordinator") from None
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
    admin = admin_client(bootstrap_servers, kafka)
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
    _wait_for_leaders(admin, topics, timeout_s)


def _leaders_known(admin: AdminClient, topic: str, at_least: int, timeout_s: float) -> int:
    """The partition count of ``topic`` once every partition has a leader, else 0."""
    found = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if (
        found is None
        or found.error is not None
        or len(found.partitions) < max(at_least, 1)
        or any(part.leader < 0 for part in found.partitions.values())
    ):
        return 0
    return len(found.partitions)


def _wait_for_leaders(admin: AdminClient, topics: Mapping[str, int], timeout_s: float) -> None:
    pending = dict(topics)

    def all_led() -> bool:
        for name in sorted(pending):
            if _leaders_known(admin, name, pending[name], min(timeout_s, 5.0)):
                del pending[name]
        return not pending

    if not wait_until(all_led, timeout_s=timeout_s, interval_s=METADATA_POLL_S):
        raise timed_out(
            f"waiting for leaders of topics {sorted(pending)}",
            timeout_s,
            "not every partition has a leader yet; is the cluster healthy?",
        )


class TopicState(NamedTuple):
    """A topic as :func:`ensure_topic` found or made it."""

    partitions: int
    replication_factor: int
    """The fewest replicas of any of its partitions."""
    brokers: int
    """Brokers in the cluster's metadata."""
    config: dict[str, str]
    """Its values of the keys asked for (for a topic just created: what it was created with)."""
    created: bool = False
    """Created by this call."""


MAX_REPLICATION_FACTOR = 3


def ensure_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    config: Mapping[str, str],
    kafka: Mapping[str, KafkaValue] | None,
    timeout_s: float,
    partitions: int = 1,
    admin: AdminClient | None = None,
) -> TopicState:
    """Create ``topic`` (``partitions``, ``config``) unless it exists; wait for its leaders.

    A created topic gets ``min(3, brokers)`` replicas and, with 3, ``min.insync.replicas=2``:
    one broker may fail without losing a write. An existing topic is left as it is and
    described (partitions, replicas, its values of the keys of ``config``). ``admin``: a client
    to ask through (else a new one).
    """
    if admin is None:  # not ``admin or ...``: an AdminClient with nothing queued is falsy
        admin = admin_client(bootstrap_servers, kafka)
    doing = f"preparing topic {topic!r}"
    operation = "Describe"  # the ACL each step needs, for an authorization error
    try:
        metadata = admin.list_topics(topic, timeout=timeout_s)
        brokers = len(metadata.brokers)
        found = metadata.topics.get(topic)
        if found is not None and found.error is not None and found.error.code() in _DENIED:
            raise KafkaException(found.error)  # not visible to us: creating it would mislead
        if found is not None and found.error is None and found.partitions:
            replicas = min(len(p.replicas) for p in found.partitions.values())
            operation = "DescribeConfigs"
            current = _config_of(admin, topic, config, timeout_s)
            return TopicState(len(found.partitions), replicas, brokers, current)
        factor = max(min(MAX_REPLICATION_FACTOR, brokers), 1)
        created = dict(config)
        if factor >= MAX_REPLICATION_FACTOR:
            created.setdefault("min.insync.replicas", str(factor - 1))
        new = NewTopic(topic, num_partitions=partitions, replication_factor=factor, config=created)
        operation = "Create"
        future = admin.create_topics([new], request_timeout=timeout_s)[topic]
        try:
            future.result(timeout=timeout_s)
        except KafkaException as error:
            if error.args[0].code() != _TOPIC_EXISTS:  # another member created it meanwhile
                raise
        count = wait_until(
            lambda: _leaders_known(admin, topic, partitions, timeout_s),
            timeout_s=timeout_s,
            interval_s=METADATA_POLL_S,
        )
    except KafkaException as error:
        raise from_kafka_exception(
            error, doing, kafka=kafka, operation=operation, resource=topic
        ) from error
    except concurrent.futures.TimeoutError:  # a create or config query left unanswered
        raise timed_out(doing, timeout_s) from None
    if not count:
        raise timed_out(doing, timeout_s, "it has no leader")
    return TopicState(count, factor, brokers, created, created=True)


def _config_of(
    admin: AdminClient, topic: str, keys: Iterable[str], timeout_s: float
) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, topic)

    def ask() -> Any:
        return admin.describe_configs([resource], request_timeout=timeout_s)[resource].result(
            timeout=timeout_s
        )

    # The metadata listed the topic, so "unknown" only says the broker answering has not
    # caught up yet (it restarted a moment ago): ask again within the time given.
    entries = call_while(ask, failing_with=_unknown_topic, timeout_s=timeout_s)
    return {key: str(entries[key].value or "") for key in keys if key in entries}


def _unknown_topic(error: BaseException) -> bool:
    return isinstance(error, KafkaException) and error.args[0].code() == _UNKNOWN_TOPIC


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
