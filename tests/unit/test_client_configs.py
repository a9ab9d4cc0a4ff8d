"""What the SDK sets on the clients it builds, and that the user's ``kafka`` wins."""

from __future__ import annotations

from typing import Any

import pytest

from client_balance import ClientBalanceSettings
from client_balance._kafka import _clients, fetch_client
from client_balance.membership._writer import StatusWriter


@pytest.mark.parametrize(
    ("kafka", "sparse"), [({}, False), ({"enable.sparse.connections": True}, True)]
)
def test_the_fetching_consumer_connects_to_every_broker_unless_kafka_says_otherwise(
    monkeypatch: pytest.MonkeyPatch, kafka: dict[str, Any], sparse: bool
) -> None:
    """Sparse connections held its first queries back ~10 ms; ``kafka`` restores them."""
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(_clients, "Consumer", made.append)
    settings = ClientBalanceSettings(bootstrap_servers="127.0.0.1:9", group_id="g", kafka=kafka)
    fetch_client(settings, lambda error: None)
    assert made[0]["enable.sparse.connections"] is sparse


@pytest.mark.parametrize(
    ("kafka", "sparse"), [({}, False), ({"enable.sparse.connections": True}, True)]
)
def test_the_status_writer_connects_to_every_broker_unless_kafka_says_otherwise(
    monkeypatch: pytest.MonkeyPatch, kafka: dict[str, Any], sparse: bool
) -> None:
    """Sparse connections held the join's write back ~10 ms; ``kafka`` restores them."""
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(_clients, "Producer", _Recorded(made))
    writer = StatusWriter("127.0.0.1:9", "status", 0, kafka=kafka, timeout_s=0.01)
    writer.close()
    assert made[0]["enable.sparse.connections"] is sparse


class _Recorded:
    """A stand-in for a client class: records the config, answers nothing (no broker)."""

    def __init__(self, made: list[dict[str, Any]]) -> None:
        self._made = made

    def __call__(self, config: dict[str, Any]) -> _Recorded:
        self._made.append(config)
        return self

    def list_topics(self, *args: object) -> None:
        return None

    def flush(self, *args: object) -> int:
        return 0

    def purge(self) -> None:
        return None

    def close(self) -> None:
        return None
