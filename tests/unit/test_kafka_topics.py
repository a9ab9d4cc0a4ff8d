"""Ensuring a topic: its config asked beside its metadata, every failure a KafkaClientError."""

from __future__ import annotations

import concurrent.futures
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from client_balance._kafka import _topics
from client_balance._kafka._answers import answer_of
from client_balance.errors import KafkaClientError


class _SilentAdmin:
    """An admin client whose topic exists and whose config query never answers."""

    def list_topics(self, topic: str, timeout: float) -> Any:
        """The topic, with one partition on one replica."""
        partition = SimpleNamespace(replicas=[1])
        found = SimpleNamespace(error=None, partitions={0: partition})
        return SimpleNamespace(brokers={1: None}, topics={topic: found})

    def describe_configs(self, resources: list[Any], request_timeout: float) -> Any:
        """A future that is never completed: the broker went away mid-call."""
        return {resources[0]: concurrent.futures.Future()}


def test_a_config_query_that_times_out_is_a_retriable_kafka_client_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ensure_topic whose describe_configs never answers: KafkaClientError, not TimeoutError.

    Seen in the 3-broker failover test: GroupView.load raised a bare TimeoutError from the
    thread watching the group while a leader was killed.
    """
    monkeypatch.setattr(_topics, "admin_client", lambda *args: _SilentAdmin())
    with pytest.raises(KafkaClientError, match=r"no answer within 0\.1 s") as failed:
        _topics.ensure_topic("127.0.0.1:9", "status", config={"cleanup.policy": ""},
                            kafka=None, timeout_s=0.1)  # fmt: skip
    assert failed.value.retriable


class _GivenAdmin(_SilentAdmin):
    """A member's own admin client: falsy, as confluent-kafka's is with nothing queued."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __len__(self) -> int:
        return 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        """Counted, then the silent admin's answer."""
        self.asked.append(topic)
        return super().list_topics(topic, timeout)


def test_a_given_admin_client_is_asked_even_though_it_is_falsy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ensure_topic(admin=...) asks the member's client, never a new one.

    confluent-kafka's AdminClient has ``__len__`` (its queue), so ``admin or new_client()``
    made a new client, with its own connections, on the way to every first message.
    """

    def refuse(*args: object) -> object:
        raise AssertionError("a new admin client was made")

    monkeypatch.setattr(_topics, "admin_client", refuse)
    given = _GivenAdmin()
    with pytest.raises(KafkaClientError):
        _topics.ensure_topic("127.0.0.1:9", "status", config={"cleanup.policy": ""},
                            kafka=None, timeout_s=0.1, admin=given)  # type: ignore[arg-type]  # fmt: skip
    assert given.asked == ["status"]


class _JustRestartedAdmin(_SilentAdmin):
    """A cluster whose metadata lists the topic while the broker asked does not know it yet.

    That broker restarted a moment ago and has not caught up.
    """

    def __init__(self, unknown_answers: int) -> None:
        self.unknown_answers = unknown_answers

    def describe_configs(self, resources: list[Any], request_timeout: float) -> Any:
        """UNKNOWN_TOPIC_OR_PART ``unknown_answers`` times, then the config."""
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if self.unknown_answers:
            self.unknown_answers -= 1
            answer.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
        else:
            answer.set_result({"cleanup.policy": SimpleNamespace(value="compact")})
        return {resources[0]: answer}


def test_a_topic_unknown_to_a_just_restarted_broker_is_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ensure_topic retries a config query answered UNKNOWN_TOPIC_OR_PART for a listed topic.

    Seen in the 3-broker test that kills the status topic's leader: a worker restarted at once
    failed its start with UNKNOWN_TOPIC_OR_PART from the broker that had just come back.
    """
    monkeypatch.setattr(_topics, "admin_client", lambda *args: _JustRestartedAdmin(2))
    state = _topics.ensure_topic("127.0.0.1:9", "status", config={"cleanup.policy": ""},
                                kafka=None, timeout_s=5.0)  # fmt: skip
    assert state.config == {"cleanup.policy": "compact"}


