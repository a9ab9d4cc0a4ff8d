"""Test helpers for projects that use client-balance (a pytest plugin; needs pytest).

Enable with ``pytest_plugins = ["client_balance.testing"]`` in your ``conftest.py``. Then:

- ``kafka_bootstrap``: the bootstrap address of one real Kafka broker for the whole session, a
  :class:`~client_balance.broker.LocalKafka` started on first use, or the cluster named by
  ``CLIENT_BALANCE_TEST_BOOTSTRAP``. If no broker can be had, the tests that need one **fail**
  with the reason; they are never skipped.
- ``new_topic``: creates a topic with a unique name on that broker and returns the name.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator

import pytest

from client_balance import admin
from client_balance.broker import DEFAULT_KAFKA_VERSION, LocalKafka
from client_balance.errors import ClientBalanceError

__all__ = ["BROKER_ENV", "kafka_bootstrap", "new_topic"]

BROKER_ENV = "CLIENT_BALANCE_TEST_BOOTSTRAP"
_topic_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def kafka_bootstrap(request: pytest.FixtureRequest) -> Iterator[str]:
    """Bootstrap servers of the session's real Kafka broker."""
    configured = os.environ.get(BROKER_ENV)
    if configured:
        if not admin.cluster_answers(configured, timeout_s=30.0):
            pytest.fail(f"{BROKER_ENV}={configured} does not answer metadata", pytrace=False)
        request.config.stash[_BROKER_NOTE] = f"the cluster at {configured} ({BROKER_ENV})"
        yield configured
        return
    try:
        broker = LocalKafka().start()
    except ClientBalanceError as error:
        pytest.fail(
            f"integration tests need a real Kafka broker, and LocalKafka could not start one: "
            f"{error}",
            pytrace=False,
        )
    request.config.stash[_BROKER_NOTE] = (
        f"a LocalKafka (Apache Kafka {DEFAULT_KAFKA_VERSION}) at {broker.bootstrap_servers}, "
        f"ready in {broker.startup_s:.1f} s"
    )
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture
def new_topic(kafka_bootstrap: str, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Factory: ``new_topic(partitions=1, config=None) -> name`` of a fresh topic."""

    def create(partitions: int = 1, config: dict[str, str] | None = None) -> str:
        name = _topic_name_for(request.node.name)
        admin.create_topics(kafka_bootstrap, {name: partitions}, config=config)
        return name

    return create


def _topic_name_for(test_name: str) -> str:
    """A unique, legal topic name that shows which test made it."""
    # Kafka's letters and digits are ASCII ones: 'é'.isalnum() too, and Kafka refuses it.
    stem = "".join(c if c.isascii() and c.isalnum() else "-" for c in test_name)[:150]
    return f"t-{os.getpid()}-{next(_topic_numbers)}-{stem}"


_BROKER_NOTE = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say which broker the integration tests ran against."""
    note = terminalreporter.config.stash.get(_BROKER_NOTE, None)
    if note is not None:
        terminalreporter.write_line(f"integration tests ran against {note}")
