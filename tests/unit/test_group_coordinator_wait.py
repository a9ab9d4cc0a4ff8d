"""Waiting for the group coordinator: asked again while it loads, refused at once by an ACL."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from client_balance._kafka import _admin
from client_balance.errors import KafkaClientError


class _Probe:
    """A group client whose committed() fails with ``codes`` in turn, then answers."""

    def __init__(self, *codes: int) -> None:
        self.codes, self.asked = list(codes), 0

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        self.asked += 1
        if self.codes:
            raise KafkaException(KafkaError(self.codes.pop(0)))
        return partitions

    def close(self) -> None:
        return None


def test_a_coordinator_still_loading_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """COORDINATOR_NOT_AVAILABLE twice, then an answer: the wait ends there."""
    probe = _Probe(KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_NOT_AVAILABLE)
    monkeypatch.setattr(_admin, "group_client", lambda *args: probe)
    _admin.wait_for_group_coordinator("127.0.0.1:9", timeout_s=10.0)
    assert probe.asked == 3


def test_a_refused_group_is_raised_at_once_not_after_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GROUP_AUTHORIZATION_FAILED will not pass by waiting: raised on the first answer.

    It was asked again until the timeout (30 s by default), as if the group were loading (the
    review of 2026-11-29).
    """
    probe = _Probe(*[KafkaError.GROUP_AUTHORIZATION_FAILED] * 50)
    monkeypatch.setattr(_admin, "group_client", lambda *args: probe)
    with pytest.raises(KafkaClientError) as refused:
        _admin.wait_for_group_coordinator("127.0.0.1:9", timeout_s=5.0)
    assert refused.value.kafka_name == "GROUP_AUTHORIZATION_FAILED"
    assert probe.asked == 1
