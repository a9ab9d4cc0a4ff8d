"""Group modes: TubeMQ's meaning of source_count, elastic by name, contradictions refused."""

from __future__ import annotations

import json

import pytest

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, ConfigError, GroupMode
from client_balance.consumer._parse import resolve_mode
from client_balance.membership import MemberReport


@pytest.mark.parametrize(
    ("source_count", "node_id", "mode", "expected"),
    [
        (3, 1, None, GroupMode.NODE),
        (-1, 0, None, GroupMode.MANUAL),  # TubeMQ's start(map, -1, 0): the application decides
        (-1, -1, None, GroupMode.MANUAL),
        (0, 0, None, GroupMode.MANUAL),
        (-1, -1, "elastic", GroupMode.ELASTIC),
        (-1, -1, GroupMode.MANUAL, GroupMode.MANUAL),
        (2, 0, "node", GroupMode.NODE),
    ],
)
def test_the_mode_follows_tubemq_unless_named(
    source_count: int, node_id: int, mode: str | None, expected: GroupMode
) -> None:
    """source_count > 0 is node mode, <= 0 manual; elastic only when asked for by name."""
    assert resolve_mode(source_count, node_id, mode, None) is expected


def test_a_mode_in_the_settings_is_the_default_and_start_overrides_it() -> None:
    """settings.mode applies when start() names none; start(mode=...) wins."""
    assert resolve_mode(-1, -1, None, GroupMode.ELASTIC) is GroupMode.ELASTIC
    assert resolve_mode(-1, -1, "manual", GroupMode.ELASTIC) is GroupMode.MANUAL


@pytest.mark.parametrize(
    ("source_count", "node_id", "mode", "message"),
    [
        (-1, 0, "node", "mode='node' needs source_count > 0, not -1"),
        (3, 5, None, r"node_id=5 is not allowed with source_count=3; use a node id in \[0, 2\]"),
        (3, 0, "elastic", "source_count=3 is not allowed with mode='elastic'"),
        (2, 0, "manual", "source_count=2 is not allowed with mode='manual'"),
        (-1, -1, "sticky", "mode='sticky' is not allowed; use one of 'node', 'manual', 'elastic'"),
        (-1, -1, 3, "mode=3 is not allowed"),
        ("3", 0, None, "source_count='3' and node_id=0 must be ints"),
    ],
)
def test_contradictions_name_the_values_and_what_is_allowed(
    source_count: object, node_id: object, mode: object, message: str
) -> None:
    """A mode that contradicts source_count or node_id is a ConfigError saying why."""
    with pytest.raises(ConfigError, match=message):
        resolve_mode(source_count, node_id, mode, None)


def test_start_refuses_a_contradictory_mode_before_touching_kafka() -> None:
    """start() checks the mode first: nothing is contacted for an argument error."""
    settings = ClientBalanceSettings(bootstrap_servers="127.0.0.1:9", group_id="g")
    consumer = ClientBalanceConsumer(settings)
    with pytest.raises(ConfigError, match="mode='elastic'"):
        consumer.start(["orders"], source_count=4, node_id=0, mode="elastic")
    assert consumer.mode is None
    assert consumer.is_shutdown()


def test_settings_take_a_mode_by_name_or_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mode setting accepts the names, also as CLIENT_BALANCE_MODE, and refuses others."""
    assert ClientBalanceSettings(bootstrap_servers="h:1", group_id="g").mode is None
    monkeypatch.setenv("CLIENT_BALANCE_MODE", "elastic")
    assert ClientBalanceSettings(bootstrap_servers="h:1", group_id="g").mode is GroupMode.ELASTIC
    with pytest.raises(ConfigError, match="mode="):
        ClientBalanceSettings(bootstrap_servers="h:1", group_id="g", mode="everyone")


@pytest.mark.parametrize(("source_count", "mode"), [(3, "node"), (-1, "elastic"), (0, "manual")])
def test_reports_written_before_modes_read_as_what_they_meant(source_count: int, mode: str) -> None:
    """A report without a mode: positive count = node, -1 = elastic (issue 5's rule), 0 = manual."""
    report = MemberReport("c1", "host", 1, 0, source_count, ("t",), "modulo", "v", 30.0)
    data = json.loads(report.encode())
    del data["mode"]
    assert MemberReport.decode(json.dumps(data).encode()).mode == mode
