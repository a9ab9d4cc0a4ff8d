"""The library logs through the standard library and never prints on its own."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable

import pytest

from client_balance import ClientBalanceConsumer, ClientBalanceSettings
from tests.integration.workers import REPO, produce

pytestmark = pytest.mark.integration

_CONSUME_ALL = textwrap.dedent(
    """
    import sys
    from client_balance import ClientBalanceConsumer, ClientBalanceSettings, NoMessageError

    bootstrap, group, topic, total = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    settings = ClientBalanceSettings(
        bootstrap_servers=bootstrap, group_id=group, start_position="earliest"
    )
    seen = 0
    with ClientBalanceConsumer(settings) as consumer:
        consumer.start([topic], source_count=1, node_id=0)
        while seen < total:
            batch = consumer.get_message(timeout_s=30)
            seen += len(batch.messages)
            consumer.confirm(batch.confirm_context)
        consumer.disconnect(f"{topic}:0")  # a release, a withdrawal and a report: log events
    sys.exit(0 if seen == total else 3)
    """
)


def test_a_consumer_run_with_default_settings_prints_nothing(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """A whole consumer run in an app that set up no logging prints nothing at all."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 2_000, partitions=2)
    group = f"silent-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [sys.executable, "-c", _CONSUME_ALL, kafka_bootstrap, group, topic, "2000"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "client_balance" not in done.stderr
    assert "consumer started" not in done.stderr


def test_an_application_that_configures_logging_gets_structured_events(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Events reach stdlib logging as client_balance.*, their fields as record attributes."""
    topic = new_topic(partitions=1)
    settings = ClientBalanceSettings(
        bootstrap_servers=kafka_bootstrap, group_id=f"logged-{uuid.uuid4().hex[:8]}"
    )
    with (
        caplog.at_level(logging.INFO, logger="client_balance"),
        ClientBalanceConsumer(settings) as consumer,
    ):
        consumer.start([topic], source_count=1, node_id=0)
        assert consumer.is_partitions_ready(30)
    started = [r for r in caplog.records if r.getMessage() == "consumer started"]
    assert len(started) == 1
    record = started[0]
    assert record.name == "client_balance.consumer"
    assert record.__dict__["mode"] == "node"
    assert record.__dict__["topics"] == [topic]
    registered = [r for r in caplog.records if r.getMessage() == "partitions registered"]
    assert registered
    assert registered[0].name == "client_balance.reconcile"
    assert any(r.getMessage() == "consumer stopped" for r in caplog.records)
