"""Fixtures shared by the integration tests: consumers, group members, worker groups."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from client_balance import ClientBalanceConsumer, ClientBalanceSettings
from tests.integration.usecases import UseCaseGroup
from tests.integration.workers import Group

_groups = itertools.count(1)

GroupFactory = Callable[..., Group]
"""``(bootstrap, topic, source_count, *, mode=None) -> Group``."""


def _consumers(
    kafka_bootstrap: str, defaults: Callable[[], dict[str, Any]]
) -> Iterator[Callable[..., ClientBalanceConsumer]]:
    made: list[ClientBalanceConsumer] = []

    def make(**overrides: Any) -> ClientBalanceConsumer:
        values = {"bootstrap_servers": kafka_bootstrap, **defaults(), **overrides}
        made.append(ClientBalanceConsumer(ClientBalanceSettings(**values)))
        return made[-1]

    yield make
    for consumer in made:
        consumer.shutdown()


@pytest.fixture
def make_consumer(kafka_bootstrap: str) -> Iterator[Callable[..., ClientBalanceConsumer]]:
    """Factory of consumers on a fresh group each (``group_id=`` to share one); shut down after."""
    yield from _consumers(
        kafka_bootstrap,
        lambda: {
            "group_id": f"cb-{os.getpid()}-{next(_groups)}",
            "start_position": "earliest",
            "reconcile_interval_s": 1.0,
            "commit": "sync",
        },
    )


@pytest.fixture
def kafka_settings(kafka_bootstrap: str) -> Callable[..., ClientBalanceSettings]:
    """Factory of settings on the session broker in a fresh group, reading from the start."""

    def make(**overrides: Any) -> ClientBalanceSettings:
        values = {
            "bootstrap_servers": kafka_bootstrap,
            "group_id": f"cb-{os.getpid()}-{next(_groups)}",
            "start_position": "earliest",
            "reconcile_interval_s": 1.0,
            **overrides,
        }
        return ClientBalanceSettings(**values)

    return make


@pytest.fixture
def make_member(kafka_bootstrap: str) -> Iterator[Callable[..., ClientBalanceConsumer]]:
    """Factory of consumers in one fresh group (``group_id=`` to share another), short leases."""
    default_group = f"status-{uuid.uuid4().hex[:8]}"
    yield from _consumers(
        kafka_bootstrap,
        lambda: {
            "group_id": default_group,
            "start_position": "earliest",
            "report_interval_s": 1.0,
            "lease_timeout_s": 6.0,
            "request_timeout_s": 2.0,
            "reconcile_interval_s": 1.0,
        },
    )


@pytest.fixture
def groups(tmp_path: Path) -> Iterator[GroupFactory]:
    """Factory of worker-process groups; kills their workers at teardown."""
    made: list[Group] = []

    def make(
        bootstrap: str,
        topic: str,
        source_count: int,
        *,
        mode: str | None = None,
        status_topic: str | None = None,
    ) -> Group:
        folder = tmp_path / f"group{len(made)}"
        folder.mkdir()
        made.append(Group(bootstrap, topic, source_count, folder, mode, status_topic=status_topic))
        return made[-1]

    yield make
    for group in made:
        group.kill_leftovers()


@pytest.fixture
def usecase_groups(tmp_path: Path) -> Iterator[Callable[..., UseCaseGroup]]:
    """Factory of use-case worker groups (``(bootstrap, topics)``); kills workers at teardown."""
    made: list[UseCaseGroup] = []

    def make(bootstrap: str, topics: list[str]) -> UseCaseGroup:
        folder = tmp_path / f"usecase{len(made)}"
        folder.mkdir()
        made.append(UseCaseGroup(bootstrap, topics, folder))
        return made[-1]

    yield make
    for group in made:
        group.kill_leftovers()