def test_a_topic_that_stays_unknown_fails_with_the_brokers_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A config query answered UNKNOWN_TOPIC_OR_PART until the time is up raises that error."""
    monkeypatch.setattr(_topics, "admin_client", lambda *args: _JustRestartedAdmin(10**6))
    with pytest.raises(KafkaClientError, match=r"UNKNOWN_TOPIC_OR_PART|Unknown topic") as failed:
        _topics.ensure_topic("127.0.0.1:9", "status", config={"cleanup.policy": ""},
                            kafka=None, timeout_s=0.3)  # fmt: skip
    assert failed.value.kafka_code == KafkaError.UNKNOWN_TOPIC_OR_PART


class _OrderedAdmin(_JustRestartedAdmin):
    """Records the order of its calls; the topic exists unless ``missing``."""

    def __init__(self, *, missing: bool = False) -> None:
        super().__init__(unknown_answers=1 if missing else 0)
        self.missing = missing
        self.calls: list[str] = []

    def list_topics(self, topic: str, timeout: float) -> Any:
        """Recorded; the topic, or no topic when ``missing``."""
        self.calls.append("list_topics")
        if self.missing:
            self.missing = False  # listed once created
            return SimpleNamespace(brokers={1: None}, topics={})
        partition = SimpleNamespace(replicas=[1], leader=1)
        found = SimpleNamespace(error=None, partitions={0: partition})
        return SimpleNamespace(brokers={1: None}, topics={topic: found})

    def describe_configs(self, resources: list[Any], request_timeout: float) -> Any:
        """Recorded, then answered as the just-restarted admin does."""
        self.calls.append("describe_configs")
        return super().describe_configs(resources, request_timeout)

    def create_topics(self, topics: list[Any], request_timeout: float) -> Any:
        """Recorded; created at once."""
        self.calls.append("create_topics")
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)
        return {topics[0].topic: done}


def test_the_config_of_an_existing_topic_is_asked_beside_its_metadata() -> None:
    """ensure_topic sends the config query before the metadata call and asks nothing more.

    Both lie on the way to every first message: one after the other they cost a round trip.
    """
    admin = _OrderedAdmin()
    state = _topics.ensure_topic("127.0.0.1:9", "status", config={"cleanup.policy": ""},
                                kafka=None, timeout_s=5.0, admin=admin)  # type: ignore[arg-type]  # fmt: skip
    assert admin.calls == ["describe_configs", "list_topics"]
    assert state.config == {"cleanup.policy": "compact"}


def test_a_missing_topic_is_created_whatever_the_early_config_query_said() -> None:
    """The config asked before the metadata fails for a missing topic; the topic is created."""
    admin = _OrderedAdmin(missing=True)
    state = _topics.ensure_topic("127.0.0.1:9", "status", config={"cleanup.policy": "compact"},
                                kafka=None, timeout_s=5.0, admin=admin)  # type: ignore[arg-type]  # fmt: skip
    assert state.created
    assert admin.calls[:3] == ["describe_configs", "list_topics", "create_topics"]


class _RacedAdmin(_SilentAdmin):
    """Another client creates the topic, with one replica on three brokers, just before us.

    The metadata asked first does not list it yet; the create answers TOPIC_ALREADY_EXISTS.
    """

    def __init__(self) -> None:
        self.listed = 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        """Not there at the first answer; then there, on one replica, with a leader."""
        self.listed += 1
        if self.listed == 1:
            return SimpleNamespace(brokers={1: None, 2: None, 3: None}, topics={})
        partition = SimpleNamespace(replicas=[2], leader=2)
        found = SimpleNamespace(error=None, partitions={0: partition})
        return SimpleNamespace(brokers={1: None, 2: None, 3: None}, topics={topic: found})

    def describe_configs(self, resources: list[Any], request_timeout: float) -> Any:
        """The other client's config."""
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        answer.set_result({"cleanup.policy": SimpleNamespace(value="delete")})
        return {resources[0]: answer}

    def create_topics(self, topics: list[Any], request_timeout: float) -> Any:
        """Refused: it exists by now."""
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        answer.set_exception(KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS)))
        return {topics[0].topic: answer}


def test_a_topic_created_meanwhile_by_another_client_is_described_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A create that lost the race reports the topic's own replicas and config, not ours.

    Seen on the 3-broker cluster: a status topic made with one replica just before a member
    started passed as one of three replicas, so the member did not refuse it.
    """
    monkeypatch.setattr(_topics, "admin_client", lambda *args: _RacedAdmin())
    state = _topics.ensure_topic("127.0.0.1:9", "status", config={"cleanup.policy": "compact"},
                                kafka=None, timeout_s=5.0)  # fmt: skip
    assert (state.replication_factor, state.brokers) == (1, 3)
    assert state.config == {"cleanup.policy": "delete"}
    assert not state.created


def test_an_answers_failure_is_raised_fresh_so_the_future_holds_no_frames() -> None:
    """``answer_of`` raises a copy of a future's error: the stored one gathers no traceback."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    stored = KafkaException(KafkaError(36, "topic exists"))
    future.set_exception(stored)
    with pytest.raises(KafkaException) as raised:
        answer_of(future, 0)
    assert raised.value is not stored
    assert raised.value.args[0].code() == 36
    assert stored.__traceback__ is None
    done: concurrent.futures.Future[str] = concurrent.futures.Future()
    done.set_result("answer")
    assert answer_of(done) == "answer"


class _ExistingTopicAdmin:
    """The topic exists already (2 partitions); ``failing`` metadata answers fail first."""

    def __init__(self, failing: int = 0) -> None:
        self.failing = failing

    def create_topics(self, new: list[Any], **kwargs: Any) -> dict[str, Any]:
        made: dict[str, Any] = {}
        for topic in new:
            made[topic.topic] = concurrent.futures.Future()
            made[topic.topic].set_exception(
                KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS))
            )
        return made

    def list_topics(self, topic: str, timeout: float) -> Any:
        if self.failing:
            self.failing -= 1
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        partitions = {n: SimpleNamespace(leader=1, replicas=[1]) for n in range(2)}
        found = SimpleNamespace(error=None, partitions=partitions)
        return SimpleNamespace(brokers={1: None}, topics={topic: found})


def test_waiting_for_leaders_asks_again_after_a_failed_metadata_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A metadata request that failed is asked again; one that keeps failing: KafkaClientError.

    confluent-kafka's own exception escaped at the first failure (the review of 2026-11-29).
    """
    monkeypatch.setattr(_topics, "admin_client", lambda *args: _ExistingTopicAdmin(failing=1))
    _topics.create_topics("127.0.0.1:9", {"orders": 2}, exist_ok=True, timeout_s=5.0)
    monkeypatch.setattr(_topics, "admin_client", lambda *args: _ExistingTopicAdmin(failing=99))
    with pytest.raises(KafkaClientError, match="_TRANSPORT"):
        _topics.create_topics("127.0.0.1:9", {"orders": 2}, exist_ok=True, timeout_s=0.5)


def test_an_existing_topic_with_fewer_partitions_is_not_waited_for_in_vain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """exist_ok and a topic of 2 partitions asked as 4: its own leaders are waited for, not 4.

    It waited out the whole timeout, then said the cluster had no leaders.
    """
    monkeypatch.setattr(_topics, "admin_client", lambda *args: _ExistingTopicAdmin())
    _topics.create_topics("127.0.0.1:9", {"orders": 4}, exist_ok=True, timeout_s=2.0)
