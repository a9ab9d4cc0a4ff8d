"""Topics the SDK creates: the status topic (checked every start) and the CLI's own topics."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
    AdminClient,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.cimpl import NewTopic  # admin re-exports it without __all__

from client_balance._kafka._answers import answer_of
from client_balance._kafka._clients import admin_client
from client_balance._kafka._errors import AUTHORIZATION_CODES, from_kafka_exception, timed_out
from client_balance._kafka._retry import METADATA_POLL_S, call_while, wait_until
from client_balance._logging import get_logger
from client_balance.errors import ConfigError
from client_balance.keys import check_topic_name
from client_balance.settings import KafkaValue

__all__ = ["TopicState", "ask_topic_id", "create_topics", "ensure_topic"]

_log = get_logger("admin")

_TOPIC_EXISTS = 36  # TOPIC_ALREADY_EXISTS
_UNKNOWN_TOPIC = 3  # UNKNOWN_TOPIC_OR_PART
_MISSING_CODES = frozenset({_UNKNOWN_TOPIC, -188})  # and librdkafka's own _UNKNOWN_TOPIC
_DENIED = frozenset(AUTHORIZATION_CODES)


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
    leaders = dict(topics)  # how many partitions must have a leader, per topic
    for name, future in sorted(futures.items()):
        try:
            answer_of(future)
        except KafkaException as error:
            if exist_ok and error.args[0].name() == "TOPIC_ALREADY_EXISTS":
                leaders[name] = 1  # as many as it has: waiting for the count asked never ends
                continue
            raise from_kafka_exception(error, f"creating topic {name!r}") from None
    try:
        _wait_for_leaders(admin, leaders, timeout_s)
    except KafkaException as error:
        raise from_kafka_exception(error, f"waiting for leaders of {sorted(topics)}") from None


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

    led = wait_until(
        all_led, timeout_s=timeout_s, interval_s=METADATA_POLL_S, retry_on=(KafkaException,)
    )  # a metadata request that failed: asked again
    if not led:
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
    create: bool = True,
) -> TopicState:
    """Create ``topic`` (``partitions``, ``config``) unless it exists; wait for its leaders.

    Without ``create`` a missing topic is left missing: its state has 0 partitions.

    A created topic gets ``min(3, brokers)`` replicas and, with 3, ``min.insync.replicas=2``:
    one broker may fail without losing a write. An existing topic is left as it is and
    described (partitions, replicas, its values of the keys of ``config``). ``admin``: a client
    to ask through (else a new one).
    """
    if admin is None:  # not ``admin or ...``: an AdminClient with nothing queued is falsy
        admin = admin_client(bootstrap_servers, kafka)
    doing = f"preparing topic {topic!r}"
    operation = "Describe"  # the ACL each step needs, for an authorization error
    resource = ConfigResource(ResourceType.TOPIC, topic)
    try:
        # The config is asked beside the metadata, before it says the topic exists: where it
        # does (every start but a cluster's first), both answers come in one round trip, on the
        # way to the first message. Where it does not, the answer is left unread.
        asked = admin.describe_configs([resource], request_timeout=timeout_s)[resource]
        metadata = admin.list_topics(topic, timeout=timeout_s)
        brokers = len(metadata.brokers)
        found = metadata.topics.get(topic)
        if found is not None and found.error is not None and found.error.code() in _DENIED:
            raise KafkaException(found.error)  # not visible to us: creating it would mislead
        if found is not None and found.error is None and found.partitions:
            operation = "DescribeConfigs"
            return _existing(admin, found, brokers=brokers, resource=resource, keys=config,
                             timeout_s=timeout_s, asked=asked)  # fmt: skip
        if not create:
            return TopicState(0, 0, brokers, {})
        factor = max(min(MAX_REPLICATION_FACTOR, brokers), 1)
        if factor < MAX_REPLICATION_FACTOR:  # only those that answer count: some may be down
            _log.info("creating a topic with fewer replicas: only these brokers answer",
                      topic=topic, replicas=factor, brokers=brokers)  # fmt: skip
        created = dict(config)
        if factor >= MAX_REPLICATION_FACTOR:
            created.setdefault("min.insync.replicas", str(factor - 1))
        new = NewTopic(topic, num_partitions=partitions, replication_factor=factor, config=created)
        operation = "Create"
        future = admin.create_topics([new], request_timeout=timeout_s)[topic]
        raced = False
        try:
            answer_of(future, timeout_s)
        except KafkaException as error:
            if error.args[0].code() != _TOPIC_EXISTS:
                raise
            raced = True  # created meanwhile by another client, with its own replicas
        count = wait_until(
            lambda: _leaders_known(admin, topic, partitions, timeout_s),
            timeout_s=timeout_s,
            interval_s=METADATA_POLL_S,
        )
        if raced and count:
            operation = "DescribeConfigs"
            found = admin.list_topics(topic, timeout=timeout_s).topics[topic]
            return _existing(admin, found, brokers=brokers, resource=resource, keys=config,
                             timeout_s=timeout_s, asked=asked)  # fmt: skip
    except KafkaException as error:
        raise from_kafka_exception(
            error, doing, kafka=kafka, operation=operation, resource=topic
        ) from error
    except concurrent.futures.TimeoutError:  # a create or config query left unanswered
        raise timed_out(doing, timeout_s) from None
    if not count:
        raise timed_out(doing, timeout_s, "it has no leader")
    return TopicState(count, factor, brokers, created, created=True)


def _existing(
    admin: AdminClient,
    found: Any,
    *,
    brokers: int,
    resource: ConfigResource,
    keys: Iterable[str],
    timeout_s: float,
    asked: concurrent.futures.Future[Any],
) -> TopicState:
    """The state of a topic that exists (``found``: its metadata) as it is, not as asked."""
    replicas = min(len(p.replicas) for p in found.partitions.values())
    current = _config_of(admin, resource, keys, timeout_s, asked)
    return TopicState(len(found.partitions), replicas, brokers, current)


def _config_of(
    admin: AdminClient,
    resource: ConfigResource,
    keys: Iterable[str],
    timeout_s: float,
    asked: concurrent.futures.Future[Any],
) -> dict[str, str]:
    pending = [asked]  # the first answer is the one asked beside the metadata

    def ask() -> Any:
        if pending:
            return answer_of(pending.pop(), timeout_s)
        again = admin.describe_configs([resource], request_timeout=timeout_s)[resource]
        return answer_of(again, timeout_s)

    # The metadata listed the topic, so "unknown" only says the broker answering has not
    # caught up yet (it restarted a moment ago): ask again within the time given.
    entries = call_while(ask, failing_with=_unknown_topic, timeout_s=timeout_s)
    return {key: str(entries[key].value or "") for key in keys if key in entries}


def _unknown_topic(error: BaseException) -> bool:
    return isinstance(error, KafkaException) and error.args[0].code() == _UNKNOWN_TOPIC


def ask_topic_id(
    admin: AdminClient, topic: str, timeout_s: float
) -> concurrent.futures.Future[str]:
    """Ask for ``topic``'s id now (a topic deleted and created again gets a new one).

    The future gives the id, or ``""`` when the topic does not exist; any other failure (no
    answer, a refusal) is its exception. Nobody waits for it: it is read once it is done.
    """
    asked = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout_s)[topic]
    answer: concurrent.futures.Future[str] = concurrent.futures.Future()

    def translate(done: concurrent.futures.Future[Any]) -> None:
        try:
            answer.set_result(str(done.result().topic_id))
        except KafkaException as error:
            if error.args and error.args[0].code() in _MISSING_CODES:
                answer.set_result("")
            else:
                answer.set_exception(error)
        except Exception as error:  # whatever it is, the answer's reader sees it
            answer.set_exception(error)

    asked.add_done_callback(translate)
    return answer
