"""The member's background threads outlive what the application's callbacks raise."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, NoMessageError
from tests.integration.workers import produce, wait_until

pytestmark = pytest.mark.integration


def test_a_callback_that_raises_leaves_every_background_thread_running(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stats_cb that raises six times: logged; the member reports, fetches and stops cleanly.

    confluent-kafka raises a callback's exception again from the poll() that served it, and
    keeps a reference to it. The status reader, the report thread and the fetch thread caught
    Kafka's errors only, so each died of it: the member stopped reporting, dropped its
    partitions at the end of its lease and answered 406 from then on, without an error.
    """
    raises_left = 0
    lock = threading.Lock()

    def stats_cb(_document: str) -> None:
        nonlocal raises_left
        with lock:
            if raises_left > 0:
                raises_left -= 1
                raise ConnectionError("token endpoint unreachable")

    topic = new_topic(partitions=1)
    consumer = ClientBalanceConsumer(
        kafka_settings(
            lease_timeout_s=6.0, report_interval_s=1.0, request_timeout_s=3.0,
            kafka={"stats_cb": stats_cb, "statistics.interval.ms": 100},
        )
    )  # fmt: skip
    consumer.start([topic], source_count=1, node_id=0)
    with caplog.at_level(logging.ERROR, logger="client_balance"):
        with lock:
            raises_left = 6
        wait_until(lambda: raises_left == 0, 30, "the callback to raise six times")
        time.sleep(7.0)  # past a lease: a member whose report thread died dropped its partitions
    produce(kafka_bootstrap, topic, 10, partitions=1)
    got = 0
    deadline = time.monotonic() + 30
    while got < 10:
        assert time.monotonic() < deadline, f"{got} of 10 messages"
        try:
            batch = consumer.get_message(timeout_s=10)
        except NoMessageError:
            continue
        got += len(batch.messages)
        consumer.confirm(batch.confirm_context)
    raised = [r for r in caplog.records if r.getMessage() == "application callback raised; ignored"]
    assert len(raised) == 6
    assert {getattr(r, "callback", None) for r in raised} == {"stats_cb"}
    consumer.commit()
    assert consumer.offset_infos()[f"1:{topic}:0"].committed == 10
    consumer.shutdown()
