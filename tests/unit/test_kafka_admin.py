"""The admin helpers map every way Kafka fails to answer into KafkaClientError."""

from __future__ import annotations

import concurrent.futures
from types import SimpleNamespace
from typing import Any

import pytest

from client_balance._kafka import _admin
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
    monkeypatch.setattr(_admin, "admin_client", lambda *args: _SilentAdmin())
    with pytest.raises(KafkaClientError, match=r"no answer within 0\.1 s") as failed:
        _admin.ensure_topic("127.0.0.1:9", "status", config={"cleanup.policy": ""},
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

    monkeypatch.setattr(_admin, "admin_client", refuse)
    given = _GivenAdmin()
    with pytest.raises(KafkaClientError):
        _admin.ensure_topic("127.0.0.1:9", "status", config={"cleanup.policy": ""},
                            kafka=None, timeout_s=0.1, admin=given)  # type: ignore[arg-type]  # fmt: skip
    assert given.asked == ["status"]
