"""Hostile input at every public entry point of the consumer: only the library's errors escape.

Settings from keyword arguments and from the environment, ``start()``'s arguments, keys and
offsets of ``connect``/``disconnect``/``pin``, ``confirm``'s contexts and flags, and
``get_message``'s timeouts, on a consumer that is not started (offline) and on one running
against the session's broker. A call may succeed or raise a :class:`ClientBalanceError`;
anything else (``TypeError``, ``OverflowError``, ``KeyError`` ...) is a bug, and so is a call
that outlives its timeout.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client_balance import ClientBalanceConsumer, ClientBalanceError, ClientBalanceSettings
from tests.integration.workers import produce

OFFLINE: dict[str, Any] = {"bootstrap_servers": "127.0.0.1:9", "group_id": "g"}

hostile_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.binary(max_size=6),
)
hostile = st.recursive(
    hostile_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(max_size=8), inner, max_size=3),
        st.frozensets(st.text(max_size=5), max_size=3),
    ),
    max_leaves=6,
)
FIELDS = sorted(ClientBalanceSettings.model_fields)
keys = st.one_of(
    hostile,
    st.from_regex(r"(-?[0-9]{1,3}:)?[a-z._-]{0,8}:-?[0-9]{1,4}", fullmatch=True),
)


def _not_a_long_wait(value: object) -> bool:
    """Whether ``value`` is no wait longer than 0.2 s (a valid long wait would really wait)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return True
    return not (math.isfinite(value) and value > 0.2)


def _library_errors_only(call: Callable[[], object]) -> None:
    with contextlib.suppress(ClientBalanceError):
        call()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(FIELDS), hostile, max_size=4))
def test_settings_from_keyword_arguments(values: dict[str, Any]) -> None:
    """Any keyword values: the settings are made, or ConfigError says why."""
    _library_errors_only(lambda: ClientBalanceSettings(**{**OFFLINE, **values}))


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), st.text(max_size=20), max_size=3))
def test_settings_from_the_environment(variables: dict[str, str]) -> None:
    """Any CLIENT_BALANCE_* text: the settings are made, or ConfigError says why."""
    with pytest.MonkeyPatch.context() as patch:
        for field, text in variables.items():
            if "\x00" not in text:
                patch.setenv(f"CLIENT_BALANCE_{field.upper()}", text)
        _library_errors_only(lambda: ClientBalanceSettings(**OFFLINE))


@settings(max_examples=150, deadline=None)
@given(st.tuples(hostile, hostile, hostile, hostile), keys, hostile)
def test_calls_on_a_consumer_that_is_not_started(
    start_arguments: tuple[Any, Any, Any, Any], key: Any, value: Any
) -> None:
    """Every call with any arguments on an unstarted consumer raises only library errors."""
    # Arguments start() accepts make it dial a port nobody listens on: it fails within 0.2 s.
    quick = {"request_timeout_s": 0.2, "report_interval_s": 0.4, "lease_timeout_s": 1.0}
    consumer = ClientBalanceConsumer(ClientBalanceSettings(**OFFLINE, **quick))
    calls: list[Callable[[], object]] = [
        lambda: consumer.connect(key, value),
        lambda: consumer.disconnect(key),
        lambda: consumer.pin(key, value),
        lambda: consumer.unpin(key),
        lambda: consumer.confirm(key, value),
        lambda: consumer.get_message(value),
        lambda: consumer.is_partitions_ready(value),
        lambda: consumer.reconcile_now(value),
    ]
    for call in calls:
        _library_errors_only(call)
    try:
        topics, count, node, mode = start_arguments
        consumer.start(topics, count, node, mode=mode, pinned=value)
    except ClientBalanceError:
        pass
    finally:
        consumer.shutdown()


@pytest.fixture(scope="module")
def running(kafka_bootstrap: str) -> Iterator[tuple[ClientBalanceConsumer, str]]:
    """One consumer holding a 2-partition topic with data, for the whole module."""
    from client_balance import admin

    topic = f"hostile-{time.monotonic_ns()}"
    admin.create_topics(kafka_bootstrap, {topic: 2})
    produce(kafka_bootstrap, topic, 50, partitions=2)
    consumer = ClientBalanceConsumer(
        ClientBalanceSettings(
            bootstrap_servers=kafka_bootstrap,
            group_id=f"{topic}-group",
            start_position="earliest",
            reconcile_interval_s=1.0,
            refused_connect_wait_s=0.0,
        )
    )
    consumer.start([topic], -1, 0)
    yield consumer, topic
    consumer.shutdown()


@pytest.mark.integration
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    key=keys, value=hostile, timeout=st.one_of(hostile.filter(_not_a_long_wait), st.floats(0, 0.2))
)
def test_calls_on_a_running_consumer(
    running: tuple[ClientBalanceConsumer, str], key: Any, value: Any, timeout: Any
) -> None:
    """On a running consumer too: library errors only, and no call outlives its timeout."""
    consumer, topic = running
    for call in (
        lambda: consumer.connect(key, value),
        lambda: consumer.disconnect(key),
        lambda: consumer.confirm(key, value),
        lambda: consumer.connect(f"{topic}:{value}"),
    ):
        _library_errors_only(call)
    began = time.monotonic()
    _library_errors_only(lambda: consumer.get_message(timeout))
    waited = time.monotonic() - began
    a_wait = isinstance(timeout, int | float) and not isinstance(timeout, bool)
    if a_wait and math.isfinite(timeout) and timeout >= 0:
        assert waited < timeout + 5.0  # a generous margin: these machines are noisy
