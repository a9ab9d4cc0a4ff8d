"""librdkafka's own log lines of the SDK's producers go through ``logging``, not to stderr."""

from __future__ import annotations

import gc
import logging
import re
import time
import weakref
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance import ClientBalanceSettings
from client_balance._kafka._clients import (
    KAFKA_LOGGER,
    RepeatedLines,
    admin_client,
    commit_client,
)
from client_balance._kafka._log_pump import PUMP_EVERY_S
from client_balance.consumer._redelivery import Redeliveries
from client_balance.errors import ClientBalanceError
from client_balance.keys import TopicPartition
from client_balance.membership._writer import StatusWriter

UNREACHABLE = "127.0.0.1:9"  # the discard port: nothing listens, every connect fails at once
LIBRDKAFKA_LINE = re.compile(r"%\d\|")


class _Message:
    def offset(self) -> int:
        return 0

    def headers(self) -> None:
        return None

    def value(self) -> bytes:
        return b"v"

    def key(self) -> None:
        return None


def _kafka_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "client_balance.kafka"]


def test_a_dead_letter_producer_cut_off_logs_through_logging_not_stderr(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The failing connects of a dead-letter write: records of client_balance.kafka, no %N|."""
    caplog.set_level(logging.INFO, logger="client_balance.kafka")
    settings = ClientBalanceSettings(
        bootstrap_servers=UNREACHABLE, group_id="g", max_redeliveries=0,
        redelivery_policy="dead-letter", dead_letter_topic="dead", request_timeout_s=2.0,
    )  # fmt: skip
    redeliveries = Redeliveries(settings)
    try:
        with pytest.raises(ClientBalanceError, match="no answer within 2 s"):
            redeliveries.set_aside(TopicPartition("t", 0), "1:t:0", 0, 1, [_Message()])
    finally:
        redeliveries.close()
    assert not LIBRDKAFKA_LINE.search(capfd.readouterr().err)
    records = _kafka_records(caplog)
    assert records, "no librdkafka line reached logging"
    assert any("rdkafka#producer" in r.getMessage() for r in records)


def _write_to_nowhere(kafka: dict[str, Any]) -> None:
    """One status write to an unreachable broker, which fails."""
    writer = StatusWriter(UNREACHABLE, "status", 0, kafka=kafka, timeout_s=2.0)
    try:
        with pytest.raises(ClientBalanceError):
            writer.write([(b"k", b"v")])
    finally:
        writer.close()


def test_a_status_writer_cut_off_logs_through_logging_not_stderr(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A status write to an unreachable broker: its librdkafka lines are logging records."""
    caplog.set_level(logging.INFO, logger="client_balance.kafka")
    _write_to_nowhere({})
    assert not LIBRDKAFKA_LINE.search(capfd.readouterr().err)
    assert _kafka_records(caplog), "no librdkafka line reached logging"


def test_a_logger_of_the_users_in_kafka_settings_gets_the_lines_instead(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """``kafka={"logger": ...}`` is kept: librdkafka's lines go to the application's logger."""
    caplog.set_level(logging.INFO)
    mine = logging.getLogger("my.kafka")
    kafka: dict[str, Any] = {"logger": mine}  # what settings' admin_config() passes on
    _write_to_nowhere(kafka)
    assert not LIBRDKAFKA_LINE.search(capfd.readouterr().err)
    names = {r.name for r in caplog.records if "rdkafka#" in r.getMessage()}
    assert names == {"my.kafka"}


def test_librdkafka_lines_lose_url_credentials_and_keep_their_template_otherwise() -> None:
    """A line with a URL's user:password is masked; any other keeps its message and args.

    The filter rewrote every record into its formatted text, so a handler grouping records
    by their template saw none (the review of 2026-11-29, later).
    """
    said: list[logging.LogRecord] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record)

    handler = _Keep()
    KAFKA_LOGGER.addHandler(handler)
    try:
        KAFKA_LOGGER.error("%s from %s", "OIDC", "https://cid:S3CRET@idp/token")
        KAFKA_LOGGER.error("%s to %s failed", "Connect", "127.0.0.1:9092")
    finally:
        KAFKA_LOGGER.removeHandler(handler)
    assert said[0].getMessage() == "OIDC from https://**********@idp/token"
    assert (said[1].msg, said[1].args) == ("%s to %s failed", ("Connect", "127.0.0.1:9092"))


def test_alike_lines_pass_once_a_window_and_the_next_says_how_many_were_held() -> None:
    """A hundred "Connect failed" lines in 10 s: one passes; the next after it counts 99.

    The SDK's own events on the same logger are never held: two of one name are not alike
    (their fields differ), and dropping them hid a warning about other partitions.
    """
    now = [0.0]
    repeated = RepeatedLines(window_s=10.0, clock=lambda: now[0])

    def line(text: str) -> logging.LogRecord:
        args = ("FAIL", "rdkafka#consumer-1", text)  # what confluent-kafka logs
        return logging.LogRecord(
            "client_balance.kafka", logging.ERROR, "", 0, "%s [%s] %s", args, None
        )

    failed = "Connect to 127.0.0.1:9 failed: refused (after {}ms in state CONNECT)"
    passed = []
    for tick in range(100):
        now[0] = tick * 0.09
        passed.append(repeated.filter(line(failed.format(tick % 3))))
    assert passed == [True] + [False] * 99
    assert repeated.filter(line("another"))
    event = logging.LogRecord("client_balance.kafka", logging.WARNING, "", 0, "an event", (), None)
    assert repeated.filter(event)
    assert repeated.filter(event)
    now[0] = 10.0
    after = line(failed.format(0))
    assert repeated.filter(after)
    assert after.getMessage().endswith("(99 alike lines held back in the 10 s before)")


def test_a_commit_client_cut_off_logs_a_line_not_one_per_connect(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two seconds of a commit looking for its coordinator: a line or two, not some 800.

    It tries the dead broker again every few milliseconds, each try a "Connect to ... failed"
    record: a member's log took about 400 a second while its cluster was away.
    """
    caplog.set_level(logging.INFO, logger="client_balance.kafka")
    consumer = commit_client(ClientBalanceSettings(bootstrap_servers=UNREACHABLE, group_id="g"))
    try:
        consumer.commit(offsets=[KafkaTopicPartition("t", 0, 5)], asynchronous=True)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            consumer.poll(0.1)
    finally:
        consumer.close()
    connects = [r for r in _kafka_records(caplog) if "Connect to" in r.getMessage()]
    assert 1 <= len(connects) <= 2, len(connects)


def test_an_admin_clients_lines_reach_logging_not_stderr(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """An admin client cut off: its lines are served to client_balance.kafka, none to stderr.

    Nothing polls an admin client, so librdkafka wrote them to stderr from C: `status`
    against a cluster that was down printed some 2,400 lines in 30 s before its one error.
    """
    caplog.set_level(logging.INFO, logger="client_balance.kafka")
    client = admin_client(UNREACHABLE)
    with pytest.raises(KafkaException):
        client.list_topics(timeout=2.0)
    deadline = time.monotonic() + 5 * PUMP_EVERY_S
    while time.monotonic() < deadline and not _kafka_records(caplog):
        time.sleep(0.1)
    del client
    assert not LIBRDKAFKA_LINE.search(capfd.readouterr().err)
    assert any("Connect to" in r.getMessage() for r in _kafka_records(caplog))


def test_an_admin_client_dropped_by_its_owner_is_freed_though_its_lines_are_served() -> None:
    """The thread that serves admin clients' lines keeps none alive: dropped, it is freed.

    Its loop variable held the last client polled, with its threads and connections, for as
    long as no newer admin client came (the review of 2026-11-29, third round).
    """
    client = admin_client(UNREACHABLE)
    gone = weakref.ref(client)
    time.sleep(2.5 * PUMP_EVERY_S)  # polled at least twice while it lived
    del client
    deadline = time.monotonic() + 3 * PUMP_EVERY_S
    while gone() is not None and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.1)
    assert gone() is None
